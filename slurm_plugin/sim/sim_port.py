"""The simulated Slurm that reconcile actions run on: ``actuate.Port`` over the engine's state.

The simulator applies a policy's actions as the live reconciler does, through
``actuate.interpret``: the same steps in the same order (``actuate.STEPS``, a resize's advice
and tier), each run only where the job, as ``observe`` shows it, still needs it. This port is
what each step does to the simulated cluster instead of a Slurm command: ``requeue_hold``
stops a running job, keeping the work it has done (a checkpoint), and holds it; ``set_gpus``
and ``whole_gpus`` place it anew; ``release`` puts it back in the queue with its priority.

One port carries out one action (``SimPort(sim, action)``). A Slurm command carries only part
of an action, with stand-ins where the action has no value (``actuate.run_step``: a count of
1, the wall clock's now, a batch of 0); the simulator has always applied the action's own
values, and the fields no command carries (the policy that tags the job, the nodes a resize
names, a move's tier), so the steps read those from the action.
"""

from __future__ import annotations

from ..actuate import JobView
from ..model import Action, Placement
from ..policy.base import plain_placement
from ..record import replace
from .events import BEGIN, EPS
from .state import CANCELLED, PENDING, RUNNING, SimJob
from .time_limits import whole_minutes_s

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .engine import Simulator

# The few views a simulated job shows (running, held, node count): frozen, so made once each
_VIEWS: dict[tuple[bool, bool, int], JobView] = {}


