#!/usr/bin/env bash
# The whole test suite, real-cluster tier included: set-up, local cluster up, pytest, down.
# Extra arguments go to pytest (e.g. scripts/test.sh -m "not cluster" for the pure tiers).
#
# Runs once per Slurm in ${WATTBATCH_TEST_SLURM:-system 24.11 26.05}: "system" is the host's
# Slurm; 24.11 (Debian 13 trixie) and 26.05 (Debian sid) run this same script inside a Debian
# root (`wattctl localcluster exec --slurm V`, built on first use), with that root's Python and
# Slurm; on 24.11 scripts/demo.sh runs there too. Exit 0 only if every run passed.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
export PATH="$PWD/.venv/bin:$PATH"
keep=${WATTBATCH_KEEP_CLUSTER:-0}

# A cluster that was already up before this run (the demo's, a developer's) is left up: only
# what this run started is stopped. One this run starts, it starts with no job (--fresh): jobs
# an earlier run left would otherwise come back and run beside the tests. `up` re-renders the
# hook scripts and replaces a collector that another checkout started, so a reused cluster runs
# this checkout's code.
host_run() {
  local was_up=0 fresh=--fresh
  wattctl localcluster status >/dev/null 2>&1 && was_up=1 && fresh=
  wattctl localcluster up $fresh || { wattctl localcluster status; return 1; }
  eval "$(wattctl localcluster env)"
  python -m pytest -p no:cacheprovider "$@"
  local rc=$?
  if [ "$keep" = 1 ] || [ "$was_up" = 1 ]; then
    echo "test: local cluster left up (${WATTBATCH_LOCALCLUSTER_DIR:-default state dir})" >&2
  else
    wattctl localcluster down
  fi
  return $rc
}

summary=()
overall=0
for release in ${WATTBATCH_TEST_SLURM:-system 24.11 26.05}; do
  start=$SECONDS
  root_was_up=0
  [ "$release" = system ] || ! wattctl localcluster status --slurm "$release" >/dev/null 2>&1 \
    || root_was_up=1
  if [ "$release" = system ]; then
    (host_run "$@")
    rc=$?
  else
    echo "test: Slurm $release: the whole suite inside its Debian root" >&2
    wattctl localcluster exec --slurm "$release" -- \
      env WATTBATCH_TEST_SLURM=system bash scripts/test.sh "$@"
    rc=$?
  fi
  summary+=("slurm $release: pytest exit $rc in $((SECONDS - start)) s")
  [ "$rc" = 0 ] || overall=1
  if [ "$release" = 24.11 ]; then
    start=$SECONDS
    echo "test: Slurm $release: scripts/demo.sh inside its Debian root" >&2
    wattctl localcluster exec --slurm "$release" -- bash scripts/demo.sh
    rc=$?
    summary+=("slurm $release: demo exit $rc in $((SECONDS - start)) s")
    [ "$rc" = 0 ] || overall=1
  fi
  if [ "$release" != system ] && [ "$keep" != 1 ] && [ "$root_was_up" = 0 ]; then
    wattctl localcluster down --slurm "$release"
  fi
done
printf '%s\n' "${summary[@]}"
exit $overall
