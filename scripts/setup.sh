#!/usr/bin/env bash
# Installs everything wattbatch needs on a fresh Debian bookworm machine (run as root):
# Debian's Slurm, munge, MariaDB and InfluxDB (only when missing), and a virtual environment
# at .venv with wattbatch installed from this checkout (not editable) plus the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg in slurm-wlm slurmdbd munge mariadb-server influxdb; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${need[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
echo "setup: installing wattbatch into .venv"
.venv/bin/python -m pip install -q --no-cache-dir ".[test]"
