"""The one place where this project starts a subprocess.

Every command is an argv list (never a shell string); a failure raises ``CommandError`` with
the command, its exit code and its stderr, so a caller never has to rebuild that message.
Output is decoded as UTF-8 tolerantly: bytes that are not UTF-8 (a job name any user can set
with ``#SBATCH -J``) become U+FFFD, so one such job cannot stop a reader of Slurm's output.
"""

from __future__ import annotations

import os
import subprocess
import sys

from .errors import CommandError
from .record import record


@record
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    # with ``run(..., raw_stdout=True)``: the output as the command wrote it (``stdout`` is then
    # "", unless the command failed): a large document decoded straight from its bytes
    raw_stdout: bytes = b""


def run(
    argv: list[str] | tuple[str, ...],
    *,
    timeout_s: float = 30.0,
    check: bool = True,
    input_text: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    stdin_fd: int | None = None,
    pass_fds: tuple[int, ...] = (),
    executable: str | None = None,
    raw_stdout: bool = False,
) -> Completed:
    """Run ``argv`` and return its output; raise ``CommandError`` on failure when ``check``.
    ``raw_stdout``: the output kept as bytes (``Completed.raw_stdout``), not decoded, where it
    succeeded.

    ``stdin_fd``: an open file to read standard input from (instead of ``input_text``);
    ``pass_fds``: descriptors the command inherits under the same numbers; ``executable``: the
    program to run when ``argv[0]`` is only the name it is given (its messages show that name)."""
    argv = [str(a) for a in argv]
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    stdin = None if input_text is None else input_text.encode("utf-8", "surrogateescape")
    try:
        proc = subprocess.run(
            argv,
            input=stdin,
            stdin=stdin_fd,
            pass_fds=pass_fds,
            executable=executable,
            capture_output=True,
            timeout=timeout_s,
            env=full_env,
            cwd=cwd,
            check=False,
        )
    except FileNotFoundError as exc:
        raise CommandError(argv, 127, f"{argv[0]}: not found ({exc.strerror})") from exc
    except subprocess.TimeoutExpired as exc:
        raise CommandError(argv, 124, f"timed out after {timeout_s:g} s\n"
                                      f"{decode(exc.stderr)}") from exc
    if raw_stdout and proc.returncode == 0:
        return Completed(tuple(argv), 0, "", decode(proc.stderr), proc.stdout)
    done = Completed(tuple(argv), proc.returncode, decode(proc.stdout), decode(proc.stderr))
    if check and proc.returncode != 0:
        raise CommandError(argv, proc.returncode, done.stderr, done.stdout)
    return done


def stream(argv: list[str] | tuple[str, ...], *, env: dict[str, str] | None = None,
           stdout_to_stderr: bool = False) -> int:
    """Run ``argv`` with its output going to this process's own (not captured: a long command
    whose progress a person watches); return its exit code. ``env`` replaces the environment.
    ``stdout_to_stderr`` sends its stdout to stderr (and gives it no stdin)."""
    argv = [str(a) for a in argv]
    try:
        return subprocess.run(argv, env=dict(env) if env is not None else None, check=False,
                              stdout=sys.stderr if stdout_to_stderr else None,
                              stdin=subprocess.DEVNULL if stdout_to_stderr else None).returncode
    except FileNotFoundError as exc:
        raise CommandError(argv, 127, f"{argv[0]}: not found ({exc.strerror})") from exc


def decode(raw: bytes | str | None) -> str:
    """A command's output as text: UTF-8, undecodable bytes as U+FFFD."""
    if raw is None:
        return ""
    return raw if isinstance(raw, str) else raw.decode("utf-8", "replace")


def start(argv: list[str] | tuple[str, ...], *, log_path: str, env: dict[str, str] | None = None,
          cwd: str | None = None) -> subprocess.Popen:
    """Start ``argv`` in the background (a helper that runs until stopped, e.g. a collector),
    stdout and stderr appended to ``log_path``; end it with ``stop``."""
    argv = [str(a) for a in argv]
    full_env = None if env is None else {**os.environ, **env}
    with open(log_path, "ab") as log:
        try:
            return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=full_env,
                                    cwd=cwd, stdin=subprocess.DEVNULL)
        except FileNotFoundError as exc:
            raise CommandError(argv, 127, f"{argv[0]}: not found ({exc.strerror})") from exc


def wait(child: subprocess.Popen, timeout_s: float) -> int | None:
    """The exit status of a process from ``start`` once it ends, None if it has not ended
    within ``timeout_s`` (it is left running)."""
    try:
        return child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None


def stop(child: subprocess.Popen, *, timeout_s: float = 10.0) -> int:
    """SIGTERM a process from ``start`` (SIGKILL after ``timeout_s``); its exit status."""
    if child.poll() is None:
        child.terminate()
        try:
            return child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
    return child.wait()
