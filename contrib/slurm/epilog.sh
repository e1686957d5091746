#!/bin/sh
# Slurm Epilog snippet (slurm.conf: Epilog=/etc/slurm/epilog.d/wattbatch.sh, or call it from your
# existing epilog). Writes job_energy (energy_j, co2_g, shared_gpu_s, split, ...) to InfluxDB
# from the collector's per-job ledger (a shared GPU's energy split between its jobs) and a
# wb: summary into the job's AdminComment; see docs/energy.md.
# It never fails the job: a failing epilog drains the node.
"${WATTBATCH_PYTHON:-python3}" -m slurm_plugin.node.epilog
exit 0
