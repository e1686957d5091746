"""Fit a GPU model's catalogue constants to one calibration run (``wattctl calibrate-gpus``).

Pure: measurements in, constants with their fit errors out, or a ``CalibrationError`` saying
why the measurements are not physical. The forms are those the physics computes with
(``power.py``):

- power versus utilisation: ``P = idle_power_w + dynamic_power_w * s * (u/100) ** util_gamma``,
  where ``s`` is the load's own scale (1 for a synthetic load, whose power defines the curve;
  an emulated job class draws its measured offset from the curve, ``classes.JobClass.power_at``);
- under a power limit ``L`` below the fixed workload's uncapped draw ``P0``:
  ``T/T0 = ((P0 - idle_power_w) / (L - idle_power_w)) ** cap_beta``;
- the settable range ``[min_power_cap_w, max_power_w]`` is read from the board, not fitted;
- co-location: the co-located pair's slowdowns give ``interference_k``, the pair's class's
  measured pair and ``interference_k_mps`` (``calibrate_pairs.py``).

Idle power is the mean of readings of idle GPUs of the model where there are some, else the
curve's intercept (fitted with the other two). Each fitted constant carries its standard error
(from the fit's Jacobian; None where the points leave no degree of freedom) and the fit's
root-mean-square error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from ..errors import InputError

if TYPE_CHECKING:
    from .calibrate_pairs import Colocation, PairPoint

# Measurement noise allowed before a reading counts as nonsense: power may exceed its limit,
# or an idle reading a loaded one, by this share of the board's top limit (at least 1 W); a
# capped run may be this much faster than the uncapped one.
POWER_TOLERANCE = 0.02
TIME_TOLERANCE = 0.03
GAMMA_RANGE = (0.05, 5.0)      # the curve's exponent searched; a best fit on a bound is no fit


class CalibrationError(InputError):
    """The measurements of a calibration run are not physical, or too few to fit."""


@dataclass(frozen=True)
class LoadPoint:
    """The GPU held at one load: mean utilisation and power, its limit, the load's scale."""
    label: str
    util_pct: float
    power_w: float
    power_limit_w: float
    load_scale: float = 1.0


@dataclass(frozen=True)
class CapPoint:
    """The fixed workload under one limit: its time and mean power."""
    power_limit_w: float
    time_s: float
    power_w: float


@dataclass(frozen=True)
class Measurement:
    idle_w: tuple[float, ...]          # readings of idle GPUs of the model
    loads: tuple[LoadPoint, ...]       # stepped load, uncapped
    max_limit_w: float                 # the board's limit uncapped (its top)
    min_limit_w: float                 # the lowest limit the board takes
    workload: str                      # the fixed workload's load label
    workload_time_s: float             # its time uncapped
    workload_power_w: float            # its mean power uncapped
    caps: tuple[CapPoint, ...]         # the fixed workload under each limit tried
    pairs: tuple[PairPoint, ...] = ()  # a fixed workload run as a co-located pair, per mode


@dataclass(frozen=True)
class Constant:
    value: float | dict[str, list[float]]   # colocation_pairs: "a|b" -> [speed_a, speed_b]
    error: float | None                # standard error, same unit; None: no spare point
    points: int
    how: str


@dataclass(frozen=True)
class Calibration:
    constants: dict[str, Constant]
    curve_rmse_w: float
    cap_rmse: float | None             # of T/T0; None when cap_beta was not measured
    notes: tuple[str, ...] = field(default=())


def power_tolerance_w(limit_w: float) -> float:
    return max(1.0, POWER_TOLERANCE * limit_w)


