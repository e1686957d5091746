"""Mutable state of the simulated cluster: GPUs, nodes and jobs (engine-private)."""

from __future__ import annotations

from ..model import Gpu, Node, Placement, JobRequest
from ..physics import JobClass
from .mig import mig_holders
from .trace import TraceJob

ON, BOOT, OFF = "on", "boot", "off"
PENDING, RUNNING, DONE, CANCELLED = "PENDING", "RUNNING", "COMPLETED", "CANCELLED"


class GpuKind:
    """The GPU model of a node group and the constants the engine computes with: the name as
    the cluster gives it (what the GPU views show), its catalogue entry as a small number
    (nodes of one entry are one model: a job never spans two), idle power, top limit, memory."""

    __slots__ = ("model", "entry_id", "idle_w", "max_w", "memory_mib")

    def __init__(self, model: str, entry_id: int, idle_w: float, max_w: float,
                 memory_mib: int) -> None:
        self.model, self.entry_id = model, entry_id
        self.idle_w, self.max_w, self.memory_mib = idle_w, max_w, memory_mib


class GpuState:
    __slots__ = ("node", "index", "jobs", "exclusive", "shards_used", "power_w", "var", "util_pct",
                 "running", "view", "pinned", "throttle", "throttle_changed")

    def __init__(self, node: "NodeState", index: int, var: dict[str, float] | None) -> None:
        self.node, self.index = node, index
        self.jobs: list[SimJob] = []
        self.exclusive = False      # no shards fit: a whole-GPU job or MIG instances hold it
        self.shards_used = 0
        self.power_w = 0.0
        self.var = var          # time multiplier per variability class, None = off
        self.util_pct = 0.0     # SM utilisation from the physics (as GpuReadings reports it)
        self.running = 0        # its jobs that run (not waiting for a node's boot)
        self.view: Gpu | None = None    # the frozen view, None when its jobs changed since
        # pending jobs pinned to it: the view counts them as holders, as the live snapshot
        # counts a pending job's typed GRES (``Job.pinned``)
        self.pinned: list[SimJob] = []
        # time multiplier of every job on it while, shared time-sliced, its jobs together would
        # draw more than its one power limit (``RunningJobs._shared_power``); 1.0 otherwise
        self.throttle = 1.0
        self.throttle_changed = False


class NodeState:
    __slots__ = ("pos", "name", "kind", "gpus", "free", "power", "ready_s", "idle_since", "dirty",
                 "view", "jobs", "avail", "room", "features")

    def __init__(self, pos: int, name: str, kind: GpuKind) -> None:
        self.pos, self.name, self.kind = pos, name, kind
        self.gpus: list[GpuState] = []
        self.free = 0                    # GPUs with no job at all
        self.power = ON
        self.ready_s = 0.0
        self.idle_since: float | None = 0.0
        self.dirty = True
        self.view: Node | None = None
        self.jobs: dict[str, SimJob] = {}
        self.avail: list[float] | None = None   # (EASY) when the k-th GPU is free, k = 1..n
        self.room: int | None = None     # most free shards on one GPU without an exclusive job
        self.features: tuple[str, ...] = ()   # e.g. ("switch=s0",): its leaf switch

    def model(self, shards_total: int) -> Node:
        """The frozen view a policy sees, rebuilt only when the node changed, from the views of
        its GPUs (of the node's own model), each rebuilt only when its jobs changed."""
        if self.dirty or self.view is None:
            kind = self.kind
            for g in self.gpus:
                if g.view is None:
                    g.view = _gpu_view(g, self.name, kind.model, kind.memory_mib, shards_total)
            gpus = tuple(g.view for g in self.gpus)
            if self.power == OFF:
                state = "idle"          # Slurm: IDLE+POWERED_DOWN, resumed on demand
            elif self.free == len(self.gpus):
                state = "idle"
            elif self.free == 0 and all(g.exclusive for g in self.gpus):
                state = "allocated"
            else:
                state = "mixed"
            self.view = Node(name=self.name, state=state, gpus=gpus, features=self.features)
            self.dirty = False
        return self.view


def gres_type(index: int) -> str:
    """The GRES type that names GPU ``index`` of a simulated node (the local cluster's typed
    GPUs: ``g0`` ... ``g3``), in its view and in a pinned job's request."""
    return f"g{index}"


