"""``wattbatch``: a drop-in ``sbatch`` that asks the site's policy where and how a job runs.

parse (sbatch's rules) -> site config -> Slurm snapshot + InfluxDB readings -> policy.advise ->
Placement -> extra sbatch options + script block -> sbatch. sbatch's stdout, stderr and exit
code are relayed as they are. Fail-open: if the config, telemetry, snapshot or policy fails, the
job is submitted unchanged and exactly one ``wattbatch: warning:`` line goes to stderr.
Exit 2: a bad wattbatch option (nothing submitted).
"""

from __future__ import annotations

import os
import sys
import time

from slurm_plugin.record import record

from .sbatch_args import WRAP_SCRIPT, CommandLine, parse_command_line, parse_script
from .wb_options import WbOptionError, help_text, resolve, takes_value

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any, BinaryIO, Callable, Mapping, TextIO

EXIT_WB_USAGE = 2
SBATCH_TIMEOUT_S = 20 * 86400.0    # --wait may block for the job's whole run


@record
class Providers:
    """Where the snapshot and the readings come from (tests hand in their own)."""

    snapshot: Callable[[Any], Any]
    readings: Callable[[Any, Any, float], Any]


def _slurm_snapshot(cfg: Any) -> Any:
    from slurm_plugin.slurm.snapshot import snapshot
    return snapshot(cfg)


def _influx_readings(cfg: Any, cluster: Any, now_s: float) -> Any:
    from slurm_plugin.telemetry.carbon import provider_from_config
    from slurm_plugin.telemetry.influx import InfluxClient
    from slurm_plugin.telemetry.readers import read_readings
    client = InfluxClient.from_config(cfg)
    running = [j for j, job in cluster.jobs.items() if job.running] if cluster else []
    return read_readings(client, now_s, carbon=provider_from_config(cfg, client),
                         cluster=cfg["cluster.name"], job_ids=running)


LIVE = Providers(snapshot=_slurm_snapshot, readings=_influx_readings)


@record(frozen=False)
class Submission:
    """What goes to sbatch: argv after the program, and the script on stdin (or None)."""

    args: list[str]
    stdin_text: str | None = None
    temp_script: str | None = None


class Io:
    def __init__(self, environ: Mapping[str, str], stdin: BinaryIO, out: TextIO, err: TextIO):
        self.environ, self.stdin, self.out, self.err = environ, stdin, out, err


def main(argv: list[str] | None = None) -> None:
    io = Io(os.environ, sys.stdin.buffer, sys.stdout, sys.stderr)
    sys.exit(run(sys.argv[1:] if argv is None else argv, io))


def run(argv: list[str], io: Io, providers: Providers = LIVE,
        now_s: float | None = None) -> int:
    cmd = parse_command_line(argv, takes_value)
    try:
        wb = resolve(cmd.wb_words, [], io.environ)
    except WbOptionError as exc:
        io.err.write(f"{exc}\n")
        return EXIT_WB_USAGE
    if wb.help:
        io.out.write(help_text())
        return 0
    plain = [w for k, w in enumerate(argv) if k not in cmd.wb_indexes]
    info = any(u.opt.field == "info" for u in cmd.uses)
    if wb.off or cmd.error or info or cmd.hetjob:
        return _sbatch(Submission(plain), None, io)
    wrap = next((u.value for u in reversed(cmd.uses) if u.opt.field == "wrap"), None)
    if wrap is not None and cmd.script is not None:
        return _sbatch(Submission(plain), None, io)     # sbatch says why
    try:
        raw = _read_script(cmd, wrap, io)
    except OSError:
        return _sbatch(Submission(plain), None, io)     # sbatch: "Unable to open file"
    text = raw.decode("utf-8", "surrogateescape")
    header = parse_script(text)
    if header.error:
        return _sbatch(_unchanged(cmd, plain, raw, wrap), None, io)
    try:
        wb = resolve(cmd.wb_words, header.wb_lines, io.environ)
    except WbOptionError as exc:
        io.err.write(f"{exc}\n")
        return EXIT_WB_USAGE
    if wb.off:
        return _sbatch(_unchanged(cmd, plain, raw, wrap), None, io)
    now_s = time.time() if now_s is None else now_s
    from .decide import decide  # the policy path, imported only when it runs
    try:
        outcome = decide(cmd, header, text, wb, io.environ, providers, now_s)
    except Exception as exc:                                    # noqa: BLE001 - fail-open
        return _fail_open(exc, cmd, plain, raw, wrap, wb, io)
    if outcome.cfg is not None and outcome.unchanged_reason:
        if wb.dry_run:
            return _print_dry_run(outcome, text, io, wb.json)
        return _sbatch(_unchanged(cmd, plain, raw, wrap), outcome.cfg, io)
    if wb.dry_run:
        return _print_dry_run(outcome, outcome.script, io, wb.json)
    if wb.explain:
        for line in outcome.explain_lines():
            io.err.write(f"wattbatch: explain: {line}\n")
    return _sbatch(_changed(cmd, argv, outcome), outcome.cfg, io)


