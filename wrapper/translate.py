"""A policy's ``Placement`` -> extra sbatch options and the job's environment block.

The changes go on sbatch's command line, after the user's own options, so they win over both
the user's command line (getopt: last one wins) and the script's ``#SBATCH`` lines.

=====================================  =========================================================
Placement                               sbatch
=====================================  =========================================================
``nodes``                               ``--nodelist=a,b``
``share_mode`` shard/mps, ``shards``    ``--gres=shard:K`` (``mps:K``), per GPU ``shard:g1:K``
 + ``gpu_indexes`` and typed GPUs       (one typed entry per GPU: pins the GPU index)
``share_mode`` mig, ``mig_profile``     ``--gres=gpu:3g.40gb:1`` (the node's MIG devices of that
                                        profile; the GPU index is not pinned)
exclusive + ``gpu_indexes``, typed      ``--gres=gpu:g1:1,gpu:g3:1``
``gpus`` != requested                   ``--gres=gpu[:model]:N``
``num_nodes`` != requested (elastic)    ``--nodes=K``
``begin_s``                             ``--begin=YYYY-MM-DDTHH:MM:SS`` (local time)
``nice`` > 0                            ``--nice=OWN+100*nice`` (a later queue tier, added to
                                        the job's own --nice, if any)
always                                  ``--comment=[user comment ]wb:policy=P;app=A;share=S;cap=W;nice=OWN;slack=S;elastic=MIN-MAX``
                                        (job_submit.lua moves the tag to AdminComment)
``power_cap_w``, ``batch_size``,        environment block in the script (``WATTBATCH_*``),
memory cap, elastic                     see ``templates/``
=====================================  =========================================================

The user's other GRES entries are kept in the new ``--gres``. A change the user refused with
``--wb-opt-out`` is dropped here too, whatever the policy said; a GPU change is dropped when the
user asked for GPUs with ``--gpus*`` (sbatch cannot take those back) or for shards/MPS
themselves. Each dropped change is said in ``notes``. A ``--gpus*`` option (or
``--tres-per-task=gres/gpu``) drops it even beside ``--gres=gpu``: a ``shard`` GRES added next to
it would ask for a whole GPU and a shard.
"""

from __future__ import annotations

import time

from slurm_plugin.model import NICE_STEP, Cluster, JobRequest, Placement
from slurm_plugin.record import field, record, replace

from .request import GpuAsk, SbatchView, gpus_option, parse_gres
from .wb_options import WbSettings


@record
class Site:
    share_gres: str = "shard"
    shards_per_gpu: int = 4
    typed_gpus: bool = True
    template: str = "base.sbatch.j2"


@record(frozen=False)
class Plan:
    """What wattbatch does to the submission."""

    args: list[str] = field(default_factory=list)          # appended to the user's options
    env: list[tuple[str, str]] = field(default_factory=list)   # exported by the script block
    template: str = ""                                     # "" = script left byte for byte
    share_mode: str = "exclusive"
    mem_cap_mib: int | None = None
    mem_fraction: float | None = None
    gpus: int = 0
    notes: list[str] = field(default_factory=list)
    gpus_kept: bool = False        # the policy's GPU change was dropped: the job keeps its ask




_REFUSALS = (   # action, does the placement use it, what undoes it, note
    ("place", lambda p, r: bool(p.nodes or p.gpu_indexes),
     dict(nodes=(), gpu_indexes=()), "node choice dropped"),
    ("share", lambda p, r: p.share_mode != "exclusive",
     dict(share_mode="exclusive", shards=0, gpu_indexes=(), mig_profile=""),
     "shared GPU dropped"),
    ("defer", lambda p, r: p.begin_s is not None, dict(begin_s=None), "start time dropped"),
    ("resize", lambda p, r: p.gpus != r.gpus, None, "GPU count kept"),
    ("power", lambda p, r: p.power_cap_w is not None, dict(power_cap_w=None), "power cap dropped"),
    ("batch", lambda p, r: p.batch_size is not None, dict(batch_size=None), "batch size dropped"),
)


def enforce_opt_out(p: Placement, request: JobRequest) -> tuple[Placement, list[str]]:
    """Undo whatever the user refused with ``--wb-opt-out``, even if the policy did it."""
    notes = []
    for action, used, undo, note in _REFUSALS:
        if action in request.opt_out and used(p, request):
            p = replace(p, **(undo if undo is not None else {"gpus": request.gpus}))
            notes.append(f"opt-out {action}: {note}")
    return p, notes


