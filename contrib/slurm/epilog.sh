#!/bin/sh
# Slurm Epilog snippet (slurm.conf: Epilog=/etc/slurm/epilog.d/wattbatch.sh, or call it from your
# existing epilog). Writes job_energy,job_id=..,user=.. energy_j=..,co2_g=.. to InfluxDB from
# the GPU energy since the prolog and the grid carbon intensity (carbon.zone).
# It never fails the job: a failing epilog drains the node.
"${WATTBATCH_PYTHON:-python3}" -m slurm_plugin.node.epilog
exit 0