def fit(m: Measurement, colocation: Colocation | None = None) -> Calibration:
    """Every constant the measurement determines; ``CalibrationError`` names what is not
    physical (power above its limit, idle above load, too few points, a curve or a cap sweep
    that runs the wrong way, a co-located pair faster than alone or over 4 times slower).
    ``colocation``: what the pair fit keeps of the model (``calibrate_pairs.Colocation``);
    None: the co-located pairs are not fitted."""
    check_readings(m)
    tol = power_tolerance_w(m.max_limit_w)
    usable = [p for p in m.loads if p.util_pct > 0 and p.power_w < p.power_limit_w - tol]
    idle = sum(m.idle_w) / len(m.idle_w) if m.idle_w else None
    if idle is not None:
        check_monotone(usable, idle, tol)
    curve = fit_curve(usable, idle)
    check_monotone(usable, curve.idle_power_w, tol)
    n_idle = len(m.idle_w)
    out = {
        "idle_power_w": Constant(
            curve.idle_power_w, _mean_error(m.idle_w) if n_idle else curve.errors[0],
            n_idle or len(usable),
            f"mean of {n_idle} readings of idle GPUs of the model" if n_idle else
            f"the intercept of the power curve over {len(usable)} load levels (no idle GPU "
            "of the model to read)"),
        "dynamic_power_w": Constant(curve.dynamic_power_w, curve.errors[1], len(usable),
                                    _curve_how(usable, curve)),
        "util_gamma": Constant(curve.util_gamma, curve.errors[2], len(usable),
                               _curve_how(usable, curve)),
        "max_power_w": Constant(m.max_limit_w, None, 1, "the board's power limit uncapped"),
        "min_power_cap_w": Constant(m.min_limit_w, None, 1,
                                    "the lowest power limit the board takes"),
    }
    notes = []
    beta = fit_cap_beta(curve.idle_power_w, m.workload_power_w, m.workload_time_s, m.caps, tol)
    if isinstance(beta, str):
        notes.append(f"cap_beta not measured: {beta}")
        cap_rmse = None
    else:
        value, error, n, cap_rmse = beta
        out["cap_beta"] = Constant(
            value, error, n, f"the fixed workload ({m.workload}, {m.workload_power_w:.1f} W "
            f"uncapped) timed under {n} limits below its draw; RMSE of T/T0 {cap_rmse:.4f} "
            f"over {len(m.caps) + 1} runs")
    if colocation is not None:
        from .calibrate_pairs import fit_pairs
        pair_constants, pair_notes = fit_pairs(m.pairs, colocation)
        out.update(pair_constants)
        notes += pair_notes
    skipped = len(m.loads) - len(usable)
    if skipped:
        notes.append(f"{skipped} load levels at the power limit or without utilisation left "
                     "out of the curve")
    return Calibration(out, curve.rmse_w, cap_rmse, tuple(notes))


def check_readings(m: Measurement) -> None:
    """Refuse readings no GPU gives: not finite, power above its limit, idle above load,
    limits the wrong way round."""
    if not (_positive(m.max_limit_w) and _positive(m.min_limit_w)):
        raise CalibrationError(f"power limits read as {m.max_limit_w!r} W (uncapped) and "
                               f"{m.min_limit_w!r} W (lowest): not a board's limits")
    if m.min_limit_w > m.max_limit_w:
        raise CalibrationError(f"the lowest power limit {m.min_limit_w:g} W is above the "
                               f"uncapped one {m.max_limit_w:g} W")
    tol = power_tolerance_w(m.max_limit_w)
    for w in m.idle_w:
        if not _positive(w) or w > m.max_limit_w + tol:
            raise CalibrationError(f"idle power read as {w!r} W, against the board's limit "
                                   f"{m.max_limit_w:g} W")
    readings = [(p.label, p.power_w, p.power_limit_w) for p in m.loads] + [
        (f"{m.workload} under {c.power_limit_w:g} W", c.power_w, c.power_limit_w)
        for c in m.caps] + [(f"{m.workload} uncapped", m.workload_power_w, m.max_limit_w)]
    for label, power_w, limit_w in readings:
        if not _positive(power_w) or not _positive(limit_w):
            raise CalibrationError(f"load {label}: power {power_w!r} W, limit {limit_w!r} W: "
                                   "not a reading")
        if power_w > limit_w + tol:
            raise CalibrationError(f"load {label}: power {power_w:.1f} W is above the power "
                                   f"limit {limit_w:g} W")
    for p in m.loads:
        if not (0.0 <= p.util_pct <= 100.0) or not _positive(p.load_scale):
            raise CalibrationError(f"load {p.label}: utilisation {p.util_pct!r} % or scale "
                                   f"{p.load_scale!r}: not a reading")
    if m.idle_w and m.loads:
        idle = sum(m.idle_w) / len(m.idle_w)
        low = min(m.loads, key=lambda p: p.power_w)
        if idle > low.power_w + tol:
            raise CalibrationError(f"idle power {idle:.1f} W is above the power under load "
                                   f"{low.label} ({low.power_w:.1f} W at {low.util_pct:.1f} %)")
    for c in m.caps:
        if not _positive(c.time_s):
            raise CalibrationError(f"the fixed workload under {c.power_limit_w:g} W took "
                                   f"{c.time_s!r} s: not a time")
    if not _positive(m.workload_time_s):
        raise CalibrationError(f"the fixed workload took {m.workload_time_s!r} s uncapped: "
                               "not a time")


def _positive(v: object) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


