"""Re-record the golden Slurm output from the local cluster (cancels every job on it first).

    . <state>/env.sh && python tests/golden/slurm/record.py

Writes the raw output next to this file (commands in COMMANDS.txt) and the parsed model
objects as expected_*.json. Review the diff of expected_*.json before committing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from slurm_plugin import config
from slurm_plugin.localcluster import cancel_all_jobs, resolve
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.cli import slurm
from slurm_plugin.slurm.parse import SACCT_FIELDS, attach_jobs, parse_jobs, parse_nodes, \
    parse_sacct, parse_scontrol_record, plain

HERE = Path(__file__).resolve().parent
SLEEP = "#!/bin/bash\nsleep 900\n"
# (sbatch options, script or None for --wrap)
WORKLOAD = [
    (["-J", "multi2", "--gres=gpu:2", "--comment=app=resnet50", "-t", "60"], SLEEP),
    (["-J", "shardA", "-w", "gpu2", "--gres=shard:g1:2", "--comment=app=bert"], SLEEP),
    (["-J", "shardB", "-w", "gpu2", "--gres=shard:g1:1"], SLEEP),
    (["-J", "shard3", "-w", "gpu3", "--gres=shard:3"], SLEEP),
    (["-J", "twonode", "-N", "2", "-w", "gpu[3-4]", "--gres=gpu:g3:1"], SLEEP),
    (["-J", "big", "-w", "gpu1", "--gres=gpu:4"], SLEEP),
    (["-J", "held", "-H", "--gres=gpu:1"], SLEEP),
    (["-J", "later", "--begin=now+3600", "--gres=gpu:1"], SLEEP),
    (["-J", "cpuonly", "-w", "gpu4"], SLEEP),
    (["-J", "fail3", "-w", "gpu4", "--wrap", "exit 3"], None),
    (["-J", "ok", "-w", "gpu4", "--wrap", "true"], None),
]


def _write(name: str, text: str, command: str, commands: list[str]) -> str:
    (HERE / name).write_text(text)
    commands.append(f"{name}: {command}")
    return text


def _dump(name: str, objs) -> None:
    (HERE / name).write_text(json.dumps(plain(objs), indent=1, sort_keys=True) + "\n")


def main() -> int:
    os.chdir("/tmp")     # job working directories recorded in the JSON
    cfg = config.load()
    cancel_all_jobs(resolve())
    common = ["--output=/dev/null"]
    resized = actions.submit([*common, "-J", "resized", "-w", "gpu1", "--gres=gpu:1",
                              "--comment=app=gpt2"], SLEEP, cfg)
    time.sleep(2)
    actions.resize(resized, 2, cfg)    # restart_cnt 1, 2 GPUs once it runs again
    ids = {argv[argv.index("-J") + 1]: actions.submit([*common, *argv], script, cfg)
           for argv, script in WORKLOAD}
    ids["resized"] = resized
    deadline = time.time() + 60
    while time.time() < deadline:
        states = dict(line.split() for line in slurm(
            "squeue", ["-h", "-t", "all", "-o", "%i %T"], cfg).stdout.splitlines())
        if states.get(resized) == "RUNNING" and states.get(ids["ok"]) == "COMPLETED":
            break
        time.sleep(1)
    else:
        print(f"workload not settled: {states}", file=sys.stderr)
        return 1
    commands: list[str] = []
    sinfo = _write("sinfo.json", slurm("sinfo", ["--json"], cfg).stdout, "sinfo --json", commands)
    squeue = _write("squeue.json", slurm("squeue", ["--json"], cfg).stdout, "squeue --json",
                    commands)
    sacct_args = ["-P", "-X", f"--format={','.join(SACCT_FIELDS)}", "--allusers",
                  "--starttime=now-1hours"]
    sacct = _write("sacct.txt", slurm("sacct", sacct_args, cfg).stdout,
                   "sacct " + " ".join(sacct_args), commands)
    show = _write("scontrol_job.txt", slurm("scontrol", ["show", "job", "-d", "-o",
                                                         ids["multi2"]], cfg).stdout,
                  f"scontrol show job -d -o {ids['multi2']}  (job multi2)", commands)
    (HERE / "COMMANDS.txt").write_text(
        "Recorded by record.py on the local cluster (Slurm 22.05.8, wattctl localcluster up).\n"
        "Job ids: " + json.dumps(ids, sort_keys=True) + "\n" + "\n".join(commands) + "\n")
    jobs = parse_jobs(json.loads(squeue))
    _dump("expected_jobs.json", jobs)
    _dump("expected_nodes.json", attach_jobs(parse_nodes(json.loads(sinfo)), jobs))
    _dump("expected_sacct.json", parse_sacct(sacct))
    _dump("expected_scontrol_job.json", parse_scontrol_record(show))
    cancel_all_jobs(resolve())
    print(f"recorded into {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
