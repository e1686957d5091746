#!/usr/bin/env bash
# The whole test suite, real-cluster tier included: set-up, local clusters up, pytest, down.
# Extra arguments go to pytest (e.g. scripts/test.sh -m "not cluster" for the pure tiers).
#
# The pure tiers (tests/unit, tests/sim) do not depend on Slurm: they run once, on the host's
# Python. The real-cluster tier (tests/cluster, with the pure tests marked every_python) runs
# once per Slurm in ${WATTBATCH_TEST_SLURM:-system 24.11 26.05}, all releases at the same time,
# each on its own cluster and ports: "system" is the host's Slurm; 24.11 (Debian 13 trixie) and
# 26.05 (Debian sid) run inside a Debian root (`wattctl localcluster exec --slurm V`, built on
# first use), with that root's Python and Slurm; on 24.11 scripts/demo.sh runs there too. Each
# release's lines are prefixed with its name. Exit 0 only if every run passed.
#
# WATTBATCH_TEST_TIER=pure|cluster runs one side only, the releases one after the other (this
# is how the script calls itself inside a root).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
export PATH="$PWD/.venv/bin:$PATH"
keep=${WATTBATCH_KEEP_CLUSTER:-0}
releases=${WATTBATCH_TEST_SLURM:-system 24.11 26.05}
NO_TESTS=5          # pytest's exit code when the arguments select nothing of a tier

# pytest on one tier; "nothing selected" is a pass (the arguments named tests of another tier).
tier_pytest() {
  local tier=$1; shift
  WATTBATCH_TEST_TIER=$tier python -m pytest -p no:cacheprovider "$@"
  local rc=$?
  [ "$rc" = "$NO_TESTS" ] && rc=0
  return $rc
}

# Whether the arguments select any test of the real-cluster tier (no arguments: yes).
selects_cluster_tests() {
  [ $# = 0 ] && return 0
  local listed     # whole, then searched: grep -q on the pipe would stop pytest mid-write
  listed=$(WATTBATCH_TEST_TIER=cluster python -m pytest -p no:cacheprovider --collect-only -q \
    "$@" 2>/dev/null)
  grep -q '^tests/cluster/' <<<"$listed"
}

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
  tier_pytest cluster "$@"
  local rc=$?
  if [ "$keep" = 1 ] || [ "$was_up" = 1 ]; then
    echo "test: local cluster left up (${WATTBATCH_LOCALCLUSTER_DIR:-default state dir})" >&2
  else
    wattctl localcluster down
  fi
  return $rc
}

# The real-cluster tier on one release (and the demo on 24.11); prints "slurm R: ..." lines
# for the summary on fd 3.
release_run() {
  local release=$1; shift
  local start=$SECONDS rc root_was_up=0
  [ "$release" = system ] || ! wattctl localcluster status --slurm "$release" >/dev/null 2>&1 \
    || root_was_up=1
  if [ "$release" = system ]; then
    (host_run "$@")
    rc=$?
  else
    echo "test: Slurm $release: the real-cluster tier inside its Debian root" >&2
    wattctl localcluster exec --slurm "$release" -- \
      env WATTBATCH_TEST_SLURM=system WATTBATCH_TEST_TIER=cluster bash scripts/test.sh "$@"
    rc=$?
  fi
  echo "slurm $release: pytest exit $rc in $((SECONDS - start)) s" >&3
  local overall=$rc
  if [ "$release" = 24.11 ]; then
    start=$SECONDS
    echo "test: Slurm $release: scripts/demo.sh inside its Debian root" >&2
    wattctl localcluster exec --slurm "$release" -- bash scripts/demo.sh
    rc=$?
    echo "slurm $release: demo exit $rc in $((SECONDS - start)) s" >&3
    [ "$rc" = 0 ] || overall=1
  fi
  if [ "$release" != system ] && [ "$keep" != 1 ] && [ "$root_was_up" = 0 ]; then
    wattctl localcluster down --slurm "$release"
  fi
  return $overall
}

# Inside a root, or a caller that asked for one tier: that tier, release after release.
if [ -n "${WATTBATCH_TEST_TIER:-}" ]; then
  overall=0
  for release in $releases; do
    if [ "$WATTBATCH_TEST_TIER" = pure ]; then
      tier_pytest pure "$@" || overall=1
    elif [ "$release" = system ]; then
      (host_run "$@") || overall=1
    else
      release_run "$release" "$@" 3>/dev/null || overall=1
    fi
    [ "$WATTBATCH_TEST_TIER" = pure ] && break
  done
  exit $overall
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/wattbatch-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS
cluster_releases=()
if selects_cluster_tests "$@"; then
  cluster_releases=($releases)
else
  echo "test: the arguments select no real-cluster test: no cluster is started" >&2
fi
for release in "${cluster_releases[@]}"; do
  (
    release_run "$release" "$@" 3>"$work/summary-$release" 2>&1 \
      | sed -u "s/^/[slurm $release] /"
    echo "${PIPESTATUS[0]}" >"$work/rc-$release"
  ) &
done
# The pure tiers meanwhile, at a lower priority than the clusters' daemons and tests (whose
# waits on Slurm have deadlines).
nice -n 10 bash -c 'WATTBATCH_TEST_TIER=pure python -m pytest -p no:cacheprovider "$@"' \
  pure-tiers "$@" 2>&1 | sed -u "s/^/[pure] /"
pure_rc=${PIPESTATUS[0]}
[ "$pure_rc" = "$NO_TESTS" ] && pure_rc=0
wait
overall=0
[ "$pure_rc" = 0 ] || overall=1
echo "pure tiers: pytest exit $pure_rc"
for release in "${cluster_releases[@]}"; do
  cat "$work/summary-$release" 2>/dev/null
  rc=$(cat "$work/rc-$release" 2>/dev/null || echo 1)
  [ "$rc" = 0 ] || overall=1
done
echo "whole suite: $((SECONDS - start)) s"
exit $overall
