"""Frozen value objects: the only things a policy sees and returns.

Both bodies build these: the Slurm adapter from ``squeue``/``scontrol`` output, the simulator
from its event loop. Policies never learn which body produced them.

Units are in the names: ``_s`` seconds (epoch seconds for instants), ``_w`` watts,
``_j`` joules, ``_mib`` mebibytes, ``_pct`` percent.
"""

from __future__ import annotations

from types import MappingProxyType

from .record import field, record

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:       # the aliases are for annotations only
    from typing import Literal, Mapping, Sequence

    ShareMode = Literal["exclusive", "shard", "mps", "mig"]
    ActionKind = Literal["resize", "defer", "cancel", "move_exclusive", "unpin", "power_cap",
                         "observe", "note", "batch"]


EMPTY_MAP: Mapping = MappingProxyType({})  # the shared empty read-only mapping


@record
class Gpu:
    """One physical GPU and who uses it right now."""

    node: str
    index: int
    model: str = "V100"          # hardware model, e.g. V100, A100
    gres_type: str = ""          # Slurm GRES type used to pin this GPU (e.g. "g0"), "" if untyped
    memory_mib: int = 32768
    shards_total: int = 0        # shards configured on this GPU (0: sharing not offered)
    shards_used: int = 0
    exclusive_job: str | None = None   # job holding the whole GPU, if any
    shard_jobs: tuple[str, ...] = ()   # jobs holding shards on it (or MIG instances)
    # In MIG mode: the instance profile of each of ``shard_jobs`` ("3g.40gb"; "" for a job
    # holding shards); no shards are then left (``shards_used == shards_total``). Empty: the
    # GPU is not in MIG mode.
    mig_profiles: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, int]:
        return (self.node, self.index)

    @property
    def job_ids(self) -> tuple[str, ...]:
        return ((self.exclusive_job,) if self.exclusive_job else ()) + self.shard_jobs

    @property
    def is_free(self) -> bool:
        return self.exclusive_job is None and not self.shard_jobs


_AVAILABLE: dict[str, bool] = {}     # node state -> available (a few states recur)


@record
class Node:
    name: str
    state: str = "idle"          # Slurm's base state, lower case: idle, mixed, allocated, down...
    gpus: tuple[Gpu, ...] = ()
    cpus: int = 0
    memory_mib: int = 0
    features: tuple[str, ...] = ()

    @property
    def available(self) -> bool:
        got = _AVAILABLE.get(self.state)
        if got is None:
            s = self.state.lower()
            got = not any(w in s for w in ("down", "drain", "fail", "not_responding",
                                           "powered_down", "unknown"))
            if len(_AVAILABLE) < 1024:
                _AVAILABLE[self.state] = got
        return got

    def free_gpus(self) -> tuple[Gpu, ...]:
        return tuple(g for g in self.gpus if g.is_free)


@record
class GpuUse:
    """A job's hold on one GPU: ``shards == 0`` means the whole GPU."""

    node: str
    index: int
    shards: int = 0


@record
class Job:
    """A job the scheduler knows about (pending or running)."""

    job_id: str
    state: str
    name: str = ""
    user: str = ""
    account: str = ""             # the Slurm account it is charged to ("" unknown)
    partition: str = ""
    gpus: int = 0                 # whole GPUs requested per node (untyped count)
    shards: int = 0               # shards requested per node
    num_nodes: int = 1
    nodes: tuple[str, ...] = ()
    uses: tuple[GpuUse, ...] = ()
    submit_s: float = 0.0
    start_s: float | None = None
    end_s: float | None = None
    time_limit_s: float | None = None
    restart_count: int = 0
    comment: str = ""
    app: str = ""                 # workload class (from the job comment or the simulator)
    reason: str = ""
    exit_code: int | None = None
    deadline_s: float | None = None   # sbatch --deadline (Slurm cancels the job past it)
    begin_s: float | None = None      # a pending job's --begin (Slurm's StartTime while deferred)
    slack_s: float | None = None      # --wb-slack: how long its start may be shifted (None: not)
    power_cap_w: float | None = None  # the cap wattbatch set on its GPUs (None: the board's)
    # A pending job pinned to typed GPUs of one node: (node, GRES type, shares; 0 for a whole
    # GPU) per entry. The type names the GPU, so the snapshot counts it as that GPU's holder.
    pinned: tuple[tuple[str, str, int], ...] = ()
    # An elastic job (--wb-elastic=MIN-MAX): the fewest and most GPUs it may run on, in all
    # (None: not elastic, its size is the user's).
    min_gpus: int | None = None
    max_gpus: int | None = None
    # Its global batch size now and the range it may run at (--wb-batch-size=MIN-MAX; None:
    # the batch is the job's own), and how its learning rate follows a new batch size
    # ("linear" or "sqrt"; "" when it did not say: linear).
    batch_size: int | None = None
    min_batch_size: int | None = None
    max_batch_size: int | None = None
    lr_scaling: str = ""
    # A pending job array's tasks that have not started are one record under the array's id
    # (squeue's ``1_[4-9]``): how many it stands for. Anything done to the record is done to
    # each of them, so the snapshot keeps no elastic or batch range on it (nothing resizes it).
    array_tasks: int = 1

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"


