"""``wattbatch``: a drop-in ``sbatch`` that asks the site's policy where and how a job runs.

parse (sbatch's rules) -> site config -> Slurm snapshot + InfluxDB readings -> policy.advise ->
Placement -> extra sbatch options + script block -> sbatch. sbatch's stdout, stderr and exit
code are relayed as they are. Fail-open: if the config, telemetry, snapshot or policy fails, the
job is submitted unchanged and exactly one ``wattbatch: warning:`` line goes to stderr; so is a
bad wattbatch setting from the environment or a ``#WATTBATCH`` line. Exit 255 (sbatch's code for
a bad option): a bad ``--wb-*`` option on the command line (nothing submitted). Which sbatch runs:
``real_sbatch``; how the script reaches it: ``script_io``.

A dry run (``--wb-dry-run`` or ``--wb-json``, from any of the three sources) never runs sbatch
to submit: a bad setting elsewhere prints the job as it would go in unchanged; arguments sbatch
would reject (an unknown option, a bad value such as ``-t bogus``, a script that cannot be read)
and a dry-run value that cannot be read are an error, exit 255, wherever the dry run was asked
for (a ``#WATTBATCH`` line is looked for in a script file even beside a command line sbatch
rejects, and in a heterogeneous job's). Outside a dry run sbatch reports its own syntax errors.
"""

from __future__ import annotations

import os
import sys
import time

from slurm_plugin.record import record

from . import real_sbatch, script_io
from .sbatch_args import WRAP_SCRIPT, CommandLine, parse_command_line, parse_script
from .script_io import Script
from .wb_options import WbOptionError, dry_run_wanted, help_text, resolve, takes_value

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any, BinaryIO, Callable, Mapping, TextIO

EXIT_WB_USAGE = 255                # a bad --wb-* option: sbatch's code for a bad option
EXIT_NO_SBATCH = 127               # no sbatch but wattbatch's own
SBATCH_TIMEOUT_S = 20 * 86400.0    # --wait may block for the job's whole run
INFO_TIMEOUT_S = 10.0              # --help, --version: Slurm retries a missing slurm.conf 60 s


@record
class Providers:
    """Where the snapshot and the readings come from (tests and the warm server's cache hand
    in their own), who hears of each decision (its outcome, a dry run's too) and of a job
    submitted on one (outcome, sbatch's stdout). ``readings(cfg, cluster, now_s, carbon)``:
    ``carbon`` False when the policy does not plan with carbon intensity (its
    ``reads_carbon``), which then need not be read."""

    snapshot: Callable[[Any], Any]
    readings: Callable[[Any, Any, float, bool], Any]
    submitted: Callable[[Any, str], None] | None = None
    decided: Callable[[Any], None] | None = None


_VIEW_READINGS: dict[str, Any] = {}     # view path -> the readings of the view decided from


def _slurm_snapshot(cfg: Any) -> Any:
    """The cluster view where the site publishes one and it can be decided from (with this
    user's jobs submitted since added), else Slurm's own snapshot, the view's refusal kept as a
    warning on it (``cluster_view``)."""
    import gc
    path = cfg["view.path"]
    if path:
        cluster = _view_or_slurm(cfg, path)
    else:
        from slurm_plugin.slurm.snapshot import snapshot
        cluster = snapshot(cfg)
    # read with the collector off; out of its sight now, or the decision's first collection
    # walks every record of it (a third of a second at 100,000 jobs). This call ends soon.
    gc.freeze()
    return cluster


def _view_or_slurm(cfg: Any, path: str) -> Any:
    from slurm_plugin import cluster_view
    from slurm_plugin.record import replace

    from .server_client import runtime_dir
    from .snapshot_cache import with_jobs
    try:
        cluster, readings = cluster_view.read(path, cfg, time.time())
    except cluster_view.ViewRefused as exc:
        from slurm_plugin.slurm.snapshot import snapshot
        cluster = snapshot(cfg)
        return replace(cluster, warnings=(*cluster.warnings, f"{exc}: read Slurm instead"))
    _VIEW_READINGS[path] = readings
    mine = cluster_view.placed(runtime_dir(), cluster.taken_s)
    return replace(with_jobs(cluster, mine), source=f"view {path}")


def influx_memory(cfg: Any) -> Any:
    """The user's memory of an InfluxDB that timed out (``telemetry.skip_memory``): one file
    per URL in the warm server's runtime directory (only this user can enter it), so every
    call of the user sees it, through the server or in-process; within this call only when
    that directory cannot be made safe."""
    from slurm_plugin.telemetry.skip_memory import SkipMemory

    from .server_client import runtime_dir
    key = "influx.skip_after_timeout_s"
    window_s = cfg[key]
    return SkipMemory(runtime_dir() if window_s > 0 else None, window_s, key)