@dataclass(frozen=True)
class CurveFit:
    idle_power_w: float
    dynamic_power_w: float
    util_gamma: float
    rmse_w: float
    errors: tuple[float | None, float | None, float | None]   # idle, dynamic, gamma


def fit_curve(points: Sequence[LoadPoint], idle_w: float | None = None) -> CurveFit:
    """Least squares of the power curve over ``points``; ``idle_w`` held where measured,
    else fitted as the intercept."""
    distinct = len({round(p.util_pct, 3) for p in points})
    need = 2 if idle_w is not None else 3
    if distinct < need:
        raise CalibrationError(
            f"{distinct} load levels of distinct utilisation below the power limit: too few "
            f"to fit the power curve (at least {need}"
            + ("" if idle_w is not None else ", without an idle GPU of the model to read") + ")")
    xs = [p.util_pct / 100.0 for p in points]
    ss = [p.load_scale for p in points]
    ys = [p.power_w for p in points]

    def solve(g: float) -> tuple[float, float, float]:
        a = [s * x ** g for s, x in zip(ss, xs)]
        if idle_w is not None:
            d = sum(ai * (y - idle_w) for ai, y in zip(a, ys)) / sum(ai * ai for ai in a)
            i0 = idle_w
        else:
            n, sa, saa = len(a), sum(a), sum(ai * ai for ai in a)
            sy, say = sum(ys), sum(ai * y for ai, y in zip(a, ys))
            det = n * saa - sa * sa
            if det <= 1e-12 * max(1.0, n * saa):
                return math.inf, 0.0, 0.0
            i0 = (saa * sy - sa * say) / det
            d = (n * say - sa * sy) / det
        sse = sum((y - i0 - d * ai) ** 2 for ai, y in zip(a, ys))
        return sse, i0, d

    g = _minimise(lambda g: solve(g)[0], *GAMMA_RANGE)
    sse, idle, dynamic = solve(g)
    lo, hi = GAMMA_RANGE
    if not lo * 1.001 < g < hi / 1.001:
        raise CalibrationError(f"power does not follow idle + dynamic * (u/100) ** gamma: the "
                               f"best exponent is at the bound {g:.3g} of {lo:g}-{hi:g}")
    if dynamic <= 0:
        raise CalibrationError(f"power falls as utilisation rises (dynamic power "
                               f"{dynamic:.1f} W): not a GPU under load")
    if idle <= 0:
        raise CalibrationError(f"the power curve's intercept is {idle:.1f} W: no idle power "
                               "below the loads (and no idle GPU of the model was read)")
    errors = _curve_errors(xs, ss, ys, idle, dynamic, g, idle_w is None)
    return CurveFit(idle, dynamic, g, math.sqrt(sse / len(points)), errors)


def _minimise(f, lo: float, hi: float, grid: int = 240, tol: float = 1e-10) -> float:
    """The minimum of ``f`` over [lo, hi] (log-spaced grid, then golden section)."""
    ratio = (hi / lo) ** (1 / (grid - 1))
    xs = [lo * ratio ** k for k in range(grid)]
    k = min(range(grid), key=lambda i: f(xs[i]))
    a, b = xs[max(0, k - 1)], xs[min(grid - 1, k + 1)]
    phi = (math.sqrt(5) - 1) / 2
    c, d = b - phi * (b - a), a + phi * (b - a)
    fc, fd = f(c), f(d)
    while b - a > tol * max(1.0, abs(a)):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - phi * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + phi * (b - a)
            fd = f(d)
    best = (a + b) / 2
    return min((best, xs[k]), key=f)


def _curve_errors(xs, ss, ys, idle, dynamic, g, idle_fitted: bool
                  ) -> tuple[float | None, float | None, float | None]:
    """Standard errors of (idle, dynamic, gamma) from the Jacobian at the optimum."""
    rows = []
    for x, s in zip(xs, ss):
        a = s * x ** g
        row = [a, dynamic * a * math.log(x)]
        rows.append(([1.0] if idle_fitted else []) + row)
    k = len(rows[0])
    dof = len(ys) - k
    if dof <= 0:
        return (None, None, None)
    sse = sum((y - idle - dynamic * s * x ** g) ** 2 for x, s, y in zip(xs, ss, ys))
    jtj = [[sum(r[i] * r[j] for r in rows) for j in range(k)] for i in range(k)]
    inv = _inverse(jtj)
    if inv is None:
        return (None, None, None)
    var = sse / dof
    se = [math.sqrt(max(0.0, var * inv[i][i])) for i in range(k)]
    return (se[0], se[1], se[2]) if idle_fitted else (None, se[0], se[1])


