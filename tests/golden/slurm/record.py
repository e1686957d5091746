"""Record the golden Slurm output of one release from the local cluster (cancels every job).

    eval "$(wattctl localcluster env)" && python tests/golden/slurm/record.py [--out DIR]
    wattctl localcluster exec --slurm 24.11 -- python tests/golden/slurm/record.py

Writes into ``<release>/`` next to this file (e.g. ``24.11/``) the raw output (commands in
COMMANDS.txt) and the parsed model as expected_*.json. A job in every state the parsers must
read: whole GPUs, shards on one GPU (typed and untyped), on two GPUs and across two nodes,
typed GPUs across two nodes, pending for resources, pinned to a typed GPU, held, ``--begin``,
requeued with a new GPU count, completed, failed with an exit code, cancelled, timed out.
Finished jobs leave ``squeue`` ``MinJobAge`` (10 s) after they end, so the short ones are
started once the time-limit job has timed out and everything is read at once. Review the diff
of expected_*.json before committing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from slurm_plugin import config
from slurm_plugin.errors import CommandError
from slurm_plugin.localcluster import cancel_all_jobs, resolve
from slurm_plugin.slurm import actions
from slurm_plugin.slurm.cli import slurm
from slurm_plugin.slurm.formats import CURRENT, detect
from slurm_plugin.holders import ACTIVE_STATES, attach_jobs
from slurm_plugin.slurm.parse import (SACCT_FIELDS, parse_jobs, parse_nodes, parse_sacct,
                                      parse_scontrol_record, plain)

HERE = Path(__file__).resolve().parent
SLEEP = "#!/bin/bash\nsleep 900\n"
# name -> sbatch options; every one runs `sleep 900` unless it has --wrap
LONG = {
    "big": ["-w", "gpu1", "--gres=gpu:4", "-t", "120"],
    "multi2": ["-w", "gpu2", "--gres=gpu:2", "--comment=app=resnet50", "-t", "60"],
    "shardA": ["-w", "gpu2", "--gres=shard:g3:2", "--comment=app=bert"],
    "shardB": ["-w", "gpu2", "--gres=shard:g3:1"],
    "shard3": ["-w", "gpu3", "--gres=shard:3"],
    "shard6": ["-w", "gpu3", "--gres=shard:6"],
    "twonode": ["-N", "2", "-w", "gpu[3-4]", "--gres=gpu:g3:1"],
    "shard2node": ["-N", "2", "-w", "gpu[3-4]", "--gres=shard:1"],
    "cpuonly": ["-w", "gpu4"],
    "cancelme": ["-w", "gpu4", "--gres=shard:g2:1"],
    "pinned": ["-w", "gpu1", "--gres=gpu:g2:1"],
    "resources": ["--gres=gpu:4"],
    "held": ["-H", "--gres=gpu:1"],
    "later": ["--begin=now+3600", "--gres=gpu:1"],
}
SHORT = {"fail3": ["-w", "gpu4", "--wrap", "exit 3"], "ok": ["-w", "gpu4", "--wrap", "true"]}
FINISHED = {"timeout": "TIMEOUT", "fail3": "FAILED", "ok": "COMPLETED", "cancelme": "CANCELLED"}
SHOW = ("multi2", "shardA", "shard6", "twonode", "shard2node", "pinned", "held", "resized")


def _states(cfg) -> dict[str, str]:
    out = slurm("squeue", ["-h", "-t", "all", "-o", "%i %T"], cfg).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def _wait(cfg, what: str, done, timeout_s: float) -> dict[str, str]:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        states = _states(cfg)
        if done(states):
            return states
        time.sleep(0.5)
    raise SystemExit(f"record: timed out waiting for {what}: {states}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="directory (default: <release>/)")
    args = ap.parse_args()
    os.environ["TZ"] = "UTC"      # sacct prints local time
    time.tzset()
    os.chdir("/tmp")              # job working directories recorded in the JSON
    cfg = config.load()
    cancel_all_jobs(resolve())
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 5))
    common = ["--output=/dev/null"]
    ids: dict[str, str] = {}
    refused: dict[str, str] = {}

    def submit(name: str, argv: list[str]) -> None:
        script = None if "--wrap" in argv else SLEEP
        try:
            ids[name] = actions.submit([*common, "-J", name, *argv], script, cfg)
        except CommandError as exc:      # recorded: a release may refuse a request shape
            refused[name] = exc.stderr.strip()

    submit("timeout", ["-w", "gpu4", "-t", "1"])
    submit("resized", ["-w", "gpu4", "--gres=gpu:1", "--comment=app=gpt2"])
    _wait(cfg, "resized running", lambda s: s.get(ids["resized"]) == "RUNNING", 60)
    actions.resize(ids["resized"], 2, cfg)    # restart count 1, 2 GPUs once it runs again
    for name, argv in LONG.items():
        submit(name, argv)
    _wait(cfg, "timeout job timed out", lambda s: s.get(ids["timeout"]) == "TIMEOUT", 150)
    for name, argv in SHORT.items():
        submit(name, argv)
    actions.cancel(ids["cancelme"], cfg)
    _wait(cfg, "finished jobs and the requeued one",
          lambda s: all(s.get(ids[n]) == st for n, st in FINISHED.items())
          and s.get(ids["resized"]) == "RUNNING", 30)

    commands: list[str] = []

    def run(name: str, cmd: str, argv: list[str]) -> str:
        text = slurm(cmd, argv, cfg).stdout
        (out / name).write_text(text)
        commands.append(f"{name}: {cmd} {' '.join(argv)}")
        return text

    squeue_text = slurm("squeue", ["--json", "-t", "all"], cfg).stdout
    fmt = detect(json.loads(squeue_text), "squeue --json")
    out = args.out or HERE / ".".join(fmt.release.split(".")[:2])
    out.mkdir(parents=True, exist_ok=True)
    (out / "squeue.json").write_text(squeue_text)
    commands.append("squeue.json: squeue --json -t all")
    node_cmd = ["sinfo", ["--json"]] if fmt.legacy else ["scontrol", ["--json", "show", "nodes"]]
    nodes_text = run("nodes.json", *node_cmd)
    if not fmt.legacy:            # the grouped rows the parsers refuse, for that test
        run("sinfo.json", "sinfo", ["--json"])
    older = [v for v in CURRENT if not fmt.legacy and v < fmt.data_parser]
    for version in older:         # the versions this release still serves on request
        (out / version).mkdir(exist_ok=True)
        run(f"{version}/squeue.json", "squeue", [f"--json={version}", "-t", "all"])
        run(f"{version}/nodes.json", "scontrol", [f"--json={version}", "show", "nodes"])
    sacct_args = ["-P", "-X", f"--format={','.join(SACCT_FIELDS)}", "--allusers",
                  f"--starttime={since}"]
    deadline = time.time() + 60        # slurmdbd stores job ends a moment after they happen
    while True:
        recorded = {r.job_id: r.state for r in parse_sacct(slurm("sacct", sacct_args, cfg).stdout)}
        if all(recorded.get(ids[n]) == st for n, st in FINISHED.items()):
            break
        if time.time() > deadline:
            raise SystemExit(f"record: sacct lacks the finished jobs: {recorded}")
        time.sleep(1)
    sacct_text = run("sacct.txt", "sacct", sacct_args)
    shown = [slurm("scontrol", ["show", "job", "-d", "-o", ids[n]], cfg).stdout.strip()
             for n in SHOW if n in ids]
    (out / "scontrol_jobs.txt").write_text("\n".join(shown) + "\n")
    commands.append(f"scontrol_jobs.txt: scontrol show job -d -o ID, for {', '.join(SHOW)}")
    (out / "COMMANDS.txt").write_text(
        f"Recorded by record.py on the local cluster (Slurm {fmt.release}, data_parser "
        f"{fmt.data_parser}).\nJob ids: {json.dumps(ids, sort_keys=True)}\n"
        f"Refused at submission: {json.dumps(refused, sort_keys=True)}\n"
        + "\n".join(commands) + "\n")
    jobs = parse_jobs(json.loads(squeue_text))
    _dump(out / "expected_jobs.json", jobs)
    _dump(out / "expected_nodes.json", attach_jobs(parse_nodes(json.loads(nodes_text)),
                                                   [j for j in jobs if j.state in ACTIVE_STATES]))
    _dump(out / "expected_sacct.json", parse_sacct(sacct_text))
    _dump(out / "expected_scontrol.json", [parse_scontrol_record(s) for s in shown])
    cancel_all_jobs(resolve())
    print(f"recorded Slurm {fmt.release} into {out}"
          + (f"; refused: {', '.join(refused)}" if refused else ""))
    return 0


def _dump(path: Path, objs) -> None:
    path.write_text(json.dumps(plain(objs), indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    sys.exit(main())
