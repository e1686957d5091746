#!/usr/bin/env bash
# Installs everything wattbatch needs on a fresh Debian machine (run as root; Debian 12
# bookworm, also 13 trixie and sid inside `wattctl localcluster --slurm` roots): Debian's Slurm,
# munge, MariaDB and InfluxDB (only when missing), and a virtual environment at .venv with
# wattbatch installed from this checkout (not editable) plus the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for pkg in slurm-wlm slurmdbd munge mariadb-server influxdb; do
  # an influxd already on PATH counts (Debian sid has no influxdb package: the sid root gets
  # the host's influxd in /usr/local/bin)
  [ "$pkg" = influxdb ] && command -v influxd >/dev/null 2>&1 && continue
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
python3 -m venv --help >/dev/null 2>&1 && python3 -c 'import ensurepip' 2>/dev/null \
  || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  have=()
  for pkg in "${need[@]}"; do
    policy=$(apt-cache policy "$pkg" 2>/dev/null || true)
    if [[ "$policy" == *"Candidate: "[0-9]* ]]; then
      have+=("$pkg")
    else
      echo "setup: this Debian release has no package $pkg; skipped" >&2
    fi
  done
  [ ${#have[@]} -eq 0 ] || apt-get install -y -q --no-install-recommends "${have[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
echo "setup: installing wattbatch into .venv"
# setuptools reuses build/lib when its files look newer than the sources; a checkout copied
# with its mtimes kept (the Debian roots' copy) would install stale modules from it
rm -rf build
.venv/bin/python -m pip install -q --no-cache-dir ".[test]"
