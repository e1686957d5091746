#!/usr/bin/env bash
# The whole test suite, real-cluster tier included: set-up, local cluster up, pytest, down.
# Extra arguments go to pytest (e.g. scripts/test.sh -m "not cluster" for the pure tiers).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
export PATH="$PWD/.venv/bin:$PATH"
wattctl localcluster up || { wattctl localcluster status; exit 1; }
eval "$(wattctl localcluster env)"
python -m pytest -p no:cacheprovider "$@"
rc=$?
[ "${WATTBATCH_KEEP_CLUSTER:-0}" = 1 ] || wattctl localcluster down
exit $rc
