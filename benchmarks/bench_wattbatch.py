"""Added latency of ``wattbatch`` over plain ``sbatch`` on the local cluster, two ways:
called directly (``wattbatch ...``) and installed as ``sbatch`` (contrib/sbatch's shim first on
PATH, the client runs ``sbatch ...``; wattbatch then skips the shim and runs Slurm's sbatch).

Submits the same small held job N times each way (interleaved, so all see the same load),
cancels each job right after its submission, and prints the medians and the median added latency of each path
(goal: <= 30 ms on both). ``--share``: the co-location path (policy eaco, ``--wb-share
--wb-app resnet18``, with two shared jobs running first, so the policy reads the snapshot and
the GPU readings and renders the shared-GPU template). ``--view``: wattbatch decides from the
cluster view (docs/scale.md), not from squeue: a copy of the site config with ``[view] path``
in a temporary directory, written by one ``wattctl reconcile`` pass (with its own state
directory, run before any job of the bench: it has none to act on), the pass of the
policy under test, so the view holds what it reads; a first submission with ``--wb-explain``
must say it decided from the view (a policy that reads no snapshot, such as slurm-default,
reads nothing from it).

    eval "$(.venv/bin/wattctl localcluster env)"
    python benchmarks/bench_wattbatch.py [-n 30] [--policy NAME] [--share] [--view] [--wattbatch CMD]

``--wattbatch`` defaults to the installed ``wattbatch`` command, else ``python -m wrapper.cli``.
It refuses to run without ``SLURM_CONF`` set to a file other than /etc/slurm/slurm.conf (the
local cluster's environment above), and at exit cancels only the job ids it submitted.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = ("#!/bin/bash\n#SBATCH --job-name=bench\n#SBATCH --output=/dev/null\n"
          "#SBATCH --gres=gpu:1\ntrue\n")
SHIM = Path(__file__).resolve().parents[1] / "contrib" / "sbatch" / "sbatch"
GOAL_S = 0.030           # added over sbatch, median, on every path (the issue on scale)


def job_id(out: str) -> str:
    """The job id of ``--parsable`` output (``id`` or ``id;cluster``); "" when there is none."""
    first = out.strip().split(";")[0].strip()
    return first if first.isdigit() else ""


def submit(cmd: list[str], script: str, env: dict[str, str] | None,
           ids: list[str]) -> tuple[float, str]:
    """Submits the held job; its id goes into ``ids`` (cancelled at exit) before any check."""
    t0 = time.perf_counter()
    done = subprocess.run([*cmd, "--hold", "--parsable", script], capture_output=True, text=True,
                          env=env)
    elapsed = time.perf_counter() - t0
    job = job_id(done.stdout)
    if job:
        ids.append(job)
    if done.returncode != 0 or not job:
        sys.exit(f"bench: {' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return elapsed, job


def shim_env(wb: list[str], policy: str, tmp: str) -> dict[str, str]:
    """contrib's shim, pointed at the wattbatch under test, first on PATH."""
    target = " ".join(shlex.quote(w) for w in wb)
    shim = Path(tmp) / "sbatch"
    shim.write_text(SHIM.read_text().replace("/opt/wattbatch/venv/bin/wattbatch", target))
    shim.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp}{os.pathsep}{os.environ.get('PATH', '')}")
    if policy:
        env["WATTBATCH_POLICY"] = policy
    return env