LIMIT_USE_WINDOW_S = 7 * 86400.0    # Cluster.limit_use: the jobs ended in the last week


@record
class Cluster:
    """A snapshot of nodes and jobs at ``taken_s``.

    ``jobs`` is a read-only mapping by job id. The simulator may hand in a live read-only view
    for speed: a policy must not keep a Cluster beyond the call it was given in.
    """

    nodes: tuple[Node, ...]
    jobs: Mapping[str, Job] = field(default_factory=lambda: EMPTY_MAP)
    taken_s: float = 0.0
    name: str = "cluster"
    pending_count: int | None = None   # pending jobs in ``jobs``, when the caller keeps a count
    warnings: tuple[str, ...] = ()     # jobs or nodes left out: Slurm output not understood
    # When the caller keeps them (the simulator): a number that changes whenever a node's view
    # does, and the names of the nodes whose view each recent version changed. A node not named
    # since a version has the same view object, at the same place, as then. None, or a version
    # missing from the log: unknown, so a cache keyed on node views must look at every node.
    nodes_version: int | None = None
    nodes_log: Mapping[int, tuple[str, ...]] | None = None
    # When the caller keeps them in order (the simulator): the pending jobs in Slurm's priority
    # order (--nice tier, then submission), read lazily; None: a policy sorts ``jobs`` itself
    pending_jobs: Sequence[Job] | None = None
    # how many of ``pending_jobs`` wait in a later tier than 0 (none: that order is by
    # submission); None: unknown
    pending_tiered: int | None = None
    # When the caller keeps them (the simulator): the pending jobs pinned to typed GPUs
    # (``Job.pinned``); None: a policy finds them in ``jobs``
    pending_pinned: Sequence[Job] | None = None
    # the share of their time limits that the jobs ended in the last LIMIT_USE_WINDOW_S used,
    # weighted by their GPUs (Slurm's accounting; the simulator's finished jobs); None: not read
    limit_use: float | None = None
    # where it was read: "" = Slurm; "view PATH" = the cluster view (``cluster_view``)
    source: str = ""

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def gpu_count(self) -> int:
        return sum(len(n.gpus) for n in self.nodes)

    def pending_at_least(self, limit: int) -> int:
        """Pending jobs, counted up to ``limit`` (from ``pending_count`` when given)."""
        if self.pending_count is not None:
            return min(self.pending_count, limit)
        n = 0
        for job in self.jobs.values():
            if job.pending:
                n += 1
                if n >= limit:
                    break
        return n


@record
class JobRequest:
    """What a user asks for, parsed from sbatch options (live) or a trace row (simulator)."""

    name: str = ""
    user: str = ""
    account: str = ""              # -A/--account ("" = the user's default account)
    partition: str = ""            # -p/--partition ("" = the default partition)
    gpus: int = 0                  # GPUs per node; 0 for a CPU-only job
    num_nodes: int = 1
    # the GPU model asked for ("" = any): the catalogue's name of the model a GRES type
    # (--gres=gpu:a100:2) or a --constraint feature (h100) names, else that type as given
    gpu_model: str = ""
    gpu_type: str = ""             # the GRES type asked for, as given ("a100"; "" = none)
    time_limit_s: float | None = None
    deadline_s: float | None = None
    slack_s: float | None = None   # --wb-slack: the start may move this long (None: not deferrable)
    app: str = ""                  # workload class, when known
    memory_per_gpu_mib: int | None = None
    min_gpus: int | None = None
    max_gpus: int | None = None
    min_batch_size: int | None = None   # --wb-batch-size=MIN-MAX (None: not adjustable)
    max_batch_size: int | None = None
    lr_scaling: str = ""           # --wb-lr-scaling: linear or sqrt ("" = linear)
    allow_share: bool | None = None   # None: the site default decides
    opt_out: frozenset[str] = frozenset()  # policy actions the user refused: "share", "defer", ...
    submit_s: float = 0.0
    job_id: str = ""               # known in the simulator and in reconcile; "" at submit time
    repeat_key: str = ""           # identifies a repeated job (same user+name+app) for history
    array_tasks: int = 1           # --array: the tasks this one submission stands for

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.num_nodes


@record
class Resident:
    """A job on a GPU at a reading: shares held (0: the whole GPU), its own utilisation of
    the GPU (None when the source cannot tell) and its workload class ("" unknown)."""

    job_id: str
    shares: int = 0
    util_pct: float | None = None
    app: str = ""


@record
class GpuReading:
    node: str
    index: int
    power_w: float
    energy_j: float
    util_pct: float
    mem_used_mib: float
    power_limit_w: float
    taken_s: float
    residents: tuple[Resident, ...] = ()   # jobs on the GPU, where the source knows them
    # the GPU's model where the source knows it: its catalogue entry (NVML: from the board's
    # name), else the name the board gave when it is not catalogued; "" unknown
    model: str = ""