def enforce_array(p: Placement, request: JobRequest) -> tuple[Placement, list[str]]:
    """An array's tasks all get the options of its one submission: a node list, GPU pins or a
    shared GPU chosen for one job would send every task there (a shard pinned for one job
    stacked four tasks on one GPU while others stood idle). Slurm places each task itself."""
    if request.array_tasks < 2 or not (p.nodes or p.gpu_indexes or p.share_mode != "exclusive"):
        return p, []
    p = replace(p, nodes=(), gpu_indexes=(), share_mode="exclusive", shards=0,
                gpu_memory_cap_mib=None, mig_profile="")
    return p, [f"array of {request.array_tasks} tasks: placement dropped (nodes, GPUs, sharing "
               "are chosen for one job; Slurm places each task)"]


def _gpu_types(cluster: Cluster | None, node: str, indexes: tuple[int, ...]) -> list[str] | None:
    if cluster is None:
        return None
    try:
        by_index = {g.index: g for g in cluster.node(node).gpus}
    except KeyError:
        return None
    types = [by_index[i].gres_type if i in by_index else "" for i in indexes]
    return types if all(types) else None


def _mem_cap(p: Placement, cluster: Cluster | None, site: Site) -> tuple[int | None, float | None]:
    """The job's GPU memory share: the policy's cap, else memory x shards / shards on the GPU."""
    gpu = None
    if cluster is not None and p.nodes:
        try:
            gpus = cluster.node(p.nodes[0]).gpus
            gpu = next((g for g in gpus if g.index in p.gpu_indexes), gpus[0] if gpus else None)
        except KeyError:
            gpu = None
    total = gpu.memory_mib if gpu else None
    cap = p.gpu_memory_cap_mib
    if cap is None and total and p.shards:
        per_gpu = (gpu.shards_total if gpu and gpu.shards_total else site.shards_per_gpu)
        cap = int(total * min(p.shards, per_gpu) / per_gpu)
    fraction = round(cap / total, 3) if cap and total else None
    return cap, fraction


def _own_nice(view: SbatchView) -> int | None:
    """The job's own --nice (sbatch: 100 without a value; 0 without the option), which the
    policy's queue tier adds to rather than replaces; None where it is not a whole number."""
    if not view.has("nice"):
        return 0
    raw = (view.get("nice") or "").strip()
    if not raw:
        return 100
    try:
        return int(raw)
    except ValueError:
        return None


def plan(p: Placement, request: JobRequest, view: SbatchView, ask: GpuAsk, wb: WbSettings,
         site: Site, cluster: Cluster | None = None, *, shell_script: bool = True) -> Plan:
    p, notes = enforce_opt_out(p, request)
    p, array_notes = enforce_array(p, request)
    out = Plan(notes=notes + array_notes, gpus=p.gpus)
    gpu_change = (p.share_mode != "exclusive" or p.gpu_indexes or p.gpus != request.gpus
                  or (p.num_nodes is not None and p.num_nodes != request.num_nodes))
    gpus_by = ask.source if ask.source not in ("gres", "") else gpus_option(view)
    if gpu_change and ask.shared:
        out.notes.append("GPU change dropped: the job asks for shards/MPS itself")
        gpu_change = False
    elif gpu_change and gpus_by:      # even beside --gres=gpu: sbatch would get both asks
        out.notes.append(f"GPU change dropped: GPUs asked with --{gpus_by}; "
                         "use --gres=gpu:N to let wattbatch place them")
        gpu_change, out.gpus_kept = False, True
    if gpu_change and p.share_mode not in ("exclusive", "mig", site.share_gres):
        out.notes.append(f"shared GPU dropped: the site shares GPUs by {site.share_gres}, "
                         f"not {p.share_mode}")
        gpu_change = False
    if p.nodes:
        out.args.append("--nodelist=" + ",".join(p.nodes))
    if gpu_change and p.num_nodes is not None and p.num_nodes != request.num_nodes:
        out.args.append(f"--nodes={p.num_nodes}")
    if gpu_change:
        entries = _gpu_entries(p, request, cluster, site, out)
        if entries:
            keep = [e.text for e in parse_gres(view.get("gres") or "")
                    if e.name not in ("gpu", "shard", "mps")]
            out.args.append("--gres=" + ",".join(keep + entries))
            out.share_mode = p.share_mode
    own = _own_nice(view) if p.nice else 0
    if p.nice and own is not None:      # else sbatch judges the user's own value, unchanged
        out.args.append(f"--nice={own + NICE_STEP * p.nice}")
    if p.begin_s is not None:
        out.args.append("--begin=" + time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(p.begin_s)))
    tag = f"wb:policy={p.policy}" + (f";app={request.app}" if request.app else "")
    if out.share_mode != "exclusive":
        tag += f";share={out.share_mode}:{p.mig_profile if out.share_mode == 'mig' else p.shards}"
    if p.power_cap_w is not None:
        tag += f";cap={p.power_cap_w:.0f}"
    if own:     # kept when reconcile moves the job to another tier
        tag += f";nice={own}"
    if request.slack_s and "defer" not in request.opt_out:
        tag += f";slack={request.slack_s:.0f}"
    if request.min_gpus is not None and request.max_gpus is not None:
        tag += f";elastic={request.min_gpus}-{request.max_gpus}"
    if request.min_batch_size is not None and request.max_batch_size is not None:
        tag += f";batch={request.min_batch_size}-{request.max_batch_size}"
        if request.lr_scaling:
            tag += f";lr={request.lr_scaling}"
    user_comment = view.get("comment") or ""
    out.args.append("--comment=" + (f"{user_comment} {tag}" if user_comment else tag))
    _environment(p, request, cluster, site, out, shell_script)
    return out


