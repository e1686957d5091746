#!/bin/sh
# Bring the local test cluster up (installs missing Debian packages; idempotent).
# Usage: contrib/localcluster/up.sh [--state-dir DIR] [--port NAME=PORT ...] [--json]
set -eu
wattctl localcluster up "$@"