@record
class Progress:
    """Latest ``job_progress`` of a job: steps done, throughput, epoch."""

    job_id: str
    step: int
    samples_per_s: float
    epoch: int = 0
    steps_per_epoch: int = 0
    total_steps: int = 0
    taken_s: float = 0.0
    started_s: float = 0.0        # time of the first progress point of this run
    batch_size: int | None = None  # the global batch the job says it runs at (None: not said)


@record
class Readings:
    """Telemetry at one moment. Every field may be empty: policies must cope."""

    gpus: Mapping[tuple[str, int], GpuReading] = field(default_factory=lambda: EMPTY_MAP)
    progress: Mapping[str, Progress] = field(default_factory=lambda: EMPTY_MAP)
    carbon_g_per_kwh: float | None = None
    carbon_forecast: tuple[tuple[float, float], ...] = ()   # (epoch_s, gCO2/kWh), ascending
    cluster_power_w: float | None = None   # GPUs and node base power together, where measured
    # what jobs measurably spent in the budget period so far: (the period's start, grams
    # CO2e, account -> grams CO2e); None: not measured
    period_spent_g: tuple[float, float, Mapping[str, float]] | None = None
    taken_s: float = 0.0
    warnings: tuple[str, ...] = ()     # values rejected at the reader (NaN, absurd, bad shape)
    # the carbon intensity, its forecast and the period's spend were looked for (None above
    # then means none was found, not that none was asked for)
    carbon_read: bool = False


# the subject of a ``Readings.warnings`` line about the carbon data (then the zone)
CARBON_WARNING = "carbon_intensity,zone="


# Slurm priority points per queue tier (``Placement.nice``, ``Action.nice``): sbatch --nice and
# scontrol update Nice= take NICE_STEP x tier
NICE_STEP = 100


@record
class Placement:
    """A policy's answer for one job. Empty ``nodes`` lets Slurm choose."""

    policy: str
    gpus: int
    nodes: tuple[str, ...] = ()
    gpu_indexes: tuple[int, ...] = ()     # on a single node; pinned by typed GRES when set
    share_mode: ShareMode = "exclusive"
    shards: int = 0                       # shards per GPU when share_mode is shard or mps
    begin_s: float | None = None
    power_cap_w: float | None = None
    batch_size: int | None = None
    gpu_memory_cap_mib: int | None = None
    num_nodes: int | None = None          # nodes (``-N``) when the policy changes them (elastic)
    nice: int | None = None               # queue tier: lower goes first (sbatch --nice)
    why: tuple[str, ...] = ()
    predicted: Mapping[str, float] = field(default_factory=lambda: EMPTY_MAP)   # numbers the decision relied on (for the log)
    mig_profile: str = ""                 # share_mode "mig": the GPU instance's profile

    @property
    def changes_anything(self) -> bool:
        return bool(self.nodes or self.gpu_indexes or self.share_mode != "exclusive"
                    or self.begin_s is not None or self.power_cap_w is not None
                    or self.batch_size is not None or self.num_nodes is not None)



@record
class Action:
    """A change the reconciler applies to a job that already exists."""

    kind: ActionKind
    job_id: str
    policy: str
    # resize / move_exclusive: new GPU count. ``unpin``: a pending job pinned to typed GPUs of
    # one node asks for whole GPUs that Slurm may take anywhere instead (nothing restarts)
    gpus: int | None = None
    begin_s: float | None = None      # defer: the new start time (earlier or later)
    power_cap_w: float | None = None  # power_cap: the new per-GPU cap (None: remove the cap)
    nodes: tuple[str, ...] = ()
    why: str = ""
    predicted: Mapping[str, float] = field(default_factory=lambda: EMPTY_MAP)
    num_nodes: int | None = None      # resize: the new node count (None: unchanged)
    # resize: the job's restart count when decided; a job resized to 3 GPUs, then to 4, may
    # be resized to 3 again: another run, another action (None: not said)
    run: int | None = None
    # resize, batch: the new global batch size (None: unchanged) and the factor the job
    # multiplies its learning rate by for it (its declared linear or sqrt rule). ``batch``
    # changes only the batch, within the job's GPUs and without a restart: it is advice the
    # job reads through the progress API (``progress.report_progress``)
    batch_size: int | None = None
    lr_scale: float | None = None
    # resize: the queue tier (``Placement.nice``) the requeued job waits in (None: unchanged)
    nice: int | None = None
    # power_cap: the job's new time limit (None: unchanged), raised with a cap that slows it so
    # that the slower run is not killed at its old limit
    time_limit_s: float | None = None

    @property
    def key(self) -> str:
        """Identity for idempotence: the same action twice is one action."""
        key = f"{self.kind}:{self.job_id}:{self.gpus}:{self.begin_s}:{self.power_cap_w}"
        if self.num_nodes is not None:
            key += f":{self.num_nodes}"
        if self.batch_size is not None:
            key += f":b{self.batch_size}"
        if self.time_limit_s is not None:
            key += f":t{self.time_limit_s:.0f}"
        if self.nice is not None:
            key += f":n{self.nice}"
        return key if self.run is None else f"{key}:r{self.run}"
