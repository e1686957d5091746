#!/bin/sh
# Cancel every job and stop every daemon of the local test cluster.
# Usage: contrib/localcluster/down.sh [--state-dir DIR] [--json]
set -eu
wattctl localcluster down "$@"