def _read_script(cmd: CommandLine, wrap: str | None, io: Io) -> bytes:
    if wrap is not None:
        return WRAP_SCRIPT.format(wrap).encode("utf-8", "surrogateescape")
    if cmd.script is not None:
        with open(cmd.script, "rb") as fh:
            return fh.read()
    return io.stdin.read()


def _unchanged(cmd: CommandLine, plain: list[str], raw: bytes, wrap: str | None) -> Submission:
    if cmd.script is not None or wrap is not None:
        return Submission(plain)
    return _with_script(Submission(plain), raw, needs_file=False)


def _with_script(sub: Submission, raw: bytes, needs_file: bool) -> Submission:
    """Hand the script to sbatch on stdin, or in a temp file when it is not UTF-8 or the
    script has arguments (sbatch reads stdin only when no script path is given)."""
    try:
        if not needs_file:
            sub.stdin_text = raw.decode("utf-8")
            return sub
    except UnicodeDecodeError:
        pass
    import tempfile
    fd, path = tempfile.mkstemp(prefix="wattbatch-", suffix=".sbatch")
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)
    sub.temp_script = path
    return sub


def _changed(cmd: CommandLine, argv: list[str], outcome: Any) -> Submission:
    drop = set(cmd.wb_indexes)
    rendered = outcome.script != outcome.original
    if rendered and outcome.wrap:
        for use in cmd.uses:
            if use.opt.field == "wrap":
                drop.update(range(*use.span))
    words = [w for k, w in enumerate(argv[:cmd.opt_end]) if k not in drop]
    words += outcome.args
    if not rendered:
        sub = Submission(words + argv[cmd.opt_end:])
        return sub if (cmd.script is not None or outcome.wrap) else _with_script(
            sub, outcome.original.encode("utf-8", "surrogateescape"), needs_file=False)
    tail = argv[cmd.opt_end + (1 if cmd.double_dash else 0):]
    sub = _with_script(Submission(words), outcome.script.encode("utf-8", "surrogateescape"),
                       needs_file=bool(cmd.script_args))
    if sub.temp_script:
        sub.args += (["--"] if cmd.double_dash else []) + [sub.temp_script] + tail[1:]
    return sub


def _fail_open(exc: BaseException, cmd: CommandLine, plain: list[str], raw: bytes,
               wrap: str | None, wb: Any, io: Io) -> int:
    from slurm_plugin.errors import ConfigError
    reason = " ".join(str(exc).split()) or type(exc).__name__
    cfg = getattr(exc, "wattbatch_cfg", None)
    if cfg is not None and not cfg.get("policy.fail_open", True) and not isinstance(
            exc, ConfigError):
        io.err.write(f"wattbatch: error: {reason} (policy.fail_open is off: nothing submitted)\n")
        return 1
    io.err.write(f"wattbatch: warning: {reason}; submitting the job unchanged\n")
    if wb.dry_run:
        return 0
    return _sbatch(_unchanged(cmd, plain, raw, wrap), cfg, io)


def _print_dry_run(outcome: Any, script: str, io: Io, as_json: bool) -> int:
    if as_json:
        import json
        io.out.write(json.dumps(outcome.as_dict(script), indent=2) + "\n")
        return 0
    for line in outcome.explain_lines():
        io.out.write(f"# wattbatch: {line}\n")
    io.out.write(script)
    if script and not script.endswith("\n"):
        io.out.write("\n")
    return 0


def _sbatch(sub: Submission, cfg: Any, io: Io) -> int:
    """Run sbatch and relay its stdout, stderr and exit code as they are."""
    from slurm_plugin import proc
    from slurm_plugin.errors import CommandError
    bin_dir = cfg["slurm.bin_dir"] if cfg is not None else ""
    env = {"SLURM_CONF": cfg["slurm.conf"]} if cfg is not None and cfg["slurm.conf"] else None
    argv = [os.path.join(bin_dir, "sbatch") if bin_dir else "sbatch", *sub.args]
    try:
        done = proc.run(argv, timeout_s=SBATCH_TIMEOUT_S, check=False,
                        input_text=sub.stdin_text, env=env)
    except CommandError as exc:
        io.err.write(f"wattbatch: error: {' '.join(str(exc).split())}\n")
        return exc.returncode
    finally:
        if sub.temp_script:
            os.unlink(sub.temp_script)
    io.out.write(done.stdout)
    io.err.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    main()
