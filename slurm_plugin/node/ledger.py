"""Per-job GPU energy and carbon, kept by the node collector on every pass.

Each pass, for every GPU with jobs on it, the energy the GPU's counter gained since the last
pass is split between its jobs (``split.split_interval``) and added to each job's ledger
file, ``<node.state_dir>/ledger/<job_id>.json``, one entry per node:
``energy_j, idle_j, gpu_s, shared_gpu_s, co2_g, co2_energy_j, method_j{method: J}, gpus``.
Carbon is the energy of each pass times the grid intensity in force then, so a job's CO2 is
integrated over the hours it actually ran. The epilog closes a job's file (``<job>.done``) and
reports it; a closed file is never written again. A job that runs again (requeued, resized)
starts a new file: its prolog moves the closed one aside (``<job>.json.<time>.done``), so each
run is reported once, with its own energy. A GPU counter that goes backwards (a reset,
a wrap) or gains more than any GPU draws (``MAX_W``), or a clock that jumps back starts a new
interval: nothing is charged for it.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Callable, Iterable

from ..model import GpuReading
from ..physics import idle_power_w, job_class
from ..errors import ConfigError, InputError
from ..formats.carbon_series import is_stale
from .split import SoloRate, split_interval

LEDGER_DIR = "ledger"
GPUS_FILE = "_gpus.json"
LOCK_FILE = "_lock"
DONE_SUFFIX = ".done"
MAX_INTERVAL_S = 600.0      # a longer gap (collector stopped) is not charged to anyone
MAX_W = 5000.0              # more (a switch between a counter and energy integrated from power,
                            # a corrupt reading) is no GPU's draw: not charged to anyone
KEEP_DONE_S = 7 * 86400.0


def ledger_dir(state_dir: str | os.PathLike) -> Path:
    return Path(state_dir) / LEDGER_DIR


def job_file(state_dir: str | os.PathLike, job_id: str) -> Path:
    if not job_id or not job_id.replace("_", "").isalnum():
        raise InputError(f"ledger: job id {job_id!r}: expected a Slurm job id")
    return ledger_dir(state_dir) / f"{job_id}.json"


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError, UnicodeDecodeError):
        return {}


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


def _class_rate(app: str, model: str) -> float | None:
    """Watts per utilisation point of a workload class (solo, one GPU) on ``model``; None for
    an unknown class or a model that is not catalogued."""
    if not app:
        return None
    try:
        c = job_class(app)
        util = c.util_at(1)
        return c.dynamic_power_at(1, model) / util if util > 0 else None
    except (InputError, ConfigError):
        return None


class Ledger:
    """The collector's running split of GPU energy between jobs.

    A GPU's model is the reading's (``GpuReading.model``: NVML names the board) or else
    ``gpu_model`` (the site's ``node.gpu_model``, whose idle power is ``idle_w``; None: the
    model's own). A model that is not catalogued is said once through ``warn``: that GPU's
    energy is still charged, split between sharing jobs by their utilisation alone (no idle
    share, no class rates)."""

    def __init__(self, state_dir: str | os.PathLike, idle_w: float | None,
                 gpu_model: str = "V100",
                 intensity: Callable[[float], float | None] = lambda t: None,
                 warn: Callable[[str], None] = lambda m: None) -> None:
        self.state_dir = Path(state_dir)
        self.gpu_model, self.intensity, self.warn = gpu_model, intensity, warn
        self.solo = SoloRate()
        self.last: dict[str, list[float]] = {}
        self._alone: dict[str, str] = {}     # GPU -> the job alone on it at the last pass
        self._idle: dict[str, float] = {} if idle_w is None else {gpu_model: idle_w}
        self.idle_w = self.idle_of(gpu_model, " (node.gpu_model)") if idle_w is None else idle_w

    def idle_of(self, model: str, where: str = "") -> float:
        """Idle power of a GPU of ``model`` (0 W, said once, for one not catalogued)."""
        idle = self._idle.get(model)
        if idle is None:
            try:
                idle = idle_power_w(model)
            except ConfigError as exc:
                idle = 0.0
                self.warn(f"GPU model {model!r}{where}: {exc.fix}; its power, energy and "
                          "utilisation are recorded as measured, and its energy is split "
                          "between the jobs sharing it by their utilisation alone (no idle "
                          "share, no class rates)")
            self._idle[model] = idle
        return idle

    def update(self, readings: Iterable[GpuReading]) -> dict[str, float]:
        """Charge every GPU's energy since the last pass to its jobs; returns job -> J added.
        Passes are serialised by a lock and start from the counters the last pass of any
        process saved, so a one-off ``wattctl collect --once`` beside the running collector
        charges nothing twice."""
        ledger_dir(self.state_dir).mkdir(parents=True, exist_ok=True)
        with open(ledger_dir(self.state_dir) / LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            gpus = _read(ledger_dir(self.state_dir) / GPUS_FILE)
            self.last = {k: v for k, v in gpus.items() if isinstance(v, list) and len(v) == 2}
            return self._update(readings)

    def _update(self, readings: Iterable[GpuReading]) -> dict[str, float]:
        added: dict[str, float] = {}
        entries: dict[str, dict] = {}
        for r in readings:
            key = f"{r.node}:{r.index}"
            t0, e0 = self.last.get(key, (r.taken_s, r.energy_j))
            self.last[key] = [r.taken_s, r.energy_j]
            dt, de = r.taken_s - t0, r.energy_j - e0
            model = r.model or self.gpu_model
            idle_w = self.idle_of(model, f" ({r.node} GPU {r.index})")
            was_alone = self._alone.pop(key, None)
            if len(r.residents) == 1:
                self._alone[key] = r.residents[0].job_id
            if not r.residents or dt <= 0 or dt > MAX_INTERVAL_S or not 0 <= de <= MAX_W * dt:
                continue
            res = r.residents[0]
            if was_alone == res.job_id and len(r.residents) == 1 and res.util_pct is not None:
                self.solo.observe(res.job_id, de / dt, idle_w, res.util_pct)
            rates, methods = {}, {}
            for res in r.residents:
                solo = self.solo.get(res.job_id)
                cls = _class_rate(res.app, model)
                rates[res.job_id] = solo or cls or 1.0
                methods[res.job_id] = "util-solo" if solo else "util-class" if cls else "util"
            shares = split_interval(
                de, dt, idle_w, {x.job_id: x.shares for x in r.residents},
                {x.job_id: x.util_pct for x in r.residents if x.util_pct is not None},
                rates, methods)
            intensity = self.intensity(r.taken_s)
            shared = len(r.residents) > 1
            for job_id, share in shares.items():
                entry = entries.setdefault(job_id, self._load(job_id))
                if entry is None:
                    continue
                node = entry.setdefault("nodes", {}).setdefault(r.node, {})
                node["energy_j"] = node.get("energy_j", 0.0) + share.energy_j
                node["idle_j"] = node.get("idle_j", 0.0) + share.idle_j
                node["gpu_s"] = node.get("gpu_s", 0.0) + dt
                node["shared_gpu_s"] = node.get("shared_gpu_s", 0.0) + (dt if shared else 0.0)
                methods_j = node.setdefault("method_j", {})
                methods_j[share.method] = methods_j.get(share.method, 0.0) + share.energy_j
                if intensity is not None:
                    node["co2_g"] = node.get("co2_g", 0.0) + share.energy_j / 3.6e6 * intensity
                    node["co2_energy_j"] = node.get("co2_energy_j", 0.0) + share.energy_j
                node["gpus"] = sorted(set(node.get("gpus", [])) | {r.index})
                app = next((x.app for x in r.residents if x.job_id == job_id and x.app), "")
                if app:
                    entry["app"] = app
                node.setdefault("first_s", t0)
                node["last_s"] = r.taken_s
                added[job_id] = added.get(job_id, 0.0) + share.energy_j
        for job_id, entry in entries.items():
            path = job_file(self.state_dir, job_id)
            if entry is not None and not path.with_name(path.name + DONE_SUFFIX).exists():
                _write(path, entry)
        _write(ledger_dir(self.state_dir) / GPUS_FILE, self.last)
        return added

    def _load(self, job_id: str) -> dict | None:
        path = job_file(self.state_dir, job_id)
        if path.with_name(path.name + DONE_SUFFIX).exists():
            return None                     # closed by the epilog: never written again
        return _read(path) or {"job_id": job_id}

    def prune(self, now_s: float | None = None) -> int:
        """Drop closed files older than a week; returns how many."""
        now_s = time.time() if now_s is None else now_s
        gone = 0
        for path in ledger_dir(self.state_dir).glob(f"*{DONE_SUFFIX}"):
            try:
                if now_s - path.stat().st_mtime > KEEP_DONE_S:
                    path.unlink()
                    gone += 1
            except OSError:
                continue
        return gone


class CachedIntensity:
    """Grid intensity for the ledger: asked of the carbon provider at most every ``ttl_s``
    (the series is hourly); a failing provider gives None (no CO2 for that pass), once
    reported. So does a stale one: where the zone has no point within ``max_age_s`` (the
    site's ``carbon.max_age_s``; 0: no limit) at or before the pass, the value in force then is
    not the grid's now, and a job is charged no CO2 for that energy rather than a wrong one
    (the report counts its records without ``co2_g``)."""

    def __init__(self, provider, ttl_s: float = 300.0,
                 warn: Callable[[str], None] = lambda m: None, max_age_s: float = 0.0) -> None:
        self.provider, self.ttl_s, self.warn, self.max_age_s = provider, ttl_s, warn, max_age_s
        self._at, self._value, self._failed, self._stale = -1e18, None, False, False

    def __call__(self, t_s: float) -> float | None:
        if self.provider is None:
            return None
        if abs(t_s - self._at) >= self.ttl_s:
            self._at = t_s
            try:
                value = self.provider.intensity_at(t_s)
                stale = value is not None and is_stale(self.provider, t_s, self.max_age_s)
                self._failed = False
            except Exception as exc:   # noqa: BLE001 - carbon is optional for accounting
                if not self._failed:
                    self.warn(f"no carbon intensity ({exc}); CO2 left out until it answers")
                self._value, self._failed = None, True
                return None
            if stale and not self._stale:
                self.warn(f"zone {self.provider.zone}: no carbon intensity stored in the "
                          f"{self.max_age_s / 3600:g} h before now (carbon.max_age_s): CO2 "
                          "left out until the zone's recent intensities are imported (wattctl "
                          "carbon import)")
            self._stale = stale
            self._value = None if stale else value
        return self._value


def reopen(state_dir: str | os.PathLike, job_id: str) -> bool:
    """At a run's start (the prolog): move the closed ledger of the job's earlier run aside, so
    the collector charges this run afresh. True when there was one."""
    path = job_file(state_dir, job_id)
    done = path.with_name(path.name + DONE_SUFFIX)
    try:
        done.rename(path.with_name(f"{path.name}.{time.time_ns()}{DONE_SUFFIX}"))
    except FileNotFoundError:
        return False              # a first run, or another node's prolog moved it already
    return True


def close(state_dir: str | os.PathLike, job_id: str) -> dict:
    """The job's ledger, closed against later writes (the epilog's read); {} when none."""
    path = job_file(state_dir, job_id)
    done = path.with_name(path.name + DONE_SUFFIX)
    data = _read(path)
    if not data and done.exists():       # another node's epilog closed it already
        return _read(done)
    _write(done, data or {"job_id": job_id})
    path.unlink(missing_ok=True)
    return data
