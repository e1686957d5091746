"""The report's figure: energy and carbon per day stacked by account, with the grid's carbon
intensity over both. matplotlib is an optional extra (``pip install 'wattbatch[plot]'``)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from ..errors import InputError


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("report: --plot needs matplotlib, which is not installed: "
                         "pip install 'wattbatch[plot]' (or matplotlib), or leave out "
                         "--plot") from None
    return plt


def plot_daily(daily: dict, intensity: Sequence[tuple[float, float]], zone: str, path: Path,
               title: str) -> None:
    """Two panels (kWh, kgCO2) of stacked daily bars by account; the hourly intensity of
    ``zone`` as a line on a right-hand axis of each."""
    plt = _pyplot()
    import matplotlib.dates as mdates

    days = [datetime.fromtimestamp(d, timezone.utc) for d in daily["days"]]
    fig, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    colours = plt.get_cmap("tab10")
    for ax, key, label in ((axes[0], "energy_kwh", "GPU energy (kWh)"),
                           (axes[1], "co2_kg", "carbon (kgCO2eq)")):
        bottom = [0.0] * len(days)
        for i, account in enumerate(daily["accounts"]):
            values = daily[key][account]
            ax.bar(days, values, width=0.8, bottom=bottom, align="edge", label=account,
                   color=colours(i % 10), edgecolor="white", linewidth=0.5)
            bottom = [b + v for b, v in zip(bottom, values)]
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", alpha=0.3)
        if intensity:
            twin = ax.twinx()
            twin.plot([datetime.fromtimestamp(t, timezone.utc) for t, _ in intensity],
                      [v for _, v in intensity], color="black", linewidth=1.0,
                      label=f"grid intensity {zone}")
            twin.set_ylabel(f"gCO2eq/kWh ({zone})")
            twin.set_ylim(bottom=0)
            if ax is axes[0]:
                twin.legend(loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=8,
                            frameon=False)
    handles, labels = axes[0].get_legend_handles_labels()
    axes[0].legend(handles, labels, title=None, loc="lower left", bbox_to_anchor=(0.0, 1.0),
                   ncol=min(6, max(1, len(labels))), fontsize=8, frameon=False)
    axes[1].xaxis.set_major_locator(mdates.DayLocator(interval=max(1, len(days) // 14)))
    axes[1].xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d"))
    axes[1].set_xlabel("day (UTC)")
    missing = []
    if not any(v for series in daily["co2_kg"].values() for v in series):
        missing.append("no job record carries co2_g (no carbon intensity at the epilog)")
    if not intensity:
        missing.append(f"no carbon intensity stored for zone {zone} in the period")
    if missing:
        axes[1].text(0.5, 0.5, "\n".join(missing), transform=axes[1].transAxes, ha="center",
                     va="center", fontsize=10, color="dimgray")
    if days:
        from datetime import timedelta
        axes[1].set_xlim(days[0] - timedelta(hours=6), days[-1] + timedelta(hours=30))
    fig.suptitle(title + "\nbars stacked by account (legend left to right = bottom to top); line: grid carbon intensity")
    fig.autofmt_xdate()
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise InputError(f"report: --plot {path}: cannot write ({exc.strerror})") from None
    finally:
        plt.close(fig)