def _influx_readings(cfg: Any, cluster: Any, now_s: float, carbon: bool = True) -> Any:
    """The cluster view's readings when the snapshot came from it (and hold carbon, or the pass
    looked for it and found none, where the policy plans with it), else InfluxDB's."""
    source = getattr(cluster, "source", "") if cluster is not None else ""
    if source.startswith("view "):
        got = _VIEW_READINGS.get(source[5:])
        if got is not None and (not carbon or got.carbon_read
                                or got.carbon_g_per_kwh is not None):
            return got
    from slurm_plugin.telemetry.carbon import planning_provider
    from slurm_plugin.telemetry.influx import InfluxClient
    from slurm_plugin.telemetry.readers import read_readings
    client = InfluxClient.from_config(cfg, influx_memory(cfg))

    def running() -> Any:     # asked last: the snapshot may still be on its way
        yield from (j for j, job in cluster.jobs.items() if job.running) if cluster else ()
    return read_readings(client, now_s, carbon=planning_provider(cfg, client) if carbon else None,
                         cluster=cfg["cluster.name"], job_ids=running(),
                         carbon_max_age_s=cfg["carbon.max_age_s"])


def _remember_submitted(outcome: Any, stdout: str) -> None:
    """Where the site publishes a view: the job just submitted, as the next view will show
    it, for this user's next submissions that decide from an older view."""
    cfg = outcome.cfg
    if not cfg["view.path"] or outcome.placement is None:
        return
    from slurm_plugin import cluster_view

    from .server_client import runtime_dir
    from .snapshot_cache import placed_job, submitted_job_id
    job_id = submitted_job_id(stdout)
    cluster = outcome.cluster
    if job_id is None or cluster is None:
        return
    try:
        cluster_view.remember(runtime_dir(), placed_job(outcome, cluster, job_id, time.time()),
                              time.time(), cfg["view.max_age_s"])
    except OSError:
        pass        # the next view shows it; only this user's next seconds miss it


LIVE = Providers(snapshot=_slurm_snapshot, readings=_influx_readings,
                 submitted=_remember_submitted)


@record(frozen=False)
class Submission:
    """What goes to sbatch: argv after the program, the script bytes on its standard input
    (a script without a path) or where its path reads them (``script``), or a temp file."""

    args: list[str]
    stdin_data: bytes | None = None
    script: Script | None = None
    temp_script: str | None = None
    pass_fds: tuple[int, ...] = ()


class Io:
    def __init__(self, environ: Mapping[str, str], stdin: BinaryIO, out: TextIO, err: TextIO):
        self.environ, self.stdin, self.out, self.err = environ, stdin, out, err


def main(argv: list[str] | None = None) -> None:
    io = Io(os.environ, sys.stdin.buffer, sys.stdout, sys.stderr)
    sys.exit(run(sys.argv[1:] if argv is None else argv, io))


