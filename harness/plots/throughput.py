"""``throughput.png``: successful claims (and acks, publishes) per second, faults shaded.

A ``claim-many`` counts each of its leases, an ``ack-many`` each lease acked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..history import ACK_MANY, CLAIM_MANY, ObservedFault, pairs
from ..store import THROUGHPUT
from .layout import (
    DATA_WIDTH,
    TITLES,
    bin_edges,
    draw_drain,
    draw_faults,
    fault_label,
    fault_lanes,
    figure_with_lanes,
    legend_outside,
)

SERIES = {  # name -> (colour, line width)
    "claims (leases)": ("tab:blue", 2.0),
    "acks": ("tab:green", 1.0),
    "publishes": ("tab:gray", 1.0),
}


def throughput_figure(
    events: Sequence[dict],
    faults: list[ObservedFault],
    end: float,
    recovery: dict[int, float | None] | None = None,
    drain: tuple[float, float] | None = None,
) -> Figure:
    """Successful claims (and acks, publishes) per second; faults shaded and listed in
    lanes above with each one's recovery time; a partial last bin hatched; the drain
    (when given) marked."""
    series: dict[str, list[float]] = {name: [] for name in SERIES}
    began = end  # the first client invoke: bins start there (nothing ran before it)
    for inv, comp in pairs(events):
        began = min(began, inv["time"])
        if comp is None or comp["type"] != "ok":
            continue
        f = inv["f"]
        if f == "claim" and comp.get("value") is not None:
            series["claims (leases)"].append(comp["time"])
        elif f == CLAIM_MANY and type(comp.get("value")) is dict:
            series["claims (leases)"] += [comp["time"]] * len(comp["value"].get("leases") or ())
        elif f == "ack":
            series["acks"].append(comp["time"])
        elif f == ACK_MANY and type(comp.get("value")) is dict:
            outcomes = comp["value"].get("outcomes") or ()
            series["acks"] += [comp["time"]] * sum(o == "ok" for o in outcomes)
        elif f == "publish":
            series["publishes"].append(comp["time"])
    probe = [fault_label(f, recovery) for f in faults]
    n_lanes = max(fault_lanes(faults, probe, end, DATA_WIDTH), default=-1) + 1
    fig, lane_ax, ax = figure_with_lanes(n_lanes)
    edges, width = bin_edges(end, 0.0 if began >= end else began)
    sizes = np.diff(edges)
    partial = sizes[-1] < width * 0.999  # the last bin is shorter than the others
    full = len(sizes) - 1 if partial else len(sizes)
    rates_by = []
    for name, times in series.items():
        counts, _ = np.histogram(times, bins=edges)
        rates = counts / sizes
        rates_by.append(rates)
        colour, lw = SERIES[name]
        ax.stairs(rates[:full], edges[: full + 1], color=colour, lw=lw, label=name,
                  baseline=None)  # fmt: skip
        if partial:
            ax.stairs(rates[full:], edges[full:], color=colour, lw=lw, ls=":", baseline=None)
    extra: list[Any] = []
    top = max((max(r[:full], default=0.0) for r in rates_by), default=0.0)
    top = max(1.0, top) * 1.08
    if partial:
        ax.axvspan(edges[-2], edges[-1], facecolor="none", edgecolor="0.6", hatch="///",
                   lw=0, zorder=0)  # fmt: skip
        extra.append(Patch(facecolor="none", edgecolor="0.6", hatch="///",
                           label=f"last bin: {sizes[-1]:.2f} s, rate scaled"))  # fmt: skip
        over, name = max((r[-1], n) for r, n in zip(rates_by, SERIES, strict=True))
        if over > top:  # a short bin's rate is noisy: the full bins set the scale
            note = f"{name}: {over:.0f}/s in the last {sizes[-1]:.2f} s, above the axis ↑"
            ax.annotate(note, (edges[-2], top), xytext=(-2, -2), textcoords="offset points",
                        ha="right", va="top", fontsize="x-small", color="0.3")  # fmt: skip
    draw_faults((lane_ax, ax), faults, end, recovery)
    draw_drain((lane_ax, ax), drain)
    if recovery and any(r is not None for r in recovery.values()):
        extra.append(Line2D([], [], color="black", lw=2, solid_capstyle="butt",
                            label="a fault's start to the next lease"))  # fmt: skip
    ax.set_xlim(0, max(end, width))
    ax.set_ylim(0, top)
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("operations per second" + (f" (bins of {width:g} s)" if width > 1 else ""))
    (lane_ax or ax).set_title(TITLES[THROUGHPUT])
    legend_outside(ax, extra)
    return fig
