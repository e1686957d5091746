"""The live body: Slurm snapshot, InfluxDB readings and Slurm actions, built from site config.

Thin on purpose: each piece is an adapter call; decisions stay in ``policy/``.
"""

from __future__ import annotations

import time

from .actuate import JobView
from . import progress_key
from .config import SiteConfig
from .errors import InputError
from .record import replace
from .model import Cluster, Readings
from .slurm import actions
from .slurm.snapshot import snapshot as slurm_snapshot
from .telemetry.carbon import planning_provider
from .telemetry.influx import InfluxClient
from .telemetry.readers import read_readings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping


def snapshot(cfg: SiteConfig) -> Cluster:
    return slurm_snapshot(cfg)


def with_limit_use(cfg: SiteConfig, cluster: Cluster) -> Cluster:
    """``cluster`` with ``limit_use`` from Slurm's accounting; unknown (with a warning) when
    sacct cannot be read."""
    from .errors import WattError
    from .slurm.limit_use import limit_use
    warnings: list[str] = []
    try:
        use = limit_use(cfg, cluster.taken_s, warnings)
    except WattError as exc:
        use = None
        warnings.append(f"time limits' use not read (priced at the whole limits): {exc}")
    return replace(cluster, limit_use=use, warnings=cluster.warnings + tuple(warnings))


def readings(cfg: SiteConfig, cluster: Cluster | None = None, carbon: bool = True) -> Readings:
    """Telemetry for ``cluster``'s jobs. With ``progress.site_key_file`` set, progress counts
    only when signed by the job's owner (``progress_key``); when that file cannot be read
    (wattbatch runs as a user), no progress counts. ``carbon``: read the carbon intensity, its
    forecast and the budget period's spend (a policy that plans with none leaves them out, and
    their warnings, such as stale data, with them)."""
    client = InfluxClient.from_config(cfg)
    job_ids = tuple(cluster.jobs) if cluster is not None else ()
    job_gpus = None if cluster is None else {
        j.job_id: tuple((u.node, u.index) for u in j.uses) for j in cluster.jobs.values()}
    job_start_s = None if cluster is None else {
        j.job_id: j.start_s for j in cluster.jobs.values() if j.start_s is not None}
    verify, note = None, ()
    if cfg["progress.site_key_file"]:
        try:
            verify = progress_key.Verifier(progress_key.read_key_file(
                cfg["progress.site_key_file"], "progress.site_key_file")).ok
        except InputError as exc:
            verify, note = (lambda *_: False), (f"{exc}; no job progress used",)
    now_s = time.time()
    reads = read_readings(client, now_s,
                          carbon=planning_provider(cfg, client) if carbon else None,
                          cluster=cfg["cluster.name"], job_ids=job_ids, verify=verify,
                          carbon_max_age_s=cfg["carbon.max_age_s"],
                          job_gpus=job_gpus, job_start_s=job_start_s)
    spent, said = period_spent(cfg, client, now_s) if carbon else (None, ())
    return replace(reads, period_spent_g=spent, warnings=(*note, *reads.warnings, *said),
                   carbon_read=carbon)


def period_spent(cfg: SiteConfig, client: InfluxClient, now_s: float
                 ) -> tuple[tuple[float, float, Mapping[str, float]] | None, tuple[str, ...]]:
    """(``Readings.period_spent_g``: what jobs spent in the greenflow budget period holding
    ``now_s``, read as ``wattctl carbon budget`` reads it; warnings). Read only where a
    greenflow budget is set (``budget_kg_*`` or ``accounts``); not read, with a warning, when
    the settings or InfluxDB cannot be read."""
    from .errors import WattError
    from .policy.greenflow.settings import parse_settings
    from .report.carbon_budget import period_spent_g
    try:
        settings = parse_settings(cfg.section("greenflow"))
    except WattError as exc:
        return None, (f"greenflow: the period's job_energy spend not read: {exc}",)
    if settings.budget_g is None and not settings.accounts_g:
        return None, ()
    start_s, _ = settings.period_of(now_s)
    try:
        return period_spent_g(client, cfg["cluster.name"], start_s, now_s), ()
    except WattError as exc:
        return None, (f"greenflow: job_energy spend of the period from start_s={start_s:.0f} "
                      f"not read (pacing counts it from 0 where it has no history of the "
                      f"period): {exc}",)


class SlurmActuator:
    """The reconciler's ``Actuator`` over ``scontrol``/``scancel``."""

    def __init__(self, cfg: SiteConfig) -> None:
        self.cfg = cfg

    def observe(self, job_id: str) -> JobView | None:
        now = actions.job_now(job_id, self.cfg)
        return None if now is None else JobView(*now)

    def accounting(self, job_id: str) -> tuple[str, str, float | None] | None:
        return actions.job_ended(job_id, self.cfg)

    def requeue_hold(self, job_id: str) -> None:
        actions.requeue_hold(job_id, self.cfg)

    def resubmit(self, job_id: str, gpus: int | None, num_nodes: int | None) -> str:
        from .slurm.resubmit import lost_job, resubmit
        return resubmit(lost_job(job_id, self.cfg), self.cfg, gpus, num_nodes)

    def resubmitted(self, job_id: str) -> str | None:
        from .slurm.resubmit import find_resubmission
        return find_resubmission(job_id, self.cfg)

    def set_gpus(self, job_id: str, gpus: int, num_nodes: int | None = None) -> None:
        actions.set_gpu_count(job_id, gpus, self.cfg, num_nodes)

    def whole_gpus(self, job_id: str) -> None:
        actions.take_whole_gpus(job_id, self.cfg)

    def set_tier(self, job_id: str, tier: int) -> None:
        actions.set_tier(job_id, tier, self.cfg)

    def release(self, job_id: str) -> None:
        actions.release(job_id, self.cfg)

    def start_now(self, job_id: str) -> None:
        actions.start_now(job_id, self.cfg)

    def defer(self, job_id: str, begin_s: float) -> None:
        actions.defer(job_id, begin_s, self.cfg)

    def cancel(self, job_id: str) -> None:
        actions.cancel(job_id, self.cfg)

    def set_power_cap(self, job_id: str, power_cap_w: float | None) -> None:
        actions.set_power_cap(job_id, power_cap_w, self.cfg)

    def set_time_limit(self, job_id: str, time_limit_s: float) -> None:
        actions.set_time_limit(job_id, time_limit_s, self.cfg)

    def advise(self, job_id: str, batch_size: int, lr_scale: float | None,
               from_batch_size: int, why: str) -> None:
        """The batch-size advice the job reads through the progress API (``job_advice``),
        signed with the job's key where the site has progress keys (a job there takes only
        signed advice; an unreadable site key fails the action, naming the file)."""
        from .progress import advice_point

        key = None
        if self.cfg["progress.site_key_file"]:
            site = progress_key.read_key_file(self.cfg["progress.site_key_file"],
                                              "progress.site_key_file")
            key = progress_key.job_key(site, job_id).hex().encode()
        InfluxClient.from_config(self.cfg).write([advice_point(
            job_id, batch_size, lr_scale, now_s=time.time(), from_batch_size=from_batch_size,
            why=why, key=key)])