def run(argv: list[str], io: Io, providers: Providers = LIVE,
        now_s: float | None = None) -> int:
    nested = real_sbatch.nested_call(io.environ)
    if nested is not None:          # an sbatch we ran led back here: pass through, unchanged
        fds = tuple(n for n in map(script_io.fd_number, argv) if n > 2)   # /dev/fd/N scripts
        return _sbatch(Submission(list(argv), pass_fds=fds), None, io, skip=(nested,))
    cmd = parse_command_line(argv, takes_value)
    try:
        cli_wb = resolve(cmd.wb_words, [], {})
    except WbOptionError as exc:
        io.err.write(f"{exc}\n")
        return EXIT_WB_USAGE
    if cli_wb.help:
        io.out.write(help_text())
        return 0
    plain = [w for k, w in enumerate(argv) if k not in cmd.wb_indexes]
    info = next((u.opt.name for u in cmd.uses if u.opt.field == "info"), None)
    if info in ("help", "version") and not cmd.error:
        from .info import help_or_version
        return help_or_version(info, _sbatch_quiet(plain, io), io.out, io.err)
    try:
        early = resolve(cmd.wb_words, [], io.environ)
    except WbOptionError:
        early = cli_wb                  # said once the script is read (it may be --wb-off)
    try:
        dry, _ = dry_run_wanted(cmd.wb_words, [], io.environ)
        if (cmd.error or cmd.hetjob) and not (dry or info or early.off):
            dry = _dry_run_in_script(cmd, io.environ)
    except WbOptionError as exc:
        return _dry_run_unreadable(exc, io)
    if info or ((early.off or cmd.error or cmd.hetjob) and not dry):
        return _sbatch(Submission(plain), None, io)     # --usage: sbatch submits nothing
    if cmd.error:
        return _dry_run_error(dry, f"sbatch would reject the command line: {cmd.error}",
                              "fix or remove that option", io)
    wrap = next((u.value for u in reversed(cmd.uses) if u.opt.field == "wrap"), None)
    if wrap is not None and cmd.script is not None:
        if dry:
            return _dry_run_error(dry, f"--wrap and a script ({cmd.script!r}) given together",
                                  "give one of them", io)
        return _sbatch(Submission(plain), None, io)     # sbatch says why
    try:
        script = _read_script(cmd, wrap, io)
    except OSError as exc:
        if dry:
            return _dry_run_error(dry, f"cannot read the script {cmd.script or '-'!r} "
                                  f"({exc.strerror or exc})", "check its path", io)
        return _sbatch(Submission(plain), None, io)     # sbatch: "Unable to open file"
    raw = script.data
    text = raw.decode("utf-8", "surrogateescape")
    header = parse_script(text)
    try:
        dry, dry_json = dry_run_wanted(cmd.wb_words, header.wb_lines, io.environ)
    except WbOptionError as exc:
        return _dry_run_unreadable(exc, io)
    if header.error and dry:
        where = f"{cmd.script} " if cmd.script else "the script's "
        return _dry_run_error(dry, f"sbatch would reject {where}{header.error}",
                              "fix or remove that #SBATCH option", io)
    if header.error:
        return _sbatch(_unchanged(cmd, plain, script, wrap), None, io)
    try:
        wb = resolve(cmd.wb_words, header.wb_lines, io.environ)
    except WbOptionError as exc:        # from the environment or a #WATTBATCH line: never blocks
        return _fail_open(exc, cmd, plain, script, wrap, cli_wb, io, dry=(dry, dry_json))
    bypass = ("heterogeneous job: wattbatch leaves it to sbatch" if cmd.hetjob else
              f"--wb-off ({wb.sources.get('off', 'command line')})" if wb.off else "")
    if bypass and dry:
        return _print_unchanged_dry_run(bypass, raw, io, wb.json)
    if bypass:
        return _sbatch(_unchanged(cmd, plain, script, wrap), None, io)
    now_s = time.time() if now_s is None else now_s
    from .decide import decide  # the policy path, imported only when it runs
    try:
        outcome = decide(cmd, header, text, wb, io.environ, providers, now_s)
        if providers.decided is not None:
            providers.decided(outcome)
    except WbOptionError as exc:        # a value the site or cluster cannot take (policy, elastic)
        where = wb.sources.get(exc.key, "")
        if where == "command line":
            io.err.write(f"wattbatch: command line: {exc}\n")
            return EXIT_WB_USAGE
        return _fail_open(WbOptionError(f"{where}: {exc}" if where else str(exc)),
                          cmd, plain, script, wrap, wb, io)
    except Exception as exc:                                    # noqa: BLE001 - fail-open
        return _fail_open(exc, cmd, plain, script, wrap, wb, io)
    if outcome.cfg is not None and outcome.unchanged_reason:   # a value sbatch would reject
        if wb.dry_run:
            return _dry_run_error(dry or "command line", outcome.unchanged_reason,
                                  "fix that value", io)
        return _sbatch(_unchanged(cmd, plain, script, wrap), outcome.cfg, io)
    for warning in outcome.warnings:
        io.err.write(f"wattbatch: warning: {warning}\n")
    _say_dry_run_source(wb, io)     # after the decision: a fall-back's warning says it instead
    if wb.dry_run:
        return _print_dry_run(outcome, outcome.script, io, wb.json)
    if wb.explain:
        for line in outcome.explain_lines():
            io.err.write(f"wattbatch: explain: {line}\n")
    heard = providers.submitted
    return _sbatch(_changed(cmd, argv, outcome, script), outcome.cfg, io,
                   seen=(lambda stdout: heard(outcome, stdout)) if heard else None)


def _say_dry_run_source(wb: Any, io: Io) -> None:
    """A dry run asked for by the environment, not the command line, is said every time: a
    client would otherwise see exit 0 and no job id."""
    where = wb.sources.get("json") or wb.sources.get("dry_run") or ""
    if wb.dry_run and where.startswith("$"):
        io.err.write(f"wattbatch: note: {where} is set: dry run, nothing submitted "
                     f"(unset it to submit)\n")