class SimPort:
    """The steps of one action on a ``Simulator``'s jobs (``actuate.Port``)."""

    __slots__ = ("sim", "action", "held", "stopped")

    def __init__(self, sim: Simulator, action: Action) -> None:
        self.sim, self.action = sim, action
        self.held = False       # held by this action's requeue_hold, not yet released
        self.stopped = False    # requeue_hold stopped a run that had started (a restart)

    def observe(self, job_id: str) -> JobView | None:
        j = self.sim.by_id.get(job_id)
        if j is None:
            return None         # ended or cancelled: the engine keeps no such job
        key = (j.state == RUNNING, self.held, j.num_nodes)
        view = _VIEWS.get(key)
        if view is None:
            # No GRES string: the simulator places a resized job anew whatever its count (from
            # the action: its count, nodes and policy), so ``_decide`` always sets it, as it
            # does live for a request it cannot read.
            view = _VIEWS[key] = JobView(state=RUNNING if key[0] else PENDING, held=key[1],
                                         tres_per_node="", num_nodes=key[2])
        return view

    def requeue_hold(self, job_id: str) -> None:
        """A running job stops where it is, its work done kept (a checkpoint), and waits
        held, out of the queue; a run that had started counts a restart."""
        j = self.sim.by_id[job_id]
        self.stopped = j.first_start_s is not None
        self.sim._drop(j)
        j.restarts += 1 if self.stopped else 0
        j.state = PENDING
        self.held = True

    def set_gpus(self, job_id: str, gpus: int, num_nodes: int | None = None) -> None:
        """The job placed anew at the action's count (``_place``), keeping its tier (the
        resize's ``set_tier`` sets another) and its batch within the new count's bounds. A
        job pending and not held (no ``requeue_hold`` before) leaves the queue for it and goes
        back with its priority."""
        sim = self.sim
        j = sim.by_id[job_id]
        if not self.held:
            sim._drop(j)
            j.restarts += 1 if j.first_start_s is not None else 0
        self._place(j)
        if j.batch is not None:
            sim._rebatch(j, None)
        if not self.held:
            sim._enqueue(j)

    def whole_gpus(self, job_id: str) -> None:
        """A held job (``move_exclusive``) placed anew on GPUs of its own, in the move's tier
        where it names one; a pending one (``unpin``) pinned to typed GPUs of one node asks for
        whole GPUs anywhere instead, keeping its tier (nothing restarts)."""
        sim, a = self.sim, self.action
        j = sim.by_id[job_id]
        if self.held:
            self._place(j)
            if a.nice is not None:      # live, a move has no set_tier step; here it always had
                j.nice = a.nice
            return
        if j.pin_indexes:
            nice = j.nice
            sim._drop(j)
            sim._apply_placement(j, plain_placement(a.policy, j.req, a.why))
            j.nice = nice
            sim._enqueue(j)

    def _place(self, j: SimJob) -> None:
        """The action's placement of a job out of the queue: its count (``gpus``, else the
        job's), nodes and policy, the job's power cap. Slurm would refuse an invalid one (a
        node or a node count it cannot give): then the job keeps its size. A resize that names
        no node count keeps the job's; a move of a multi-node job that names no nodes goes
        anywhere."""
        sim, a = self.sim, self.action
        resize = a.kind == "resize"
        nodes = j.num_nodes
        pl = Placement(policy=a.policy, gpus=min(a.gpus or j.per_node, sim.spec.gpus_per_node),
                       nodes=a.nodes, power_cap_w=j.cap_ask_w, why=(a.why,), nice=a.nice)
        new_nodes = a.num_nodes if resize and a.num_nodes else None
        if not sim._placement_valid(j, pl) or (
                new_nodes is not None and not 1 <= new_nodes <= sim.max_job_nodes):
            pl, new_nodes = plain_placement(a.policy, j.req, "invalid action: keeps its size"), None
        elif new_nodes is None and resize:
            new_nodes = nodes       # "num_nodes unchanged": the job's count now, not asked
        if not a.nodes and nodes > 1 and not resize:
            pl = plain_placement(a.policy, j.req, a.why)
        nice = j.nice               # kept: set_tier (a resize), whole_gpus (a move) set another
        sim._apply_placement(j, pl, new_nodes)
        j.nice = nice

    def set_tier(self, job_id: str, tier: int) -> None:
        """The queue tier (``--nice``) of a resized job: a held one goes back in it at its
        release; a pending one moves to its place in the queue."""
        sim = self.sim
        j = sim.by_id[job_id]
        if self.held:
            j.nice = tier
            return
        sim._unqueue(j)
        j.nice = tier
        sim._enqueue(j)

    def release(self, job_id: str) -> None:
        """The held job goes back in the queue with its priority. A resized run that had
        started pays ``restart_cost_s`` of wall time at its new size: checkpoint, requeue and
        start-up (the simulator charges a move none)."""
        sim = self.sim
        j = sim.by_id[job_id]
        if self.stopped and self.action.kind == "resize":
            j.work_left += sim.spec.restart_cost_s * j.scale
        self.held = False
        sim._enqueue(j)

    def start_now(self, job_id: str) -> None:
        """Nothing to do: live, a requeued job would wait for Slurm's next start time for it;
        the engine's scheduler passes see a released job at once."""

    def defer(self, job_id: str, begin_s: float) -> None:
        """A pending job starts no earlier than the action's time (``scontrol update
        StartTime``: earlier or later than before, never before now). An action without a time
        leaves the job as it is: live it means now on the wall clock, which a simulation has
        not."""
        at_s = self.action.begin_s
        if at_s is None:
            return
        sim = self.sim
        j = sim.by_id[job_id]
        j.begin_s = max(sim.now, at_s)
        sim.job_views[j.id] = replace(
            sim.job_views[j.id], begin_s=j.begin_s if j.begin_s > j.t.submit_s else None)
        sim._push(j.begin_s, BEGIN, j, j.begin_s)
        if j.ready and j.begin_s > sim.now + EPS:
            sim._unready(j)
        sim._place_pending(j)

    def cancel(self, job_id: str) -> None:
        sim = self.sim
        j = sim.by_id[job_id]
        sim._drop(j)
        j.state = CANCELLED
        del sim.by_id[j.id]
        sim.job_views.pop(j.id, None)

    def set_power_cap(self, job_id: str, power_cap_w: float | None) -> None:
        self.sim._set_cap(self.sim.by_id[job_id], power_cap_w)

    def set_time_limit(self, job_id: str, time_limit_s: float) -> None:
        """A raised time limit, in whole minutes (a lower one leaves the job's as it is)."""
        j = self.sim.by_id[job_id]
        if time_limit_s > j.limit_s:
            self.sim._raise_limit(j, whole_minutes_s(time_limit_s))

    def advise(self, job_id: str, batch_size: int, lr_scale: float | None,
               from_batch_size: int, why: str) -> None:
        """The action's batch size (none: the job is left as it is; live, a batch of 0 would
        be advised): a running job (``batch``) follows it from its next step, without a
        restart, where a queued one is left as it is; a resized job (``resize``) starts its
        next run with it."""
        sim, a = self.sim, self.action
        j = sim.by_id[job_id]
        if a.batch_size is None:
            return
        if a.kind == "batch":
            if j.state == RUNNING:
                sim._settle(j)
                sim._rebatch(j, a.batch_size)
                sim._retune(list(j.gpus))
                if j.id in sim.job_views:
                    sim.job_views[j.id] = replace(sim.job_views[j.id], **sim._batch_fields(j))
            return
        sim._rebatch(j, a.batch_size)
        if not self.held:       # a pending job's view shows it now; a held one's at release
            sim.job_views[j.id] = replace(sim.job_views[j.id], **sim._batch_fields(j))