def _inverse(m: list[list[float]]) -> list[list[float]] | None:
    """Gauss-Jordan inverse of a small matrix; None when singular."""
    n = len(m)
    a = [row[:] + [1.0 if i == j else 0.0 for j in range(n)] for i, row in enumerate(m)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[piv][col]) < 1e-300:
            return None
        a[col], a[piv] = a[piv], a[col]
        p = a[col][col]
        a[col] = [v / p for v in a[col]]
        for r in range(n):
            if r != col and a[r][col]:
                f = a[r][col]
                a[r] = [v - f * w for v, w in zip(a[r], a[col])]
    return [row[n:] for row in a]


def _mean_error(values: Sequence[float]) -> float | None:
    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def _curve_how(points: Sequence[LoadPoint], curve: CurveFit) -> str:
    lo = min(p.util_pct for p in points)
    hi = max(p.util_pct for p in points)
    return (f"least squares of the power curve over {len(points)} load levels "
            f"({lo:.1f}-{hi:.1f} % utilisation); RMSE {curve.rmse_w:.2f} W")


def check_monotone(points: Sequence[LoadPoint], idle_w: float, tol_w: float) -> None:
    """Each load's dynamic power over its scale must rise with utilisation (within noise)."""
    ranked = sorted(points, key=lambda p: p.util_pct)
    for a, b in zip(ranked, ranked[1:]):
        qa, qb = (a.power_w - idle_w) / a.load_scale, (b.power_w - idle_w) / b.load_scale
        if b.util_pct > a.util_pct and qb < qa - tol_w / min(a.load_scale, b.load_scale):
            raise CalibrationError(
                f"power falls as utilisation rises: load {b.label} at {b.util_pct:.1f} % draws "
                f"{b.power_w:.1f} W, load {a.label} at {a.util_pct:.1f} % {a.power_w:.1f} W "
                "(per unit of load scale)")


def fit_cap_beta(idle_w: float, power0_w: float, time0_s: float, caps: Sequence[CapPoint],
                 tol_w: float) -> tuple[float, float | None, int, float] | str:
    """(cap_beta, its standard error, points, RMSE of T/T0 over every run) from the runs
    under limits below the uncapped draw; a string saying why when there are too few."""
    ranked = sorted(caps, key=lambda c: -c.power_limit_w)
    prev_ratio = 1.0
    for c in ranked:
        ratio = c.time_s / time0_s
        if ratio < 1 - TIME_TOLERANCE:
            raise CalibrationError(f"the fixed workload ran faster under a {c.power_limit_w:g} "
                                   f"W limit ({c.time_s:.3f} s) than uncapped ({time0_s:.3f} s)")
        if ratio < prev_ratio * (1 - TIME_TOLERANCE):
            raise CalibrationError(f"the fixed workload ran faster under a lower limit "
                                   f"({c.power_limit_w:g} W: T/T0 {ratio:.3f}, a higher one: "
                                   f"{prev_ratio:.3f})")
        prev_ratio = max(prev_ratio, ratio)
    below = [c for c in ranked if c.power_limit_w < power0_w - tol_w]
    for c in below:
        if c.power_limit_w <= idle_w:
            raise CalibrationError(f"a power limit of {c.power_limit_w:g} W is at or below "
                                   f"the idle power {idle_w:.1f} W")
    if len(below) < 2:
        return (f"{len(below)} of the limits tried lie below the fixed workload's "
                f"{power0_w:.1f} W uncapped (at least 2 needed)")
    xs = [math.log((power0_w - idle_w) / (c.power_limit_w - idle_w)) for c in below]
    ys = [math.log(c.time_s / time0_s) for c in below]
    sxx = sum(x * x for x in xs)
    beta = sum(x * y for x, y in zip(xs, ys)) / sxx
    if beta <= 0:
        raise CalibrationError(f"the fixed workload did not slow under limits below its draw "
                               f"(cap_beta {beta:.3f})")
    sse = sum((y - beta * x) ** 2 for x, y in zip(xs, ys))
    error = math.sqrt(sse / (len(xs) - 1) / sxx) if len(xs) > 1 else None
    predicted = [(c, ((power0_w - idle_w) / (c.power_limit_w - idle_w)) ** beta
                  if c.power_limit_w < power0_w else 1.0) for c in ranked]
    squares = [(c.time_s / time0_s - p) ** 2 for c, p in predicted] + [0.0]
    return beta, error, len(below), math.sqrt(sum(squares) / len(squares))