def _dry_run_unreadable(exc: WbOptionError, io: Io) -> int:
    """A dry-run value that says neither yes nor no: a dry run may have been meant."""
    reason = str(exc).removeprefix("wattbatch: ")
    io.err.write(f"wattbatch: error: {reason}; it may ask for a dry run, so nothing was "
                 "submitted (fix or remove it)\n")
    return EXIT_WB_USAGE


def _dry_run_in_script(cmd: CommandLine, environ: Mapping[str, str]) -> str:
    """Where the script asks for a dry run, read before handing sbatch a command line it
    rejects or a heterogeneous job ("" if nowhere). Only a regular file is read: sbatch reads no script then, so
    standard input, a pipe or a descriptor is left as it is. Raises :class:`WbOptionError`
    for a dry-run value that cannot be read."""
    if cmd.script is None or not script_io.is_regular_file(cmd.script):
        return ""
    try:
        with open(cmd.script, "rb") as fh:
            text = fh.read().decode("utf-8", "surrogateescape")
    except OSError:
        return ""                       # sbatch says why, if it gets that far
    return dry_run_wanted(cmd.wb_words, parse_script(text).wb_lines, environ)[0]


def _dry_run_error(dry: str, what: str, fix: str, io: Io) -> int:
    io.err.write(f"wattbatch: error: dry run ({dry}): {what}; nothing submitted ({fix})\n")
    return EXIT_WB_USAGE


def _read_script(cmd: CommandLine, wrap: str | None, io: Io) -> Script:
    if wrap is not None:
        return Script(WRAP_SCRIPT.format(wrap).encode("utf-8", "surrogateescape"), kind="wrap")
    return script_io.read(cmd.script, io.stdin)


def _unchanged(cmd: CommandLine, plain: list[str], script: Script,
               wrap: str | None) -> Submission:
    if cmd.script is not None or wrap is not None:
        return Submission(plain, script=script)
    return Submission(plain, stdin_data=script.data)


def _with_script(sub: Submission, raw: bytes, needs_file: bool) -> Submission:
    """Hand the script to sbatch on stdin, or in a temp file when the script has arguments
    (sbatch reads stdin only when no script path is given)."""
    if not needs_file:
        sub.stdin_data = raw
        return sub
    import tempfile
    fd, path = tempfile.mkstemp(prefix="wattbatch-", suffix=".sbatch")
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)
    sub.temp_script = path
    return sub


def _changed(cmd: CommandLine, argv: list[str], outcome: Any, script: Script) -> Submission:
    drop = set(cmd.wb_indexes)
    rendered = outcome.script != outcome.original
    if rendered and outcome.wrap:
        for use in cmd.uses:
            if use.opt.field == "wrap":
                drop.update(range(*use.span))
    words = [w for k, w in enumerate(argv[:cmd.opt_end]) if k not in drop]
    words += outcome.args
    if not rendered:
        sub = Submission(words + argv[cmd.opt_end:], script=script)
        return sub if (cmd.script is not None or outcome.wrap) else _with_script(
            sub, script.data, needs_file=False)
    tail = argv[cmd.opt_end + (1 if cmd.double_dash else 0):]
    sub = _with_script(Submission(words), outcome.script.encode("utf-8", "surrogateescape"),
                       needs_file=bool(cmd.script_args))
    if sub.temp_script:
        sub.args += (["--"] if cmd.double_dash else []) + [sub.temp_script] + tail[1:]
    return sub


def _fail_open(exc: BaseException, cmd: CommandLine, plain: list[str], script: Script,
               wrap: str | None, wb: Any, io: Io, dry: tuple[str, bool] | None = None) -> int:
    """``dry``: (where a dry run was asked for, as JSON) when ``wb`` may not know all of it."""
    from slurm_plugin.errors import ConfigError
    reason = " ".join(str(exc).split()) or type(exc).__name__
    reason = reason.removeprefix("wattbatch: ")
    cfg = getattr(exc, "wattbatch_cfg", None)
    if cfg is not None and not cfg.get("policy.fail_open", True) and not isinstance(
            exc, (ConfigError, WbOptionError)):
        io.err.write(f"wattbatch: error: {reason} (policy.fail_open is off: nothing submitted)\n")
        return 1
    where, as_json = dry or ((wb.sources.get("json") or wb.sources.get("dry_run")
                              or "command line") if wb.dry_run else "", wb.json)
    if where:
        io.err.write(f"wattbatch: warning: {reason}; dry run ({where}): the job would be "
                     "submitted unchanged, nothing submitted\n")
        return _print_unchanged_dry_run(reason, script.data, io, as_json)
    io.err.write(f"wattbatch: warning: {reason}; submitting the job unchanged\n")
    return _sbatch(_unchanged(cmd, plain, script, wrap), cfg, io)


