"""The demo: a small mixed workload on the local cluster, through wattbatch, then reconcile.

Run by ``scripts/demo.sh`` after ``wattctl localcluster up`` (SLURM_CONF and
WATTBATCH_SITE_CONFIG point at the local cluster). It acts as a user would: every submission
is a ``wattbatch`` command line, every admin step a ``wattctl`` one.

By default the workload runs under the site's stack (``policy.stages``), or under the full
stack ``pal+eaco+greenflow+elastic`` where the site names none. It ends with what each stage
did (the ``why`` lines of the submissions and the reconcile pass's actions, by stage) and the
workload's energy and carbon against slurm-default on the same jobs: measured live for the run
it did, and both policies on the cluster's twin in the simulator (``wattctl simulate``), said
as such.
"""

from __future__ import annotations

import argparse
import contextlib
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
FULL_STACK = "pal+eaco+greenflow+elastic"

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


def submit(name: str, opts: list[str], train_args: str, workdir: Path,
           policy: str) -> tuple[str, list[str]]:
    """The job id and the ``--wb-explain`` lines of one submission."""
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
    return done.stdout.strip().split(";")[0], done.stderr.splitlines()


def stage_report(policy: str, explained: dict[str, list[str]],
                 actions: list[dict]) -> dict[str, list[str]]:
    """Per stage ("sizing (elastic)"), what it did: the ``why`` lines the submissions' explain
    printed under its name (``wattbatch: explain: KIND (NAME): ...``), the jobs that got the
    same line named together, then the reconcile pass's actions it emitted."""
    from .policy.registry import get_policy

    stack = get_policy(policy, "--policy")
    kinds = stack.stages() if hasattr(stack, "stages") else ()
    stages = [f"{kind} ({name})" for kind, name in kinds] or [policy]
    said: dict[str, dict[str, list[str]]] = {s: {} for s in stages}
    for job, lines in explained.items():
        for line in lines:
            text = line.strip().removeprefix("wattbatch:").strip().removeprefix("explain:").strip()
            stage = next((s for s in stages if text.startswith(s + ":")), None)
            if stage is not None:
                why = text[len(stage) + 1:].strip()
                said[stage].setdefault(why, []).append(job)
    out = {s: [f"{', '.join(jobs)}: {why}" for why, jobs in whys.items()]
           for s, whys in said.items()}
    for a in actions:
        owner = next((s for s in stages if s.endswith(f"({a.get('policy')})")), stages[0])
        if a.get("kind") not in ("note", "observe"):     # observe: history, no job changed
            out[owner].append(f"reconcile: {a.get('kind')} job {a.get('job_id')} "
                              f"({a.get('status')}): {a.get('why', '')}".rstrip(": "))
    return out


def twin_jobs(workdir: Path) -> Path:
    """The demo's GPU jobs as a canonical trace (submitted together; ``--begin=now+N`` as a
    later submission), run times from their training arguments."""
    lines = ["job_id,submit_s,duration_s,num_gpus,user,app"]
    for k, (name, opts, train) in enumerate(WORKLOAD, start=1):
        gres = next((o for o in opts if o.startswith("--gres=gpu:")), None)
        if gres is None or not train:
            continue
        words = train.split()
        steps, step_s = int(words[words.index("--steps") + 1]), float(words[words.index("--step-s") + 1])
        app = next(o.split("=", 1)[1] for o in opts if o.startswith("--wb-app="))
        begin = next((o for o in opts if o.startswith("--begin=now+")), "--begin=now+0")
        lines.append(f"{k},{int(begin.rsplit('+', 1)[1])},{steps * step_s:g},"
                     f"{gres.rsplit(':', 1)[1]},demo,{app}")
    path = workdir / "demo-twin.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def twin_compare(cfg: site_config.SiteConfig, policy: str, workdir: Path) -> dict:
    """``wattctl simulate --compare slurm-default,POLICY`` on the demo's jobs, on this cluster's
    shape (its nodes, GPUs per node and GPU model, from the snapshot) and carbon zone, with
    sharing allowed as the demo's ``--wb-share`` jobs ask. {} with the reason when it cannot."""
    from .slurm.snapshot import snapshot

    nodes = [n for n in snapshot(cfg).nodes if n.gpus]
    if not nodes:
        return {"error": "the cluster shows no GPU node"}
    model = nodes[0].gpus[0].model or cfg["node.gpu_model"]
    argv = ["simulate", "--trace", str(twin_jobs(workdir)), "--trace-format", "canonical",
            "--nodes", str(len(nodes)), "--gpus-per-node", str(len(nodes[0].gpus)),
            "--gpu-type", model, "--zone", "GB", "--compare", f"slurm-default,{policy}", "--json"]
    env = {**os.environ, "WATTBATCH_POLICY_ALLOW_SHARE": "true"}
    done = run([sys.executable, "-m", "slurm_plugin.cli", *argv], timeout_s=300, env=env,
               check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else
                f"wattctl simulate exited {done.returncode}"}
    runs = json.loads(done.stdout)
    keep = ("policy", "energy_kwh", "gpu_energy_kwh", "carbon_kg", "avg_jct_s", "makespan_s")
    return {"command": "wattctl " + " ".join(argv), "runs": [{k: r.get(k) for k in keep}
                                                             for r in runs]}


