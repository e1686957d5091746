"""Changes to Slurm jobs: submit, defer, the resize steps, cancel.

Resize is four separate steps so the reconciler can journal each one:
``requeue_hold`` -> ``set_gpu_count`` -> ``release`` -> ``start_now``. The GPU count is always
untyped (``TresPerNode=gres:gpu:M``): changing a pending job's *typed* request can allocate the
wrong GPUs or crash slurmctld on Slurm 22.05.
"""

from __future__ import annotations

import time
from typing import Mapping, NamedTuple, Sequence

from ..config import SiteConfig
from ..errors import CommandError, InputError
from ..formats.admin_comment import recorded_nice, with_cap
from ..model import NICE_STEP
from .cli import slurm, slurm_json, slurm_release
from .formats import release_tuple
from .parse import parse_scontrol_record

# From this release on, a held job's shard request can be turned into whole GPUs
# (``TresPerNode=gres:gpu:N``), checked on 24.11.5 and 26.05.5; 22.05 refuses it.
GPU_FOR_SHARDS = (24, 11)


def submit(argv: Sequence[str], script: str | None, cfg: SiteConfig) -> str:
    """``sbatch --parsable <argv>`` with ``script`` on stdin (None: argv names the script or
    has --wrap); return the job id."""
    out = slurm("sbatch", ["--parsable", *argv], cfg, input_text=script).stdout.strip()
    job_id = out.splitlines()[-1].split(";")[0] if out else ""
    if not job_id.isdigit():
        raise InputError(f"slurm: sbatch --parsable printed {out!r}, expected a job id")
    return job_id


def _check_id(job_id: str) -> str:
    job_id = str(job_id)
    if not job_id.replace("_", "").isdigit():
        raise InputError(f"slurm: job id {job_id!r} is not a Slurm job id (digits)")
    return job_id


def _scontrol(args: list[str], cfg: SiteConfig) -> None:
    slurm("scontrol", args, cfg)


