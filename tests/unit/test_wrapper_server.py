"""The warm server path of ``wattbatch`` (wrapper.server_client + wrapper.server), end to end
with real processes and a fake sbatch that records who ran it and in what state."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from wrapper import server_client

REPO = Path(__file__).resolve().parents[2]
FAKE_SBATCH = """#!/bin/sh
{{ printf '%s\\n' "$@"; echo "cwd=$(pwd)"; echo "umask=$(umask)"; echo "marker=$MY_MARKER";
  echo "parent=$(tr '\\0' ' ' < /proc/$PPID/cmdline)"; echo "script:"
  for a; do last=$a; done
  if [ -e "$last" ] && [ "$last" != /dev/stdin ]; then cat "$last"; else cat; fi
}} > "{out}/call-$$"
echo "Submitted batch job 77"
echo "note on stderr" >&2
exit 3
"""
SERVER = "from wrapper.server import main"       # the server's command line
ENTRY = "import sys; from wrapper.server_client import main; sys.argv[0] = 'wattbatch'; main()"


@pytest.fixture
def env(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH.format(out=tmp_path))
    (bin_dir / "sbatch").chmod(0o755)
    (tmp_path / "site.toml").write_text(f'[slurm]\nbin_dir = "{bin_dir}"\n'
                                        "[wrapper]\nserver_idle_s = 20\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    environ = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(REPO),
               "WATTBATCH_SITE_CONFIG": str(tmp_path / "site.toml"),
               "WATTBATCH_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path),
               "XDG_RUNTIME_DIR": str(run_dir), "MY_MARKER": "first"}
    yield tmp_path, environ
    for sock in (run_dir / "wattbatch").glob("*.sock") if (run_dir / "wattbatch").exists() else ():
        _stop_server(sock)


def _stop_server(sock: Path) -> None:
    out = subprocess.run(["pgrep", "-f", str(sock)], capture_output=True, text=True).stdout
    for pid in out.split():
        os.kill(int(pid), 15)


def _wattbatch(environ, argv, stdin=b"", cwd=None):
    return subprocess.run([sys.executable, "-c", ENTRY, *argv], env=environ, input=stdin,
                          capture_output=True, cwd=cwd, timeout=60)


def _calls(tmp: Path) -> list[str]:
    return [p.read_text() for p in sorted(tmp.glob("call-*"), key=lambda p: p.stat().st_mtime)]


def _wait_for_socket(environ) -> Path:
    where = Path(environ["XDG_RUNTIME_DIR"]) / "wattbatch"
    for _ in range(200):
        found = list(where.glob("*.sock")) if where.exists() else []
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError("no server started")


def test_second_call_runs_in_the_server_exactly_as_the_first_ran_here(env):
    tmp, environ = env
    work = tmp / "work"
    work.mkdir()
    script = b"#!/bin/bash\n#SBATCH -J t\necho hi\n"
    first = _wattbatch(environ, ["--parsable", "/dev/stdin"], stdin=script, cwd=work)
    _wait_for_socket(environ)
    time.sleep(0.5)                         # the server finishes importing
    environ2 = dict(environ, MY_MARKER="second")
    second = _wattbatch(environ2, ["--parsable", "/dev/stdin"], stdin=script, cwd=work)
    assert (first.returncode, first.stdout, first.stderr) == \
        (second.returncode, second.stdout, second.stderr) == \
        (3, b"Submitted batch job 77\n", b"note on stderr\n")
    here, served = _calls(tmp)
    assert SERVER not in here and SERVER in served                       # who ran sbatch
    assert "marker=first" in here and "marker=second" in served          # the caller's env
    strip = [c.replace("marker=first", "").replace("marker=second", "").split("parent=")[0]
             for c in (here, served)]
    assert strip[0] == strip[1]                # argv, cwd, umask
    assert here.split("script:")[1] == served.split("script:")[1]
    assert "echo hi" in served.split("script:")[1]      # a script readable once, read once


def test_process_substitution_and_umask_reach_the_server(env):
    tmp, environ = env
    _wattbatch(environ, ["--version"])
    _wait_for_socket(environ)
    time.sleep(0.5)
    done = subprocess.run(["bash", "-c", f"umask 027; {sys.executable} -c \"{ENTRY}\" "
                           "--hold <(printf '#!/bin/bash\\necho sub\\n')"],
                          env=environ, capture_output=True, timeout=60)
    assert done.returncode == 3, done.stderr
    served = _calls(tmp)[-1]
    assert SERVER in served and "umask=0027" in served and "echo sub" in served


def test_opt_outs_run_here():
    assert server_client._eligible(["job.sh"], {})
    assert not server_client._eligible(["job.sh"], {"WATTBATCH_SERVER": "0"})
    assert not server_client._eligible(["job.sh"], {"WATTBATCH_SBATCH_CALLER": "1 /x"})
    assert not server_client._eligible(["--wait", "job.sh"], {})
    assert not server_client._eligible(["-W", "job.sh"], {})


def test_runtime_dir_refuses_one_others_can_enter(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    (tmp_path / "wattbatch").mkdir(mode=0o777)
    os.chmod(tmp_path / "wattbatch", 0o777)
    assert server_client.runtime_dir() is None
    os.chmod(tmp_path / "wattbatch", 0o700)
    assert server_client.runtime_dir() == str(tmp_path / "wattbatch")


def test_code_stamp_is_the_same_in_every_process():
    probe = "from wrapper.server_client import code_stamp; print(code_stamp())"
    got = {subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PYTHONHASHSEED": str(seed)},
                          check=True).stdout for seed in (1, 2)}
    assert len(got) == 1 and got.pop().strip() == server_client.code_stamp()


def _fake_server(path: str, replies: list[bytes]) -> threading.Thread:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def serve():
        conn, _ = listener.accept()
        socket.recv_fds(conn, 1 << 20, 8)
        for r in replies:
            conn.sendall(server_client.frame(r))
        conn.close()
        listener.close()
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_a_declined_call_runs_here_and_one_lost_after_acceptance_is_not_run_twice(
        tmp_path, monkeypatch, capsys):
    path = str(tmp_path / "s.sock")
    monkeypatch.setattr(server_client, "socket_path", lambda: path)
    t = _fake_server(path, [b"declined"])
    assert server_client._ask_server(["job.sh"]) is None
    t.join()
    os.unlink(path)
    t = _fake_server(path, [b"accepted"])           # then the server dies
    assert server_client._ask_server(["job.sh"]) == 1
    t.join()
    assert "check `squeue --me` before submitting again" in capsys.readouterr().err