def view_env(tmp: str, policy: str) -> dict[str, str]:
    """The environment of a site whose submissions decide from a view just published by a pass
    of ``policy`` (the site's when empty), so the view holds what that policy reads."""
    site = os.environ.get("WATTBATCH_SITE_CONFIG", "")
    if not site or not Path(site).is_file():
        sys.exit(f"bench: --view: WATTBATCH_SITE_CONFIG={site or '(unset)'}: the local cluster's "
                 "site config is needed (its environment sets it)")
    folder = os.path.join(tmp, "view")
    os.makedirs(folder, mode=0o755)
    copy = Path(tmp) / "site.toml"
    copy.write_text(Path(site).read_text() + f'\n[view]\npath = "{folder}/cluster.json"\n'
                    "max_age_s = 3600.0\n")
    env = dict(os.environ, WATTBATCH_SITE_CONFIG=str(copy))
    wattctl = [shutil.which("wattctl")] if shutil.which("wattctl") else [
        sys.executable, "-m", "slurm_plugin.cli"]
    done = subprocess.run([*wattctl, "reconcile", *(["--policy", policy] if policy else []),
                           "--state-dir", os.path.join(tmp, "state")],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0 or not os.path.isfile(os.path.join(folder, "cluster.json")):
        sys.exit(f"bench: --view: the reconcile pass wrote no view ({done.returncode}): "
                 f"{done.stderr.strip()[-500:]}")
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=30, help="submissions each way (default 30, >= 1)")
    ap.add_argument("--policy", default="", help="wattbatch --wb-policy NAME (default: site's)")
    ap.add_argument("--wattbatch", default="", help="command that runs wattbatch")
    ap.add_argument("--share", action="store_true", help="the co-location path (eaco)")
    ap.add_argument("--view", action="store_true", help="decide from a published cluster view")
    args = ap.parse_args()
    if args.n < 1:
        ap.error(f"-n {args.n}: give at least 1 submission each way")
    conf = os.environ.get("SLURM_CONF", "")
    if not conf or not Path(conf).is_file() or Path(conf) == Path("/etc/slurm/slurm.conf"):
        ap.error(f"SLURM_CONF={conf or '(unset)'}: this bench submits and cancels jobs, so it "
                 "runs only on the local cluster: eval \"$(.venv/bin/wattctl localcluster env)\" "
                 "first")
    if args.share:
        args.policy = "eaco"
    wb = shlex.split(args.wattbatch) if args.wattbatch else (
        [shutil.which("wattbatch")] if shutil.which("wattbatch") else
        [sys.executable, "-m", "wrapper.cli"])
    share = ["--wb-share", "--wb-app", "resnet18"] if args.share else []
    direct = wb + (["--wb-policy", args.policy] if args.policy else []) + share
    sbatch = [shutil.which("sbatch") or "sbatch"]
    times: dict[str, list[float]] = {"sbatch": [], "direct": [], "shim": []}
    ids: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "bench.sh")
        Path(script).write_text(SCRIPT)
        os.makedirs(os.path.join(tmp, "shim"), exist_ok=True)
        shimmed = shim_env(wb, args.policy, os.path.join(tmp, "shim"))
        ours = None
        if args.view:
            ours = view_env(tmp, args.policy)
            shimmed["WATTBATCH_SITE_CONFIG"] = ours["WATTBATCH_SITE_CONFIG"]
            done = subprocess.run([*direct, "--wb-dry-run", "--wb-explain", script],
                                  capture_output=True, text=True, env=ours)
            if "cluster view" not in done.stdout + done.stderr:
                sys.exit("bench: --view: wattbatch did not decide from the view (a policy "
                         "that reads no snapshot, such as slurm-default, has nothing to read "
                         f"from it: give --policy):\n{(done.stdout + done.stderr)[-800:]}")
        ways = {"sbatch": (sbatch, None), "direct": (direct, ours),
                "shim": (["sbatch", *share], shimmed)}
        try:
            if args.share:                                          # jobs to share with
                for _ in range(2):
                    done = subprocess.run([*direct, "--parsable", "--job-name=bench",
                                           "--output=/dev/null", "--wrap=sleep 900"],
                                          capture_output=True, text=True, env=ours)
                    if job_id(done.stdout):
                        ids.append(job_id(done.stdout))
                    if done.returncode != 0 or not job_id(done.stdout):
                        sys.exit(f"bench: {' '.join(direct)} (a job to share with) failed "
                                 f"({done.returncode}): {done.stderr.strip()}")
                time.sleep(3)
            for cmd, env in ways.values():                          # warm caches, not counted
                submit(cmd, script, env, ids)
            for _ in range(args.n):
                for name, (cmd, env) in ways.items():
                    t, job = submit(cmd, script, env, ids)
                    times[name].append(t)
                    # cancelled at once: every submission sees the same queue (a growing
                    # queue would make each snapshot, and so each later call, slower)
                    subprocess.run(["scancel", job], capture_output=True)
        finally:
            # only the jobs this run submitted (every id is in ids), on the cluster of SLURM_CONF
            # checked above; no name filter, which would reach other jobs named "bench"
            if ids:
                subprocess.run(["scancel", *ids], capture_output=True,
                               env=dict(os.environ, SLURM_CONF=conf))
    plain = statistics.median(times["sbatch"])
    print(f"submissions each way: {args.n}   wattbatch: {' '.join(direct)}"
          + ("   (co-location path: 2 shared jobs running)" if args.share else "")
          + ("   (deciding from the cluster view)" if args.view else ""))
    print(f"sbatch               median {plain * 1e3:7.1f} ms")
    for name, label in (("direct", "wattbatch"), ("shim", "sbatch -> shim -> wattbatch")):
        ours = statistics.median(times[name])
        added = statistics.median(o - p for o, p in zip(times[name], times["sbatch"]))
        print(f"{label:<20} median {ours * 1e3:7.1f} ms, added median {added * 1e3:6.1f} ms "
              f"(goal <= 30 ms: {'met' if added <= GOAL_S else 'not met'})")


if __name__ == "__main__":
    main()
