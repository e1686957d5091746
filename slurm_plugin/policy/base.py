"""The policy interface both bodies (live Slurm and the simulator) call."""

from __future__ import annotations

from ..model import CARBON_WARNING, EMPTY_MAP, Action, Cluster, JobRequest, Placement, Readings
from ..record import field, record

# What every policy's settings carry beside its own section: the ``[policy]`` keys
# (``config.policy_settings``) and the site's sharing facts (the wrapper's settings). A policy
# whose own keys are checked strictly passes over these.
SITE_KEYS = frozenset({"name", "stages", "allow_share", "fail_open", "share_gres",
                       "shards_per_gpu", "typed_gpus",
                       # the simulator's: the variability profile it applies, for a policy
                       # that plans with one (pal)
                       "profile_factors"})

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: importing typing costs wattbatch ~2 ms
if TYPE_CHECKING:
    from typing import Any, Mapping, Protocol
else:
    Protocol = object   # the interface is for type checkers: policies do not inherit it


@record
class Context:
    """Everything a policy may look at, at one instant."""

    cluster: Cluster
    readings: Readings = field(default_factory=Readings)
    now_s: float = 0.0
    settings: Mapping[str, Any] = field(default_factory=lambda: EMPTY_MAP)      # the policy's own section of the site config
    history: Mapping[str, float] = field(default_factory=lambda: EMPTY_MAP)     # observed figures keyed by policy (e.g. pair slowdown)
    # Changes with every change to ``history`` when the caller counts them (the simulator);
    # None: unknown. A policy may key caches on it; results must not depend on it.
    history_version: int | None = None
    # The history keys each recent version changed (version -> keys), when the caller keeps
    # them; a version missing from it, or None: unknown, so a cache keyed on the history
    # recomputes. Results must not depend on it.
    history_log: Mapping[int, tuple[str, ...]] | None = None
    # In a stack: the kinds of stage this policy runs (``stages.KINDS``), so that it may leave
    # out the work whose fields the stack takes from another stage; () alone (it runs all).
    stage_kinds: tuple[str, ...] = ()


class Policy(Protocol):
    name: str

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        """Where, how and when a new job should run."""
        ...

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        """Changes to jobs already submitted. ``observe`` actions feed the history."""
        ...

    # Optional: which of ``"cluster"`` and ``"readings"`` ``advise`` will look at for this
    # request, so the caller can fetch them ahead (in parallel); a policy without it, or an
    # answer that misses one, still gets it on first use.
    # def prefetch(self, request: JobRequest, settings: Mapping[str, Any]) -> tuple[str, ...]
    # Optional flags: ``reads_carbon`` (the live reconciler reads carbon intensity, forecast
    # and the budget period's spend for it; else it leaves them out of ``Readings``),
    # ``reads_limit_use`` (``Cluster.limit_use``), ``reads_budget``.


def plain_placement(policy: str, request: JobRequest, why: str) -> Placement:
    """The placement that changes nothing: Slurm decides as if wattbatch were not there."""
    return Placement(policy=policy, gpus=request.gpus, why=(why,))


def carbon_missing(readings: Readings) -> str:
    """Why a carbon-aware policy falls back to slurm-default: which part of the carbon data is
    missing (live, the forecast is the points stored ahead, else the built-in forecast over
    the stored history: ``formats.carbon_forecast.StoredThenForecast``); where the reader
    left the data out (stale: ``carbon.max_age_s``; a bad value), its warning says why."""
    left_out = [w for w in readings.warnings if CARBON_WARNING in w]
    if readings.carbon_g_per_kwh is None and left_out:     # the reader left it out: say why
        what = "; ".join(left_out)
    elif readings.carbon_g_per_kwh is None:
        what = ("no carbon intensity at or before now for the site's carbon.zone (import the "
                "zone's series: wattctl carbon import)")
    else:
        what = ("no carbon forecast: nothing stored ahead for the site's carbon.zone and no "
                "history to forecast from (`wattctl carbon show` gives the newest point)")
    return f"warning: carbon data missing ({what}): placed as slurm-default"