def _gpu_entries(p: Placement, request: JobRequest, cluster: Cluster | None, site: Site,
                 out: Plan) -> list[str]:
    if p.share_mode == "mig":       # MIG devices are typed by profile, not by GPU index
        return [f"gpu:{p.mig_profile}:1"]
    types = None
    if p.gpu_indexes and len(p.nodes) == 1 and site.typed_gpus:
        types = _gpu_types(cluster, p.nodes[0], p.gpu_indexes)
        if types is None:
            out.notes.append("GPU index not pinned: the snapshot has no GRES type for it")
    if p.share_mode != "exclusive":
        shards = max(1, p.shards)
        if types:
            return [f"{p.share_mode}:{t}:{shards}" for t in types]
        return [f"{p.share_mode}:{shards * max(1, p.gpus)}"]
    if types:
        return [f"gpu:{t}:1" for t in types]
    if p.gpus != request.gpus:
        kind = f"{request.gpu_type}:" if request.gpu_type else ""
        return [f"gpu:{kind}{p.gpus}"]
    return []


def _environment(p: Placement, request: JobRequest, cluster: Cluster | None, site: Site,
                 out: Plan, shell_script: bool) -> None:
    env = [("WATTBATCH_JOB_POLICY", p.policy)]
    if request.app:
        env.append(("WATTBATCH_JOB_APP", request.app))
    wanted = False
    if out.share_mode == "mig":     # the instance holds its own memory: nothing to cap
        env += [("WATTBATCH_SHARE_MODE", "mig"), ("WATTBATCH_MIG_PROFILE", p.mig_profile)]
        out.template, wanted = "shared_gpu.sbatch.j2", True
    elif out.share_mode != "exclusive":
        out.mem_cap_mib, out.mem_fraction = _mem_cap(p, cluster, site)
        env += [("WATTBATCH_SHARE_MODE", out.share_mode), ("WATTBATCH_SHARDS", str(p.shards))]
        if out.mem_cap_mib:
            env.append(("WATTBATCH_GPU_MEM_CAP_MIB", str(out.mem_cap_mib)))
        if out.mem_fraction:
            env.append(("WATTBATCH_GPU_MEM_FRACTION", f"{out.mem_fraction:g}"))
        out.template, wanted = "shared_gpu.sbatch.j2", True
    if p.power_cap_w is not None:
        env.append(("WATTBATCH_POWER_CAP_W", f"{p.power_cap_w:g}"))
        wanted = True
    if p.batch_size is not None:
        env.append(("WATTBATCH_BATCH_SIZE", str(p.batch_size)))
        wanted = True
    if request.min_batch_size is not None and request.max_batch_size is not None:
        # the range the scheduler may advise within; the job script reads the advice at start
        env += [("WATTBATCH_BATCH_RANGE", f"{request.min_batch_size}-{request.max_batch_size}"),
                ("WATTBATCH_LR_SCALING", request.lr_scaling or "linear")]
        out.notes.append(
            f"batch size {request.min_batch_size}-{request.max_batch_size} "
            f"({request.lr_scaling or 'linear'} learning-rate rule): a job that reports its "
            "batch (report_progress(..., batch_size=), wattbatch-progress --batch-size) gets "
            "the scheduler's advice; its history: wattctl report --batches --job JOBID")
        wanted = True
    if request.min_gpus is not None and request.max_gpus is not None:
        env += [("WATTBATCH_MIN_GPUS", str(request.min_gpus)),
                ("WATTBATCH_MAX_GPUS", str(request.max_gpus))]
        out.template, wanted = "elastic.sbatch.j2", True
    if not wanted:
        out.template = ""
        return
    if not shell_script:
        out.template = ""
        out.notes.append("environment block not added: the script is not a shell script")
        return
    if out.template == "":
        out.template = site.template
    out.env = env