def _print_unchanged_dry_run(reason: str, raw: bytes, io: Io, as_json: bool) -> int:
    text = raw.decode("utf-8", "surrogateescape")
    if as_json:
        import json
        doc = {"policy": None, "submitted": False, "unchanged_reason": reason,
               "script": text.encode("utf-8", "replace").decode("utf-8")}
        io.out.write(json.dumps(doc, indent=2) + "\n")
        return 0
    io.out.write(f"# wattbatch: would submit unchanged: {reason}\n{text}")
    if text and not text.endswith("\n"):
        io.out.write("\n")
    return 0


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


def _slurm_settings(cfg: Any, environ: Mapping[str, str]) -> tuple[str, str, str]:
    """(bin dir, slurm.conf, where the bin dir was set) from the site config; read here when
    the caller has none (a path that decides nothing), from the environment if it is broken."""
    if cfg is None:
        from slurm_plugin import config
        from slurm_plugin.errors import ConfigError
        try:
            cfg = config.load(environ=environ)
        except (ConfigError, OSError):
            return (environ.get("WATTBATCH_SLURM_BIN_DIR", ""),
                    environ.get("WATTBATCH_SLURM_CONF", ""), "$WATTBATCH_SLURM_BIN_DIR")
    return cfg["slurm.bin_dir"], cfg["slurm.conf"], cfg.source("slurm.bin_dir")


def _sbatch_command(cfg: Any, io: Io, skip: tuple[str, ...] = ()) -> tuple[str, dict]:
    """The real sbatch's path and the environment it gets (it runs under the name ``sbatch``,
    which its messages show, as when a client calls it). The user's own ``SLURM_CONF`` wins over
    the site's ``slurm.conf``, as with sbatch alone."""
    bin_dir, conf, source = _slurm_settings(cfg, io.environ)
    path, mark = real_sbatch.resolve(bin_dir, source, io.environ, skip)
    if skip and mark:
        raise real_sbatch.SbatchNotFound(
            f"wattbatch: error: {skip[0]} ran wattbatch again, and {path} may too; "
            f"{real_sbatch.INSTALL_HINT}")
    env = {"SLURM_CONF": conf} if conf and "SLURM_CONF" not in io.environ else {}
    if mark:
        env.update(real_sbatch.marker(path))
    return path, env


def _sbatch_quiet(args: list[str], io: Io) -> Any:
    """A runner for the info paths (--help, --version): sbatch's result, or None."""
    def call() -> Any:
        from slurm_plugin import proc
        from slurm_plugin.errors import CommandError
        try:
            path, env = _sbatch_command(None, io)
            return proc.run(["sbatch", *args], timeout_s=INFO_TIMEOUT_S, check=False,
                            env=env or None, executable=path)
        except (real_sbatch.SbatchNotFound, CommandError) as exc:
            return exc
    return call


def _sbatch(sub: Submission, cfg: Any, io: Io, skip: tuple[str, ...] = (),
            seen: Callable[[str], None] | None = None) -> int:
    """Run sbatch and relay its stdout, stderr and exit code as they are; ``seen`` gets the
    stdout of a submission sbatch accepted, before the caller does."""
    from slurm_plugin import proc
    from slurm_plugin.errors import CommandError
    try:
        path, env = _sbatch_command(cfg, io, skip)
    except real_sbatch.SbatchNotFound as exc:
        io.err.write(f"{exc}\n")
        return EXIT_NO_SBATCH
    feed = script_io.handoff(sub.script or Script(b"", kind="none"), sub.stdin_data)
    try:
        done = proc.run(["sbatch", *sub.args], timeout_s=SBATCH_TIMEOUT_S, check=False,
                        env=env or None, stdin_fd=feed.stdin_fd,
                        pass_fds=feed.pass_fds + sub.pass_fds,
                        executable=path)
    except CommandError as exc:
        io.err.write(f"wattbatch: error: {' '.join(str(exc).split())}\n")
        return exc.returncode
    finally:
        feed.close()
        if sub.temp_script:
            os.unlink(sub.temp_script)
    if seen is not None and done.returncode == 0:
        try:
            seen(done.stdout)
        except Exception:                   # noqa: BLE001 - the job is in; only a cache hint
            pass
    io.out.write(done.stdout)
    io.err.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    main()
