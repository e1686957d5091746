#!/usr/bin/env bash
# The main job: set-up, local cluster up, built-in carbon data into InfluxDB, a small mixed
# workload submitted through wattbatch, one reconcile pass, and a summary of what ran where.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
wattctl localcluster up
eval "$(wattctl localcluster env)"
exec python -m slurm_plugin.demo "$@"
