"""The simulator's MIG bookkeeping (engine-private): which placements are MIG instances, whether
one fits a GPU, a job's rate in its instance, and what a GPU in MIG mode shows a policy.

A MIG job (``Placement.share_mode == "mig"``: one GPU, pinned to its node and GPU index, a
profile of that node's model) carries its profile (``SimJob.mig``) and asks Slurm for one GPU
of that type (``--gres=gpu:<profile>:1``), so it is no shard job (``SimJob.share`` false). A
GPU is in MIG mode while it runs MIG jobs: the engine marks it ``exclusive`` (no shards and no
whole-GPU job fit there, as on a GPU a whole-GPU job holds), and it takes another MIG job
where the instances together are a valid layout (``physics.mig.layout_valid``). When its last
job ends the engine clears the mark: the GPU is back to normal. A job in an instance
progresses at its MIG rate (``physics.mig.mig_rate``) and suffers no co-location slowdown;
the engine's GPU power, idle power plus each job's dynamic power times its rate, capped, is
then the MIG physics' (``physics.mig.mig_gpu_power_w``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from ..errors import ConfigError
from ..model import Placement
from ..physics.mig import MigProfile, layout_valid, mig_profile, mig_rate

if TYPE_CHECKING:
    from .state import GpuState, NodeState, SimJob


def _profile(pl: Placement, nodes: Mapping[str, "NodeState"]) -> MigProfile | None:
    """The profile of a MIG placement pinned to one node; None when it names none of that
    node's model, or the model has no MIG."""
    try:
        return mig_profile(nodes[pl.nodes[0]].kind.model, pl.mig_profile)
    except (ConfigError, IndexError, KeyError):
        return None


def mig_placement_valid(pl: Placement, nodes: Mapping[str, "NodeState"]) -> bool:
    """A MIG placement: one GPU of one node, by index, and a profile of that node's model."""
    return (pl.gpus == 1 and len(pl.nodes) == 1 and len(pl.gpu_indexes) == 1
            and (pl.num_nodes or 1) == 1 and _profile(pl, nodes) is not None)


def set_mig(j: "SimJob", pl: Placement, nodes: Mapping[str, "NodeState"]) -> None:
    """A job takes its placement's MIG instance (or none): a MIG job holds no shards."""
    j.mig = _profile(pl, nodes) if pl.share_mode == "mig" else None
    if j.mig is not None:
        j.share, j.shards = False, 0


def mig_fits(g: "GpuState", j: "SimJob") -> bool:
    """Whether MIG job ``j`` can start on ``g``: a free GPU (it goes into MIG mode), or one in
    MIG mode whose instances leave room for ``j``'s."""
    if not g.jobs:
        return True
    return g.jobs[0].mig is not None and layout_valid([x.mig for x in g.jobs] + [j.mig])


def mig_rate_of(j: "SimJob") -> float:
    """The progress rate of a MIG job in its instance (its solo utilisation at its GPUs)."""
    return mig_rate(j.mig, j.util_pct)


def mig_holders(g: "GpuState") -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """What a GPU running MIG jobs, or one not held whole with MIG jobs pinned to it, shows a
    policy: its holders (running, then pending pinned) and each one's profile ("" for a job
    holding shards or a whole GPU); None for any other GPU."""
    running = bool(g.jobs) and g.jobs[0].mig is not None
    if not running and (g.exclusive or not any(p.mig is not None for p in g.pinned)):
        return None
    holders = list(g.jobs) + list(g.pinned)
    return (tuple(x.id for x in holders),
            tuple(x.mig.name if x.mig is not None else "" for x in holders))
