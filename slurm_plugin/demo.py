"""The demo: a small mixed workload on the local cluster, through wattbatch, then reconcile.

Run by ``scripts/demo.sh`` after ``wattctl localcluster up`` (SLURM_CONF and
WATTBATCH_SITE_CONFIG point at the local cluster). It acts as a user would: every submission
is a ``wattbatch`` command line, every admin step a ``wattctl`` one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from . import config as site_config
from .proc import run
from .resources import data_dir

TRAIN = f"{sys.executable} -m slurm_plugin.emulated_train"

# (name, wattbatch options, training arguments): a mix of sizes, sharing and timing
WORKLOAD: list[tuple[str, list[str], str]] = [
    ("resnet18", ["--gres=gpu:1", "-t", "10", "--wb-app=resnet18"],
     "--steps 120 --step-s 0.25 --steps-per-epoch 40"),
    ("transformer-2gpu", ["--gres=gpu:2", "-t", "10", "--wb-app=transformer"],
     "--steps 80 --step-s 0.25 --steps-per-epoch 20"),
    ("resnet18-share", ["--gres=gpu:1", "-t", "10", "--wb-app=resnet18", "--wb-share"],
     "--steps 100 --step-s 0.2 --steps-per-epoch 25"),
    ("alexnet-share", ["--gres=gpu:1", "-t", "10", "--wb-app=alexnet", "--wb-share"],
     "--steps 100 --step-s 0.2 --steps-per-epoch 25"),
    ("wavenet-later", ["--gres=gpu:1", "-t", "5", "--begin=now+30", "--wb-app=wavenet"],
     "--steps 40 --step-s 0.2 --steps-per-epoch 20"),
    ("preprocess", ["-t", "5", "--cpus-per-task=1"], ""),
]


def wattctl(*args: str, timeout_s: float = 120.0) -> str:
    return run([sys.executable, "-m", "slurm_plugin.cli", *args], timeout_s=timeout_s).stdout


def submit(name: str, opts: list[str], train_args: str, workdir: Path, policy: str) -> str:
    body = (f"{TRAIN} {train_args} --checkpoint {workdir}/{name}.ckpt" if train_args
            else "sleep 5; echo preprocessed")
    script = workdir / f"{name}.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --job-name={name}\n"
                      f"#SBATCH --output={workdir}/{name}-%j.out\n\n{body}\n")
    argv = [sys.executable, "-m", "wrapper.cli", "--parsable", f"--wb-policy={policy}",
            "--wb-explain", *opts, str(script)]
    done = run(argv, timeout_s=60)
    for line in done.stderr.splitlines():
        print(f"    {line}")
    return done.stdout.strip().split(";")[0]


def job_rows(cfg: site_config.SiteConfig, ids: list[str]) -> list[dict]:
    from .slurm.snapshot import history, snapshot

    live = snapshot(cfg).jobs
    done = {r.job_id: r for r in history(cfg, since="now-1hours")}
    rows = []
    for jid in ids:
        j = live.get(jid)
        if j is not None:
            gpus = ",".join(f"{u.node}:{u.index}{'/s' + str(u.shards) if u.shards else ''}"
                            for u in j.uses)
            rows.append({"job_id": jid, "name": j.name, "state": j.state,
                         "nodes": ",".join(j.nodes) or "-", "gpus": gpus or "-",
                         "share": "shard" if j.shards else ("gpu" if j.gpus else "cpu"),
                         "restarts": j.restart_count, "reason": j.reason})
        elif jid in done:
            r = done[jid]
            tres = r.alloc_tres
            share = ("shard" if "gres/shard" in tres else "gpu" if "gres/gpu" in tres else "cpu")
            gpus = tres.get("gres/shard") or tres.get("gres/gpu") or "-"
            rows.append({"job_id": jid, "name": r.name, "state": r.state,
                         "nodes": ",".join(r.nodes) or "-", "gpus": gpus, "share": share,
                         "restarts": 0, "reason": f"exit {r.exit_code}"})
        else:
            rows.append({"job_id": jid, "name": "?", "state": "UNKNOWN", "nodes": "-",
                         "gpus": "-", "share": "-", "restarts": 0, "reason": ""})
    return rows


def job_energy(cfg: site_config.SiteConfig, ids: list[str]) -> dict[str, dict]:
    """job id -> summed ``job_energy`` of the finished jobs (the epilog's record): energy,
    CO2, how the GPU energy was split. {} when InfluxDB cannot be read."""
    from .errors import TelemetryError
    from .telemetry.influx import InfluxClient, quote_str

    if not ids:
        return {}
    where = " OR ".join(f'"job_id" = {quote_str(j)}' for j in ids)
    try:
        series = InfluxClient.from_config(cfg).query(
            f'SELECT "energy_j", "co2_g", "split" FROM "job_energy" WHERE {where} '
            'GROUP BY "job_id"')
    except TelemetryError as exc:
        print(f"   (no per-job energy: {exc})")
        return {}
    out: dict[str, dict] = {}
    for s in series:
        job = out.setdefault(str(s.tags.get("job_id")), {"energy_j": 0.0, "co2_g": 0.0,
                                                          "split": ""})
        for _, energy, co2, split in s.values:
            job["energy_j"] += energy or 0.0
            job["co2_g"] += co2 or 0.0
            job["split"] = split or job["split"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="wattbatch-demo", description=__doc__)
    ap.add_argument("--policy", default="slurm-default", help="policy for the workload")
    ap.add_argument("--wait-s", type=float, default=90.0, help="how long to let jobs run")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)
    cfg = site_config.load()

    print("1. local cluster")
    print("   " + wattctl("localcluster", "status").replace("\n", "\n   ").rstrip())
    print("2. built-in carbon data -> InfluxDB")
    carbon = data_dir() / "carbon-GB-2023-01.csv"
    print("   " + wattctl("carbon", "import", str(carbon), "--zone", "GB",
                          "--shift-to-now").strip())
    print(f"3. submitting {len(WORKLOAD)} jobs through wattbatch (policy {args.policy})")
    workdir = Path(tempfile.mkdtemp(prefix="wattbatch-demo-"))
    ids = []
    for name, opts, train in WORKLOAD:
        jid = submit(name, opts, train, workdir, args.policy)
        print(f"   {name:12s} -> job {jid}")
        ids.append(jid)
    print(f"4. letting the jobs run for up to {args.wait_s:.0f} s")
    deadline = time.time() + args.wait_s
    while time.time() < deadline:
        states = {r["state"] for r in job_rows(cfg, ids)}
        if "PENDING" not in states:
            break
        time.sleep(3)
    print("5. one reconcile pass")
    rec = json.loads(wattctl("reconcile", "--json", f"--policy={args.policy}"))
    print(f"   {len(rec['actions'])} actions, pass {rec['total_s'] * 1000:.0f} ms, "
          f"{rec['jobs_seen']} jobs seen")
    rows = job_rows(cfg, ids)
    time.sleep(3)                       # the last epilogs write their records
    energy = job_energy(cfg, ids)
    for r in rows:
        e = energy.get(r["job_id"])
        r["gpu_energy_j"] = round(e["energy_j"]) if e else "-"
        r["co2_g"] = round(e["co2_g"], 2) if e else "-"
        r["split"] = e["split"] if e else "-"
    if args.json:
        print(json.dumps({"jobs": rows, "reconcile": rec, "workdir": str(workdir)}, indent=2))
        return 0
    print("6. summary")
    head = ("job_id", "name", "state", "nodes", "gpus", "share", "restarts", "reason",
            "gpu_energy_j", "co2_g", "split")
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in head]
    print("   " + "  ".join(h.upper().ljust(w) for h, w in zip(head, widths)))
    for r in rows:
        print("   " + "  ".join(str(r[h]).ljust(w) for h, w in zip(head, widths)))
    print("   (GPU energy per job from the node epilogs: a shared GPU's energy split between"
          " its jobs; see docs/energy.md)")
    print(f"   job output and checkpoints: {workdir}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
