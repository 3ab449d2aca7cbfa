"""What the run's plots share: sizes, time bins, fault lanes and the figure around them.

A figure is its data axes with, above them, a strip of lanes where each fault (or
anomaly) gets a bar and a label that overlaps no other in its lane
(:func:`figure_with_lanes`, :func:`fault_lanes`); the legend stands at the right,
outside the data (:func:`legend_outside`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from harness.colours import fault_colour

from ..history import ObservedFault
from ..report import PLOTS

#: each plot's title: its caption in report.md
TITLES = dict(PLOTS)

SIZE = (12.0, 5.0)
DPI = 100
MAX_BINS = 600
LANE_HEIGHT = 0.24  # inches per fault lane above the data
LABEL_FONT = 7.5  # points, fault labels in the lanes
LEGEND_WIDTH = 2.3  # inches right of the data for the legend
#: inches of the data axes' width (the figure's less the legend and the margins)
DATA_WIDTH = SIZE[0] - LEGEND_WIDTH - 1.0


def bin_edges(end: float, start: float = 0.0) -> tuple[np.ndarray, float]:
    """Bin edges over ``[start, end]`` (1 s, or coarser so that a long run has at most
    MAX_BINS bins) and the width of a full bin. The last bin ends at ``end``: a short
    remainder (under a quarter bin) joins the bin before it, a longer one stays a
    partial bin of its own."""
    width = max(1.0, float(np.ceil((end - start) / MAX_BINS)))
    edges = np.arange(start, end, width)
    if len(edges) == 0:
        return np.array([start, start + width]), width
    if end - edges[-1] < 0.25 * width and len(edges) > 1:
        edges = edges[:-1]
    return np.append(edges, max(end, edges[-1] + 1e-9)), width


def seconds_per_char(span: float, axes_inches: float, font: float = LABEL_FONT) -> float:
    """Seconds of an axes ``axes_inches`` wide spanning ``span`` s that one character of
    a label at ``font`` points takes (an estimate)."""
    return font * 0.62 / 72 * span / max(axes_inches, 1.0)


def assign_lanes(spans: Sequence[tuple[float, float]]) -> list[int]:
    """A lane for each ``(start, stop)`` span, taken in order, such that no two spans in
    a lane overlap."""
    lane_ends: list[float] = []
    lanes = []
    for start, stop in spans:
        lane = next((k for k, busy in enumerate(lane_ends) if busy <= start), len(lane_ends))
        if lane == len(lane_ends):
            lane_ends.append(stop)
        lane_ends[lane] = stop
        lanes.append(lane)
    return lanes


def fault_lanes(
    faults: list[ObservedFault], labels: list[str], end: float, axes_inches: float
) -> list[int]:
    """A lane for each fault such that no two faults' bars or labels overlap in a lane.

    A label's extent is estimated from its length in characters at LABEL_FONT on an axes
    ``axes_inches`` wide spanning ``[0, end]``.
    """
    per_char = seconds_per_char(end, axes_inches)
    spans = []
    for fault, label in zip(faults, labels, strict=True):
        stop = end if fault.end is None else fault.end
        x, ha = label_place(fault, label, end, per_char)
        left = x - (len(label) + 2) * per_char if ha == "right" else x
        right = end if ha == "right" else x + (len(label) + 2) * per_char
        spans.append((min(fault.start, left), max(stop, right)))
    return assign_lanes(spans)


def label_place(fault: ObservedFault, label: str, end: float, per_char: float) -> tuple[float, str]:
    """Where a fault's label goes in its lane: from the fault's start, or, when it would
    run past the axes' end (a fault near the end of the run), ending there."""
    if fault.start + (len(label) + 2) * per_char <= end:
        return fault.start, "left"
    return end, "right"


def figure_with_lanes(n_lanes: int, height: float = SIZE[1]) -> tuple[Figure, Axes | None, Axes]:
    """A figure with a strip of ``n_lanes`` label lanes over the data axes (``height``
    inches) and room for the legend at the right, outside the data."""
    lanes_h = LANE_HEIGHT * n_lanes + (0.15 if n_lanes else 0.0)
    fig = plt.figure(figsize=(SIZE[0], height + lanes_h), layout="constrained")
    if not n_lanes:
        return fig, None, fig.add_subplot()
    grid = fig.add_gridspec(2, 1, height_ratios=[lanes_h, height - 0.9], hspace=0.0)
    ax = fig.add_subplot(grid[1])
    lane_ax = fig.add_subplot(grid[0], sharex=ax)
    lane_ax.set_ylim(n_lanes - 0.5, -0.5)
    lane_ax.set_yticks([])
    lane_ax.tick_params(axis="x", labelbottom=False, length=0)
    for side in ("top", "right", "left"):
        lane_ax.spines[side].set_visible(False)
    lane_ax.set_ylabel("faults", rotation=0, ha="right", va="center", fontsize="small")
    return fig, lane_ax, ax


