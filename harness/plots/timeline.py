"""``anomaly-timeline.png``: the leases of the groups involved in the first anomalies.

Each lease is drawn as its certain validity window, around the anomalies, which are
labelled in a strip above the leases. A lease is labelled with its message and process
where the label has room: short leases one after another in a row keep their bars, and
the labels that would run into another are left out, the anomalies' own leases labelled
first. Drawn only when the check found anomalies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..checker import HistoryModel, Lease
from ..store import ANOMALY_TIMELINE
from .layout import (
    DATA_WIDTH,
    LABEL_FONT,
    TITLES,
    assign_lanes,
    figure_with_lanes,
    legend_outside,
    seconds_per_char,
)

TIMELINE_GROUPS = 8
LEASE_FONT = 5.8  # points: matplotlib's "xx-small" at the default 10 pt


# -- anomaly timeline -----------------------------------------------------------------------
def anomaly_timeline_figure(events: Sequence[dict], result: dict[str, Any]) -> Figure | None:
    """Per-group timeline of leases around the first anomalies (None if nothing to show)."""
    examples = [
        (name, ex)
        for name, body in result.get("anomalies", {}).items()
        for ex in body.get("examples", [])[:3]
        if ex and isinstance(ex, list)  # event indices (not a replica divergence's rows)
    ]
    examples.sort(key=lambda item: max(item[1]))
    examples = examples[:6]
    if not examples:
        return None
    n = len(events)
    groups: list[Any] = []
    times: list[float] = []
    for _, ex in examples:
        for i in ex:
            if 0 <= i < n:
                times.append(events[i]["time"])
                g = _group_of(events, i)
                if g is not None and g not in groups:
                    groups.append(g)
    if not times:
        return None
    groups = groups[:TIMELINE_GROUPS]
    history = HistoryModel(events)
    leases = [x for x in history.leases if x.group in groups]
    span = max(times) - min(times)
    pad = max(1.0, 0.25 * span, *(x.stretch - x.ci for x in leases[:1000]))
    lo, hi = max(0.0, min(times) - pad), max(times) + pad
    rows = {g: k for k, g in enumerate(groups)}
    marks = _anomaly_marks(events, examples, lo, hi)
    fig, lane_ax, ax = figure_with_lanes(max((m[3] for m in marks), default=-1) + 1,
                               1.5 + 0.7 * len(groups))  # fmt: skip
    assert lane_ax is not None  # every example has a time: at least one lane
    lane_ax.set_ylabel("anomalies", rotation=0, ha="right", va="center", fontsize="small")
    processes = sorted({x.process for x in leases})
    cmap = plt.get_cmap("tab10")
    colour = {p: cmap(k % 10) for k, p in enumerate(processes)}
    lanes: dict[Any, list[float]] = {g: [] for g in groups}
    drawn: list[tuple[Lease, float]] = []
    for x in sorted(leases, key=lambda x: x.ci):
        last = max(x.end, x.cut if x.cut < float("inf") else x.end)
        if last < lo or x.ci > hi:
            continue
        free = lanes[x.group]
        lane = next((k for k, busy in enumerate(free) if busy < x.ci), len(free))
        if lane == len(free):
            free.append(last)
        free[lane] = last
        y = rows[x.group] + 0.22 * (lane % 3)
        _draw_lease(ax, x, y, colour[x.process])
        drawn.append((x, y))
    labels = _LeaseLabels(seconds_per_char(hi - lo, DATA_WIDTH, LEASE_FONT))
    involved = {i for _, ex in examples for i in ex}
    for x, y in sorted(
        drawn, key=lambda d: ({d[0].i_inv, d[0].i_ok}.isdisjoint(involved), d[0].ci)
    ):
        labels.add(ax, x, y)
    for msg, (t_ok, _, _) in history.pub_ok.items():
        g = history.pub_group.get(msg)
        if g in rows and lo <= t_ok <= hi:
            ax.plot(t_ok, rows[g] - 0.3, marker="^", color="gray", ms=5, ls="none")
    bottom = lane_ax.get_ylim()[0]
    for t, text, right, lane in marks:  # in the strip above: they hide no lease label
        ax.axvline(t, color="red", lw=1, ls=":")
        lane_ax.plot([t, t], [lane, bottom], color="red", lw=1, ls=":", zorder=1)
        lane_ax.text(t, lane, text, color="red", fontsize=LABEL_FONT, va="center",
                     ha="right" if right else "left", clip_on=False, zorder=3,
                     bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.3})  # fmt: skip
    ax.set_yticks(range(len(groups)), [group_label(g) for g in groups])
    ax.set_ylim(len(groups) - 0.3, -0.6)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("time since start (s)")
    lane_ax.set_title(TITLES[ANOMALY_TIMELINE])
    legend_outside(ax, TIMELINE_KEY)
    return fig


#: what the timeline's marks mean (colours there are the claiming processes')
TIMELINE_KEY = (
    Patch(color="0.5", alpha=0.3, label="claim in flight (invoke to ok)"),
    Patch(color="0.5", alpha=0.85, label="certain validity window"),
    Line2D([], [], marker="x", color="0.5", mec="black", ls="none",
           label="ack/nack/dead-letter invoked"),
    Line2D([], [], color="0.5", lw=1, ls="--", label="acted after its window"),
    Line2D([], [], marker="^", color="gray", ls="none", label="publish ok"),
    Line2D([], [], color="red", lw=1, ls=":", label="anomaly [its event indices]"),
)  # fmt: skip


def _anomaly_marks(
    events: Sequence[dict], examples: Sequence[tuple[str, list]], lo: float, hi: float
) -> list[tuple[float, str, bool, int]]:
    """``(time, label, right-aligned, lane)`` of each example's mark: at its last event's
    time, the label reaching right (or left, near the right edge), in lanes so that no
    two labels overlap."""
    per_char = seconds_per_char(hi - lo, DATA_WIDTH)
    n = len(events)
    found = []
    for name, ex in examples:
        times = [events[i]["time"] for i in ex if 0 <= i < n]
        if not times:
            continue
        t, text = max(times), f"{name} {ex}"
        width = (len(text) + 2) * per_char
        right = t + width > hi
        found.append((t - width if right else t, t, f"{text} " if right else f" {text}", right))
    found.sort()
    lanes = assign_lanes([(a, a + (len(text) + 1) * per_char) for a, _, text, _ in found])
    return [(t, text, right, lane) for (_, t, text, right), lane in zip(found, lanes, strict=True)]


def _draw_lease(ax: Axes, x: Lease, y: float, colour: Any) -> None:
    ax.barh(y, x.co - x.ci, left=x.ci, height=0.18, color=colour, alpha=0.3)
    end = x.end
    if end > x.co:
        ax.barh(y, end - x.co, left=x.co, height=0.18, color=colour, alpha=0.85)
    if x.cut < float("inf"):
        if x.cut > end:  # the holder acted after its window: show how late
            ax.plot([end, x.cut], [y, y], color=colour, lw=1, ls="--")
        ax.plot(x.cut, y, marker="x", color=colour, mec="black", ms=6, ls="none")


class _LeaseLabels:
    """Lease labels that keep clear of each other: one is drawn only where no label
    drawn before it on the same row is (``per_char``: seconds a character takes)."""

    def __init__(self, per_char: float) -> None:
        self.per_char = per_char
        self.taken: dict[float, list[tuple[float, float]]] = {}  # row (y) -> label spans

    def add(self, ax: Axes, x: Lease, y: float) -> None:
        text = f"{x.msg} p{x.process}"
        span = (x.ci, x.ci + (len(text) + 1) * self.per_char)
        row = self.taken.setdefault(round(y, 3), [])
        if any(a < span[1] and span[0] < b for a, b in row):
            return  # it would run into a label already there
        row.append(span)
        ax.text(x.ci, y - 0.1, text, fontsize=LEASE_FONT, va="bottom")


def group_label(group: Any, most: int = 24) -> str:
    """A group as a tick label: plain ASCII text as it is; other text (spaces at its
    ends, control characters, NUL, characters a font may lack) as Python's ``ascii()``
    spells it, so that each group stays told apart; shortened to ``most`` characters."""
    text = str(group)
    if not (text.isascii() and text.isprintable() and text == text.strip()):
        text = ascii(text)
    return text if len(text) <= most else text[: most - 1] + "…"


def _group_of(events: Sequence[dict], i: int) -> Any:
    value = events[i].get("value")
    if isinstance(value, dict) and value.get("group") is not None:
        return value["group"]
    return None