def render_twin(twin: dict) -> str:
    if "error" in twin:
        return f"simulated twin: not run ({twin['error']})"
    base, *rest = twin["runs"]
    out = [f"simulated twin of this cluster, same jobs, the whole cluster's energy (every GPU, "
           f"idle ones too, and node base power) over the run ({twin['command']}):"]
    for r in [base, *rest]:
        d_e = (r["energy_kwh"] / base["energy_kwh"] - 1) * 100 if base["energy_kwh"] else 0.0
        d_c = (r["carbon_kg"] / base["carbon_kg"] - 1) * 100 if base["carbon_kg"] else 0.0
        out.append(f"  {r['policy']:<28s} {r['energy_kwh'] * 1000:9.2f} Wh ({d_e:+.1f} %)  "
                   f"{r['carbon_kg'] * 1000:8.3f} g CO2e ({d_c:+.1f} %)  "
                   f"average JCT {r['avg_jct_s']:.0f} s")
    return "\n".join(out)


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
    ap.add_argument("--policy", default="",
                    help="policy or stack for the workload (default: the site's stack, else "
                         f"{FULL_STACK})")
    ap.add_argument("--wait-s", type=float, default=90.0, help="how long to let jobs run")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)
    if args.json:       # the progress to stderr, one JSON object to stdout
        with contextlib.redirect_stdout(sys.stderr):
            return demo(args)
    return demo(args)


def demo(args: argparse.Namespace) -> int:
    cfg = site_config.load()
    if not args.policy:
        name, _, key = site_config.site_policy(cfg)
        args.policy = name if key == "policy.stages" else FULL_STACK

    print("1. local cluster")
    print("   " + wattctl("localcluster", "status").replace("\n", "\n   ").rstrip())
    print("2. built-in carbon data -> InfluxDB")
    carbon = data_dir() / "carbon-GB-2023-01.csv"
    print("   " + wattctl("carbon", "import", str(carbon), "--zone", "GB",
                          "--shift-to-now").strip())
    print(f"3. submitting {len(WORKLOAD)} jobs through wattbatch (policy {args.policy})")
    workdir = Path(tempfile.mkdtemp(prefix="wattbatch-demo-"))
    ids, explained = [], {}
    for name, opts, train in WORKLOAD:
        jid, lines = submit(name, opts, train, workdir, args.policy)
        print(f"   {name:12s} -> job {jid}")
        ids.append(jid)
        explained[name] = lines
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
    stages = stage_report(args.policy, explained, rec["actions"])
    live_energy = {"gpu_energy_wh": sum(e["energy_j"] for e in energy.values()) / 3600.0,
                   "co2_g": sum(e["co2_g"] for e in energy.values()), "jobs": len(energy)}
    twin = twin_compare(cfg, args.policy, workdir)
    if args.json:
        sys.__stdout__.write(json.dumps(
            {"jobs": rows, "reconcile": rec, "workdir": str(workdir), "policy": args.policy,
             "stages": stages, "live_energy": live_energy, "twin": twin}, indent=2) + "\n")
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
    print(f"7. what each stage of {args.policy} did")
    for stage, lines in stages.items():
        print(f"   {stage}")
        for line in lines or ["no line: it left every job as it found it"]:
            print(f"     {line}")
    print("8. energy and carbon of the workload")
    print(f"   live, {args.policy}: {live_energy['gpu_energy_wh']:.2f} Wh of GPU energy, "
          f"{live_energy['co2_g']:.3f} g CO2e ({live_energy['jobs']} jobs' epilog records)")
    print("   " + render_twin(twin).replace("\n", "\n   "))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