def _gpu_view(g: GpuState, node: str, gpu_model: str, memory_mib: int, shards_total: int) -> Gpu:
    """A GPU as a policy sees it: its running jobs, and the pending jobs pinned to it as the
    live snapshot shows them (a pinned whole GPU as its holder, pinned shards as used). A GPU
    in MIG mode shows its instances' profiles and no shard left (``mig.mig_holders``)."""
    mig = mig_holders(g)
    if mig is not None:
        return Gpu(node=node, index=g.index, model=gpu_model, gres_type=gres_type(g.index),
                   memory_mib=memory_mib, shards_total=shards_total, shards_used=shards_total,
                   shard_jobs=mig[0], mig_profiles=mig[1])
    shards_used = g.shards_used
    exclusive = g.jobs[0].id if g.exclusive else None
    holders = [] if g.exclusive else [j.id for j in g.jobs]
    for p in g.pinned:
        if p.share:
            shards_used += p.shards
            holders.append(p.id)
        elif exclusive is None and not holders:
            exclusive = p.id
    return Gpu(node=node, index=g.index, model=gpu_model, gres_type=gres_type(g.index),
               memory_mib=memory_mib, shards_total=shards_total, shards_used=shards_used,
               exclusive_job=exclusive, shard_jobs=() if exclusive else tuple(holders))


class SimJob:
    __slots__ = ("t", "id", "cls", "req", "pl", "per_node", "num_nodes", "share", "shards", "cap_w",
                 "cap_ask_w", "scale", "work_left", "rate", "irate", "cap_slow", "last_s",
                 "start_s",
                 "first_start_s", "run_start_s", "end_s", "version", "gpus", "state", "begin_s",
                 "dyn_w", "dyn0_w", "util_pct", "restarts", "blocked", "pin_nodes",
                 "pin_indexes", "view", "limit_s", "end_by_s", "shape", "nice", "batch", "ready",
                 "wake_s", "prio", "mig")

    def __init__(self, t: TraceJob, cls: JobClass, req: JobRequest) -> None:
        self.t, self.id, self.cls, self.req = t, t.job_id, cls, req
        self.pl: Placement | None = None
        self.per_node = 0
        self.num_nodes = 1
        self.share = False
        self.shards = 0
        self.cap_w: float | None = None       # the cap applied: in its GPUs' model's range
        self.cap_ask_w: float | None = None   # the cap asked (placement, power_cap action)
        self.scale = 1.0                 # speed relative to the trace's GPU count
        self.work_left = t.duration_s    # solo seconds at the trace's GPU count
        self.rate = 0.0
        self.irate = 1.0                 # progress rate from interference alone
        self.cap_slow = 1.0
        self.last_s = 0.0
        self.start_s: float | None = None
        self.first_start_s: float | None = None
        self.run_start_s: float | None = None
        self.end_s: float | None = None
        self.version = 0
        self.gpus: list[GpuState] = []
        self.state = PENDING
        self.begin_s = t.submit_s
        self.dyn_w = 0.0                 # dynamic power per GPU under its own cap
        self.dyn0_w = 0.0                # ... uncapped (what it draws on a shared GPU)
        self.util_pct = 0.0
        self.restarts = 0
        self.blocked = False
        self.pin_nodes: tuple[str, ...] = ()
        self.pin_indexes: tuple[int, ...] = ()
        self.nice = 0                    # queue tier (Placement.nice): lower goes first
        self.view = None
        self.limit_s = t.duration_s      # requested time limit (whole minutes)
        self.end_by_s = float("inf")     # Slurm's end time of the current run: start + limit
        self.shape: tuple[int, int, int] | None = None  # (GPUs per node, nodes, shards); None: pinned
        self.batch: int | None = None    # global batch a resize set (None: the trace's per GPU)
        self.ready = False               # pending and its --begin passed: in Simulator.ready
        self.wake_s: float | None = None     # the time of its one live Simulator.wake entry
        self.prio: tuple = ()            # its queue order (Simulator._enqueue)
        self.mig = None                  # its MIG instance's profile (sim/mig.py); None: none

    @property
    def total_gpus(self) -> int:
        return self.per_node * self.num_nodes