def slurm_time(epoch_s: float) -> str:
    """Epoch seconds -> Slurm's local ``YYYY-MM-DDTHH:MM:SS``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch_s))


def defer(job_id: str, begin_s: float, cfg: SiteConfig) -> None:
    """Do not start a pending job before ``begin_s`` (epoch seconds)."""
    _scontrol(["update", f"jobid={_check_id(job_id)}", f"StartTime={slurm_time(begin_s)}"], cfg)


RELAUNCH_DELAY_S = 2     # > the 1 s resolution of slurmd's credential revocation


def requeue_hold(job_id: str, cfg: SiteConfig) -> None:
    """Resize step 1: stop a running job and hold it pending (restart count + 1)."""
    _scontrol(["requeuehold", _check_id(job_id)], cfg)


def set_gpu_count(job_id: str, gpus: int, cfg: SiteConfig, num_nodes: int | None = None) -> None:
    """Resize step 2: set a pending job's untyped GPU count per node, and its node count
    (``NumNodes``, min and max alike) when ``num_nodes`` is given: an elastic job that grows
    past a node, or shrinks back onto one."""
    if not isinstance(gpus, int) or gpus < 1:
        raise InputError(f"slurm: GPU count {gpus!r} for job {job_id}: give an integer >= 1")
    if num_nodes is not None and (not isinstance(num_nodes, int) or num_nodes < 1):
        raise InputError(f"slurm: node count {num_nodes!r} for job {job_id}: give an "
                         "integer >= 1")
    nodes = [f"NumNodes={num_nodes}-{num_nodes}"] if num_nodes is not None else []
    _scontrol(["update", f"jobid={_check_id(job_id)}", *nodes, f"TresPerNode=gres:gpu:{gpus}"],
              cfg)


def whole_gpu_tres(tres_per_node: str, share_gres: str, per_gpu: int) -> tuple[str, bool]:
    """``TresPerNode`` of a job asking for every ``share_gres`` unit of each GPU it shares
    (``gres:shard:g0:2`` or 24.11's ``gres/shard:g0:2`` -> ``gres:shard:g0:4``), and whether
    an entry is typed. Other entries are kept as they are. The result is written the
    ``gres:`` way, which every supported release accepts in ``scontrol update``."""
    out, typed = [], False
    for entry in filter(None, tres_per_node.split(",")):
        parts = entry.replace("gres/", "gres:", 1).split(":")
        if len(parts) in (3, 4) and parts[0] == "gres" and parts[1] == share_gres:
            typed = typed or len(parts) == 4
            entry = ":".join([*parts[:-1], str(per_gpu)])
        out.append(entry)
    return ",".join(out), typed


def exclusive_gpu_tres(tres_per_node: str, share_gres: str) -> str:
    """``TresPerNode`` asking for whole GPUs instead of shares: one ``gres:gpu`` per GPU the
    job shared (a typed entry names one GPU; an untyped share count fits on one GPU), added to
    any whole GPUs it already asks for. Other entries are kept."""
    out, gpus = [], 0
    for entry in filter(None, tres_per_node.replace("gres/", "gres:").split(",")):
        parts = entry.split(":")
        if len(parts) in (3, 4) and parts[0] == "gres" and parts[1] == share_gres:
            gpus += 1
        elif len(parts) == 3 and parts[:2] == ["gres", "gpu"] and parts[2].isdigit():
            gpus += int(parts[2])
        else:
            out.append(entry)
    return ",".join([*out, f"gres:gpu:{gpus}"]) if gpus else tres_per_node


def take_whole_gpus(job_id: str, cfg: SiteConfig) -> None:
    """Move step 2 (``move_exclusive``): a held job that shares a GPU asks for GPUs no other
    job can join.

    Slurm 24.11 and later turn the shard request into whole GPUs (``gres:gpu:N``; the node pin
    is dropped so any free GPU will do). Slurm 22.05 cannot turn a shard request into
    ``gres:gpu`` (nor a typed request into another type: it keeps both) but replaces the
    count of the same name and type: there the job asks for every share of the GPUs it
    shares. With typed GPUs the type names the GPU index, so the node pin is dropped and
    Slurm takes that index on any node where it is wholly free."""
    jid = _check_id(job_id)
    tres = show_job(jid, cfg).get("TresPerNode", "")
    share = cfg["slurm.share_gres"]
    if release_tuple(slurm_release(cfg)) >= GPU_FOR_SHARDS:
        new, unpin = exclusive_gpu_tres(tres, share), True
    else:
        new, unpin = whole_gpu_tres(tres, share, cfg["slurm.shards_per_gpu"])
    if new != tres:
        _scontrol(["update", f"jobid={jid}", f"TresPerNode={new}",
                   *(["NodeList="] if unpin else [])], cfg)


def set_tier(job_id: str, tier: int, cfg: SiteConfig) -> None:
    """A pending job's queue tier: ``Nice=OWN + NICE_STEP x tier`` (tier 0 first, as at
    submission with ``sbatch --nice``), where OWN is the job's own ``--nice`` that wattbatch
    recorded in its tag (0 without)."""
    if isinstance(tier, bool) or not isinstance(tier, int) or tier < 0:
        raise InputError(f"slurm: queue tier {tier!r} for job {job_id}: give an integer >= 0")
    shown = show_job(job_id, cfg)
    own = recorded_nice(shown.get("AdminComment", ""), shown.get("Comment", ""))
    _scontrol(["update", f"jobid={_check_id(job_id)}", f"Nice={own + NICE_STEP * tier}"], cfg)


def release(job_id: str, cfg: SiteConfig) -> None:
    """Resize step 3: release a held job."""
    _scontrol(["release", _check_id(job_id)], cfg)


def start_now(job_id: str, cfg: SiteConfig) -> None:
    """Resize step 4: let a requeued job start soon (it would wait ~2 min otherwise).

    Not in the same second as the requeue: slurmd refuses a credential whose time is not
    after the revocation of the job's last one ("Job credential revoked") and Slurm then
    fails the job, so the start is pushed ``RELAUNCH_DELAY_S`` out."""
    _scontrol(["update", f"jobid={_check_id(job_id)}",
               f"StartTime=now+{RELAUNCH_DELAY_S}"], cfg)


def resize(job_id: str, gpus: int, cfg: SiteConfig, num_nodes: int | None = None) -> None:
    """All four resize steps in order, for callers that do not journal each step."""
    requeue_hold(job_id, cfg)
    set_gpu_count(job_id, gpus, cfg, num_nodes)
    release(job_id, cfg)
    start_now(job_id, cfg)


def set_time_limit(job_id: str, time_limit_s: float, cfg: SiteConfig) -> None:
    """Set a job's time limit (``scontrol update TimeLimit``, whole minutes rounded up; raising
    it past the partition's limit takes an operator, as the reconciler is)."""
    if not 0 < time_limit_s < 1e9:
        raise InputError(f"slurm: time limit {time_limit_s!r} s for job {job_id}: give a "
                         "positive number of seconds")
    minutes = int(-(-time_limit_s // 60))
    _scontrol(["update", f"jobid={_check_id(job_id)}", f"TimeLimit={minutes}"], cfg)


def set_power_cap(job_id: str, power_cap_w: float | None, cfg: SiteConfig) -> None:
    """Record the GPU power cap (W; None: no cap) of a pending or running job in its
    AdminComment (``wb:..;cap=W``, out of users' reach), where the node side reads it and
    applies it to the job's GPUs (``node/power_cap.py``). Every other word is kept."""
    if power_cap_w is not None and not 0 < power_cap_w < 1e5:
        raise InputError(f"slurm: power cap {power_cap_w!r} W for job {job_id}: give a "
                         "positive number of watts, or none")
    old = admin_comment_now(job_id, cfg)
    if old is None:
        raise InputError(f"slurm: job {job_id} is not in squeue: no power cap to set")
    new = with_cap(old, power_cap_w)
    if new != old:
        _scontrol(["update", f"jobid={job_id}", f"AdminComment={new}"], cfg)


def admin_comment_now(job_id: str, cfg: SiteConfig) -> str | None:
    """A job's AdminComment as slurmctld has it (``squeue --json``: pending, running and
    completing jobs), None when squeue does not list the job. The accounting database gets it
    later, so a job that ends soon after it started may not have it there yet."""
    jobs = slurm_json("squeue", [f"--jobs={_check_id(job_id)}"], cfg).get("jobs") or []
    return next((str(j.get("admin_comment") or "") for j in jobs
                 if str(j.get("job_id")) == str(job_id)), None)


def cancel(job_id: str, cfg: SiteConfig) -> None:
    slurm("scancel", [_check_id(job_id)], cfg)


_TRES_KEYS = ("TresPerNode", "TresPerJob", "TresPerSocket", "TresPerTask")


def show_job(job_id: str, cfg: SiteConfig) -> Mapping[str, str]:
    """``scontrol show job -d -o`` as {Key: Value}, GRES requests in the ``gres:`` spelling of
    every release (24.11+ prints ``TresPerNode=gres/gpu:2``, 22.05 ``gres:gpu:2``)."""
    record = parse_scontrol_record(slurm("scontrol", ["show", "job", "-d", "-o",
                                                      _check_id(job_id)], cfg).stdout)
    return {k: v.replace("gres/", "gres:") if k in _TRES_KEYS else v for k, v in record.items()}


class JobNow(NamedTuple):
    """A job as slurmctld has it now (``job_now``)."""

    state: str              # PENDING, RUNNING, COMPLETING, FAILED, ...
    held: bool              # pending with priority 0 (requeuehold, scontrol hold, a failed
                            # launch that Slurm requeued held)
    tres_per_node: str
    num_nodes: int
    reason: str             # Reason= (launch_failed_requeued_held, JobHeldAdmin, ...)
    exit_code: str          # ExitCode= "status:signal" ("0:15": ended by SIGTERM)
    start_s: float | None   # StartTime= and EndTime= in epoch seconds (None: Unknown);
    end_s: float | None     # a pending job's are Slurm's expectations


def job_now(job_id: str, cfg: SiteConfig) -> JobNow | None:
    """A job as slurmctld has it now (ended jobs too, while Slurm keeps them), None when it
    does not know the job. ``held``: priority 0 (``requeuehold``, ``scontrol hold``). A held
    job still completing after a requeue (COMPLETING, REQUEUED, REQUEUE_HOLD) reads as
    PENDING: it can be updated and released. Raises ``CommandError`` when slurmctld cannot be
    asked."""
    try:
        shown = show_job(job_id, cfg)
    except CommandError as exc:
        if "Invalid job id" in exc.stderr:
            return None
        raise
    state = shown.get("JobState", "")
    held = shown.get("Priority") == "0"
    if held and (state == "COMPLETING" or state.startswith("REQUEUE")):
        state = "PENDING"
    nodes = shown.get("NumNodes", "1").split("-")[0]
    return JobNow(state, held and state == "PENDING", shown.get("TresPerNode", ""),
                  int(nodes) if nodes.isdigit() else 1, shown.get("Reason", ""),
                  shown.get("ExitCode", ""), _epoch_s(shown.get("StartTime", "")),
                  _epoch_s(shown.get("EndTime", "")))


def job_ended(job_id: str, cfg: SiteConfig) -> tuple[str, str, float | None] | None:
    """(state, exit code, end in epoch seconds) of a job as Slurm's accounting has it (the
    job's own row, not its steps'), None when it has no such job: what is left of a job
    slurmctld has forgotten (``MinJobAge`` after it ended)."""
    out = slurm("sacct", ["-X", "-n", "-P", "-j", _check_id(job_id),
                          "--format=JobIDRaw,State,ExitCode,End"], cfg).stdout
    for line in out.splitlines():
        fields = line.split("|")
        if len(fields) == 4 and fields[0] == str(job_id):
            state = fields[1].split()[0] if fields[1] else ""
            return state, fields[2], _epoch_s(fields[3])
    return None


def _epoch_s(text: str) -> float | None:
    """Slurm's local ``YYYY-MM-DDTHH:MM:SS`` -> epoch seconds (None: Unknown, None, bad)."""
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None
