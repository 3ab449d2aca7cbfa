"""``latency.png``: every operation's latency at its invoke time, by outcome, with p50/p99."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter

from ..history import ObservedFault, pairs
from ..store import LATENCY
from .layout import (
    DATA_WIDTH,
    TITLES,
    bin_edges,
    draw_drain,
    draw_faults,
    fault_lanes,
    figure_with_lanes,
    legend_outside,
)

MAX_POINTS = 60_000  # ok points drawn in the latency plot (a uniform sample beyond that)
OUTCOME_COLOURS = {"ok": "tab:green", "fail": "tab:orange", "info": "tab:red"}
OUTCOME_STYLES: dict[str, dict[str, Any]] = {  # the rare outcomes drawn bigger, on top
    "ok": {"s": 4, "alpha": 0.5, "lw": 0, "marker": "o", "zorder": 2},
    "fail": {"s": 22, "alpha": 0.9, "lw": 1.2, "marker": "^", "zorder": 3},
    "info": {"s": 26, "alpha": 0.9, "lw": 1.5, "marker": "x", "zorder": 4},
}


class _Milliseconds(LogFormatter):
    """Log-axis tick labels as plain milliseconds (0.1, 1, 10, 1,000), on the ticks
    matplotlib's own log formatter would label."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        if not super().__call__(x, pos):
            return ""
        return f"{x:,.0f}" if x >= 1 else f"{x:.3g}"


def latency_figure(
    events: Sequence[dict],
    faults: list[ObservedFault],
    end: float,
    drain: tuple[float, float] | None = None,
) -> Figure:
    """Latency (ms) of every completed operation at its invoke time, by outcome, with
    p50/p99 of the ``ok`` ones per bin (no line through bins without operations); the
    drain (when given) marked."""
    points: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in OUTCOME_COLOURS}
    for inv, comp in pairs(events):
        if comp is None:
            continue
        xs, ys = points[comp["type"]]
        xs.append(inv["time"])
        ys.append((comp["time"] - inv["time"]) * 1000.0)
    n_lanes = max(fault_lanes(faults, [f.label for f in faults], end,
                               DATA_WIDTH), default=-1) + 1  # fmt: skip
    fig, lane_ax, ax = figure_with_lanes(n_lanes)
    draw_faults((lane_ax, ax), faults, end)
    draw_drain((lane_ax, ax), drain)
    rng = np.random.default_rng(0)
    floor = 1e-2  # ms
    for outcome, (xs, ys) in points.items():
        if not xs:
            continue
        x, y = np.asarray(xs), np.maximum(np.asarray(ys), floor)
        if len(x) > MAX_POINTS:
            keep = rng.choice(len(x), MAX_POINTS, replace=False)
            x, y = x[keep], y[keep]
        style = OUTCOME_STYLES[outcome]
        ax.scatter(x, y, color=OUTCOME_COLOURS[outcome], label=f"{outcome} ({len(xs):,})",
                   **style)  # type: ignore[arg-type]  # fmt: skip
    xs, ys = points["ok"]
    if xs:
        edges, width = bin_edges(max(end, max(xs)), min(xs))
        p50, p99, first, last = binned_percentiles(np.asarray(xs), np.asarray(ys), edges)
        total50, total99 = np.percentile(ys, [50, 99])
        for values, ls, name, total in ((p50, "-", "p50", total50), (p99, "--", "p99", total99)):
            px, py = _steps_with_gaps(np.maximum(values, floor), first, last, width)
            label = f"{name} of ok per {width:g} s (overall {total:.1f} ms)"
            ax.plot(px, py, color="black", lw=1.2, ls=ls, label=label)
    every = [y for _, ys in points.values() for y in ys]
    if every and max(every) <= min(every) * 1.01:  # one latency only: give it some room
        y = max(every[0], floor)
        ax.set_ylim(y / 3, y * 3)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(_Milliseconds())
    ax.yaxis.set_minor_formatter(_Milliseconds(labelOnlyBase=False))
    ax.set_xlim(0, max(end, 1.0))
    ax.set_xlabel("invoke time since start (s)")
    ax.set_ylabel("latency (ms)")
    (lane_ax or ax).set_title(TITLES[LATENCY])
    legend_outside(ax)
    return fig


def binned_percentiles(x: np.ndarray, y: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per bin of ``x`` between ``edges``: p50 and p99 of ``y``, and the first and last
    ``x`` in the bin (all NaN for an empty bin)."""
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    cuts = np.searchsorted(x, edges)
    cuts[-1] = len(x)  # the last bin includes its right edge
    out = np.full((4, len(edges) - 1), np.nan)
    for k, (a, b) in enumerate(itertools.pairwise(cuts)):
        if b > a:
            out[0, k], out[1, k] = np.percentile(y[a:b], [50, 99])
            out[2, k], out[3, k] = x[a], x[b - 1]
    return out[0], out[1], out[2], out[3]


def _steps_with_gaps(
    values: np.ndarray, first: np.ndarray, last: np.ndarray, width: float
) -> tuple[np.ndarray, np.ndarray]:
    """A step line of per-bin ``values``, each drawn only where its bin had operations
    (from its ``first`` to its ``last``, at least a tenth of ``width`` wide). Neighbours
    less than half a bin apart are joined; a longer stretch without operations, or a
    bin without any (NaN), breaks the line."""
    xs: list[float] = []
    ys: list[float] = []
    for v, lo, hi in zip(values, first, last, strict=True):
        if np.isnan(v):
            continue
        if hi - lo < 0.1 * width:
            mid = (lo + hi) / 2
            lo, hi = mid - 0.05 * width, mid + 0.05 * width
        if xs and lo - xs[-1] > 0.5 * width:
            xs.append(np.nan)
            ys.append(np.nan)
        elif xs:
            xs[-1] = lo  # the previous value holds until this bin's first operation
        xs += [lo, hi]
        ys += [v, v]
    return np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
