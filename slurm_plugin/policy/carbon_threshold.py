"""``carbon-threshold``: the "Let's Wait Awhile" baseline (Wiesner et al., Middleware 2021).

A deferrable job (``JobRequest.slack_s``, from ``--wb-slack``) starts at the first moment its
zone's intensity is below the 30th percentile of the intensity over its slack window
``[submit, submit + slack]``, as the carbon forecast sees that window; if no moment is below it,
at the end of the slack. Jobs that are not deferrable, and every job while the carbon data is
missing, go to Slurm unchanged (as ``slurm-default``). Decided once, at submit (``--begin``).
Idle nodes power down as under ``slurm-powersave``.
"""

from __future__ import annotations

import math

from ..model import Action, JobRequest, Placement
from .base import Context, carbon_missing, plain_placement
from .powersave import POWER_SAVE

PERCENTILE = 30.0


def threshold_gco2_per_kwh(values: list[float], percentile: float = PERCENTILE) -> float:
    """Nearest-rank percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(percentile / 100 * len(ordered)) - 1))
    return ordered[k]


def first_below_s(now_s: float, now_gco2_per_kwh: float,
                  forecast: tuple[tuple[float, float], ...] | list, slack_s: float
                  ) -> float | None:
    """The first moment of the slack window whose intensity is below the window's 30th
    percentile; None when none is (a flat window, or clean hours tied at the percentile)."""
    end_s = now_s + slack_s
    window = [(now_s, now_gco2_per_kwh)] + [(t, v) for t, v in forecast if now_s < t <= end_s]
    limit = threshold_gco2_per_kwh([v for _, v in window])
    return next((t for t, v in window if v < limit), None)


def threshold_start_s(now_s: float, now_gco2_per_kwh: float,
                      forecast: tuple[tuple[float, float], ...] | list, slack_s: float) -> float:
    """When a job submitted at ``now_s`` with ``slack_s`` starts under the threshold rule: the
    first moment below the percentile, else the end of its slack."""
    first = first_below_s(now_s, now_gco2_per_kwh, forecast, slack_s)
    return now_s + slack_s if first is None else first


class CarbonThreshold:
    name = "carbon-threshold"
    # The same slurm.conf power saving as greenflow and slurm-powersave: the comparison is of
    # when jobs run, not of whether idle nodes burn.
    slurm_settings = POWER_SAVE
    reads_carbon = True        # the live reconciler reads carbon for it (Readings)

    def advise(self, request: JobRequest, ctx: Context) -> Placement:
        slack_s = request.slack_s
        if not slack_s or "defer" in request.opt_out:
            return plain_placement(self.name, request, "not deferrable: Slurm places the job now")
        ci = ctx.readings.carbon_g_per_kwh
        forecast = ctx.readings.carbon_forecast
        if ci is None or not forecast:
            return plain_placement(self.name, request, carbon_missing(ctx.readings))
        first = first_below_s(ctx.now_s, ci, forecast, slack_s)
        begin_s = ctx.now_s + slack_s if first is None else first
        if begin_s <= ctx.now_s:
            return plain_placement(self.name, request, "intensity below the window's 30th "
                                   "percentile: starts now")
        where = ("to the end of its slack: no hour of its slack window is below the window's "
                 "30th percentile" if first is None else
                 "to the first hour below the 30th percentile of its slack window")
        return Placement(policy=self.name, gpus=request.gpus, begin_s=begin_s,
                         why=(f"deferred {begin_s - ctx.now_s:.0f} s {where}",))

    def reconcile(self, ctx: Context) -> tuple[Action, ...]:
        return ()
