#!/bin/sh
# Slurm Prolog snippet (slurm.conf: Prolog=/etc/slurm/prolog.d/wattbatch.sh, or call it from your
# existing prolog). Records each allocated GPU's energy counter at job start
# (SLURM_JOB_ID, SLURM_JOB_GPUS). It never fails the job: a failing prolog drains the node.
# WATTBATCH_PYTHON: the Python that has wattbatch installed (default python3).
"${WATTBATCH_PYTHON:-python3}" -m slurm_plugin.node.prolog
exit 0