def draw_drain(fig_axes: tuple[Axes | None, Axes], drain: tuple[float, float] | None) -> None:
    """Mark the drain: a line where the workload stopped and the drain's span in grey."""
    if drain is None:
        return
    _, ax = fig_axes
    start, stop = drain
    label = f"drain after the workload\n({start:.2f}-{stop:.2f} s)"
    ax.axvspan(start, stop, color="0.5", alpha=0.25, lw=0, zorder=0, label=label)
    # on the data axes only: in the lanes it would cut through a fault's label
    ax.axvline(start, color="0.35", lw=1.0, ls="-.", zorder=1)


def _fault_colours(faults: list[ObservedFault]) -> dict[str, Any]:
    """Each kind's colour, as report.html gives it (:func:`harness.colours.fault_colour`)."""
    return {f.kind: fault_colour(f.kind) for f in faults}


def draw_faults(
    fig_axes: tuple[Axes | None, Axes],
    faults: list[ObservedFault],
    end: float,
    recovery: dict[int, float | None] | None = None,
) -> None:
    """Shade each fault on the data axes; in the lane strip, a bar per fault with its
    label (and its recovery time, when given) in its own lane; a time zone's
    daylight-saving change is a tick on its bar and a dotted line across the data."""
    lane_ax, ax = fig_axes
    colours = _fault_colours(faults)
    seen: set[str] = set()
    for fault in faults:
        stop = end if fault.end is None else fault.end
        stop = max(stop, fault.start + end / 500)  # instantaneous faults stay visible
        ax.axvspan(fault.start, stop, color=colours[fault.kind], alpha=0.45, lw=0, zorder=0,
                   label=None if fault.kind in seen else f"fault: {fault.kind}")  # fmt: skip
        seen.add(fault.kind)
        if fault.transition is not None:  # a time zone's daylight-saving change
            ax.axvline(fault.transition, color="0.3", lw=0.8, ls=(0, (1, 2)), zorder=1)
    if lane_ax is None:
        return
    labels = [fault_label(f, recovery) for f in faults]
    lanes = fault_lanes(faults, labels, end, DATA_WIDTH)
    for fault, label, lane in zip(faults, labels, lanes, strict=True):
        stop = end if fault.end is None else fault.end
        stop = max(stop, fault.start + end / 500)
        lane_ax.barh(lane, stop - fault.start, left=fault.start, height=0.8,
                     color=colours[fault.kind], alpha=0.9, lw=0)  # fmt: skip
        if fault.end is None:  # never ended: an arrow past the end of the history
            lane_ax.plot(end, lane, marker=">", color="gray", ms=4, clip_on=False)
        if fault.transition is not None:  # the moment the zone's offset moved, under its label
            lane_ax.plot(fault.transition, lane + 0.3, marker="^", color="black", ms=4, mew=0)
        rec = None if recovery is None else recovery.get(fault.start_index)
        if rec is not None:  # from the fault's start to the next lease, under its label
            lane_ax.plot([fault.start, fault.start + rec], [lane + 0.33] * 2, color="black",
                         lw=2, solid_capstyle="butt")  # fmt: skip
        x, ha = label_place(fault, label, end, seconds_per_char(end, DATA_WIDTH))
        lane_ax.text(x, lane, f" {label} ", fontsize=LABEL_FONT, va="center",
                     ha=ha, clip_on=False)  # fmt: skip


def fault_label(fault: ObservedFault, recovery: dict[int, float | None] | None) -> str:
    if recovery is None or fault.start_index not in recovery:
        return fault.label
    rec = recovery[fault.start_index]
    return f"{fault.label}: " + ("no lease after it" if rec is None else f"next lease +{rec:.2f} s")


def legend_outside(ax: Axes, extra: Sequence[Any] = ()) -> None:
    handles, labels = ax.get_legend_handles_labels()
    handles += [h for h in extra]
    labels += [h.get_label() for h in extra]
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0, fontsize="small", markerscale=1.5)  # fmt: skip
