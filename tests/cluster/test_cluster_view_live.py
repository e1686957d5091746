"""The cluster view on the local cluster: a reconcile pass publishes it, submissions decide
from it without running squeue, a stale view or one another user owns is refused with one
warning (the job still goes in, decided on Slurm's own snapshot), and killing the reconciler
while it writes never leaves half a view."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from slurm_plugin.proc import run

pytestmark = pytest.mark.cluster


@pytest.fixture()
def env(localcluster, tmp_path) -> dict[str, str]:
    """Slurm's commands as the cluster has them, but a squeue that logs each call (and then
    runs the real one): a submission that decides from the view runs none."""
    real = Path(shutil.which("squeue", path=localcluster.env.get("PATH")) or "squeue")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "scontrol", "sacct", "sinfo", "scancel"):
        found = shutil.which(name, path=localcluster.env.get("PATH"))
        if found:
            (bin_dir / name).symlink_to(found)
    (bin_dir / "squeue").write_text(f"#!/bin/sh\necho squeue >> {tmp_path}/squeue.log\n"
                                    f'exec {real} "$@"\n')
    (bin_dir / "squeue").chmod(0o755)
    view = tmp_path / "view"
    view.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    state = tmp_path / "state"
    state.mkdir()
    return {**localcluster.env, "WATTBATCH_SLURM_BIN_DIR": str(bin_dir),
            "WATTBATCH_VIEW_PATH": str(view / "cluster.json"),
            "WATTBATCH_RECONCILE_STATE_DIR": str(state), "WATTBATCH_SERVER": "0"}


def _squeue_calls(tmp_path: Path) -> int:
    log = tmp_path / "squeue.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


WATTBATCH = [sys.executable, "-m", "wrapper.cli"]
# the ``wattbatch`` command: through the user's warm server where one answers
SERVED = [sys.executable, "-c", "from wrapper.server_client import main; main()"]


def _submit(env, tmp_path: Path, *argv: str, command: list[str] = WATTBATCH) -> tuple[str, str]:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --output=/dev/null\nsleep 1\n")
    done = run([*command, "--parsable", "--wb-explain", "-t", "2",
                "--wb-policy=eaco", "--wb-share", "--wb-app=resnet18", "--gres=gpu:1", *argv,
                str(script)], env=env,
               cwd=str(tmp_path), timeout_s=60)
    return done.stdout.strip().split(";")[0], done.stderr


def _reconcile(env) -> None:
    run([str(Path(sys.executable).with_name("wattctl")), "reconcile", "--json"], env=env,
        timeout_s=120)


def test_submissions_decide_from_the_view_and_refuse_a_stale_or_foreign_one(env, tmp_path):
    _reconcile(env)
    view = Path(env["WATTBATCH_VIEW_PATH"])
    doc = json.loads(view.read_text())
    assert doc["format"] == "wattbatch-cluster-view" and doc["snapshot"]["nodes"]
    assert oct(view.stat().st_mode & 0o777) == "0o644"

    before = _squeue_calls(tmp_path)
    first, why = _submit(env, tmp_path)
    assert first.isdigit(), why
    assert f"cluster view {view} taken" in why and "warning" not in why, why
    assert _squeue_calls(tmp_path) == before          # decided without squeue
    # the user's own job submitted since the view counts: a second decision sees it
    second, why = _submit(env, tmp_path)
    assert second.isdigit() and f"cluster view {view} taken" in why, why
    assert f" with {first} (" in why, why          # its own job since the view counts
    run([str(Path(env["WATTBATCH_SLURM_BIN_DIR"]) / "scancel"), first, second], env=env,
        check=False)

    # stale: one warning, Slurm read instead, the job still goes in
    stale = {**env, "WATTBATCH_VIEW_MAX_AGE_S": "1"}
    time.sleep(2.5)
    job, why = _submit(stale, tmp_path)
    assert job.isdigit(), why
    said = [line for line in why.splitlines() if "warning" in line]
    assert len(said) == 1 and "s old, over view.max_age_s = 1: read Slurm instead" in said[0], why
    assert "Slurm snapshot taken" in why and _squeue_calls(tmp_path) > before

    # written by another user: refused the same way
    _reconcile(env)
    os.chown(view, 65534, 65534)
    job2, why = _submit(env, tmp_path)
    assert job2.isdigit(), why
    assert "belongs to uid 65534, not to root or view.owner: not trusted" in why, why
    run([str(Path(env["WATTBATCH_SLURM_BIN_DIR"]) / "scancel"), job, job2], env=env, check=False)


def test_the_warm_server_keeps_the_view_never_a_stale_or_untrusted_one(env, tmp_path):
    """Through the warm server, which keeps the view decoded between calls: each call still
    decides from the newest file the pass wrote, counts the user's own jobs since it, and
    refuses it once it is no longer trusted."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    served = {**env, "WATTBATCH_SERVER": "1", "XDG_RUNTIME_DIR": str(run_dir),
              "WATTBATCH_WRAPPER_SERVER_IDLE_S": "60"}
    view = Path(env["WATTBATCH_VIEW_PATH"])
    _reconcile(env)
    jobs = []
    try:
        before = _squeue_calls(tmp_path)
        for k in range(3):              # the first starts the server; it keeps the view
            job, why = _submit(served, tmp_path, command=SERVED)
            assert job.isdigit() and f"cluster view {view} taken" in why, why
            if jobs:                    # the job just before counts: shared with
                shared = next(line for line in why.splitlines() if "share GPU" in line)
                assert f"{jobs[-1]} (resnet18)" in shared, why
            jobs.append(job)
            time.sleep(2.5)             # the server looks at the file every 2 s
        assert _squeue_calls(tmp_path) == before
        # a new file, as the next pass writes it, and a call at once: it decides from the new
        # file, not the copy kept of the old one (the server looks at the file before it forks
        # a call, and the call uses a copy only of the very file it opened)
        from slurm_plugin import cluster_view
        from slurm_plugin.config import load
        from slurm_plugin.record import replace
        cfg = load(environ=env)
        cluster, readings = cluster_view.read(str(view), cfg, time.time())
        taken_s = time.time()
        cluster_view.publish(str(view), cfg, replace(cluster, taken_s=taken_s), readings)
        job, why = _submit(served, tmp_path, command=SERVED)
        jobs.append(job)
        age = float(why.split(f"cluster view {view} taken ")[1].split(" s")[0])
        assert job.isdigit() and age <= time.time() - taken_s + 0.5, why   # not the kept one
        os.chown(view, 65534, 65534)    # the kept copy is of a file no longer trusted
        job, why = _submit(served, tmp_path, command=SERVED)
        jobs.append(job)
        assert job.isdigit() and "not trusted" in why and "read Slurm instead" in why, why
    finally:
        run([str(Path(env["WATTBATCH_SLURM_BIN_DIR"]) / "scancel"), *jobs], env=env,
            check=False)
        for sock in run_dir.glob("wattbatch/server-*.sock"):
            _stop(sock)


def _stop(sock: Path) -> None:
    """The server of this test (its command line names its socket): SIGTERM. A call it forked
    may end between the listing and the signal."""
    for pid in run(["pgrep", "-f", str(sock)], check=False).stdout.split():
        try:
            os.kill(int(pid), signal.SIGTERM)
        except ProcessLookupError:
            pass


def test_killing_the_reconciler_while_it_writes_never_leaves_half_a_view(env, tmp_path):
    """Passes killed at staggered moments (some before, some during, some after the write):
    after each, the view reads whole, as the pass before or this one wrote it."""
    from slurm_plugin import proc
    from slurm_plugin.cluster_view import read
    from slurm_plugin.config import load
    _reconcile(env)
    cfg = load(environ=env)
    wattctl = str(Path(sys.executable).with_name("wattctl"))
    for k in range(8):
        child = proc.start([wattctl, "reconcile"], log_path=str(tmp_path / "pass.log"), env=env)
        time.sleep(0.15 + 0.12 * k)
        child.send_signal(signal.SIGKILL)
        child.wait()
        cluster, _ = read(env["WATTBATCH_VIEW_PATH"], cfg, time.time())
        assert cluster.nodes
