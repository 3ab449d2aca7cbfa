"""Plots of a run, from its ``history.jsonl`` (and ``check.json``) alone.

* ``throughput.png``: successful claims (and acks, publishes) per second, each fault's
  interval shaded and labelled by kind;
* ``latency.png``: every operation's latency (ms, log scale) at its invoke time, coloured
  by outcome (ok, fail, info), with per-interval p50 and p99 lines of the ``ok`` ones;
* ``anomaly-timeline.png`` (only when the check found anomalies): the leases of the
  groups involved in the first anomalies, around them, each lease drawn as its certain
  validity window; the anomalies are labelled in a strip above the leases.

Each plot's title is its caption in report.md (:data:`harness.report.PLOTS`). When the
run folder has the runner's ``run.json``, both plots mark the drain: the claims and acks
after the workload stopped that empty the queue before the check (from the phase
timings; the history's time 0 is the workload's start).

``python -m harness plot RUN_DIR`` is :func:`main_plot` (:func:`plot_run` and the report).
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import LogFormatter

from .checker import HistoryModel, Lease, check, history_path
from .errors import EXIT_HARNESS, EXIT_OK
from .history import (
    Fault,
    HistoryFormatError,
    fault_intervals,
    gc_paused,
    pairs,
    read_history,
)
from .report import PLOTS

TITLES = dict(PLOTS)

SIZE = (12.0, 5.0)
DPI = 100
MAX_BINS = 600
MAX_POINTS = 60_000  # ok points drawn in the latency plot (a uniform sample beyond that)
OUTCOME_COLOURS = {"ok": "tab:green", "fail": "tab:orange", "info": "tab:red"}
OUTCOME_STYLES: dict[str, dict[str, Any]] = {  # the rare outcomes drawn bigger, on top
    "ok": {"s": 4, "alpha": 0.5, "lw": 0, "marker": "o", "zorder": 2},
    "fail": {"s": 22, "alpha": 0.9, "lw": 1.2, "marker": "^", "zorder": 3},
    "info": {"s": 26, "alpha": 0.9, "lw": 1.5, "marker": "x", "zorder": 4},
}
TIMELINE_GROUPS = 8


def plot_run(run_dir: str | Path) -> list[Path]:
    """Write the run's plots into ``run_dir``; returns the paths written.

    Reads ``run_dir/history.jsonl`` (raises :class:`~harness.history.HistoryFormatError`
    if it is unreadable) and ``check.json`` if present (else checks the history).
    """
    root = Path(run_dir)
    source = history_path(root)
    root = source.parent
    with gc_paused():
        events = read_history(source)
        result = _load_check(root) or check(events)
    faults = fault_intervals(events)
    end = events[-1]["time"] if events else 1.0
    recovery = recoveries(result)
    drain = drain_span(_load_json(root / "run.json"))
    written = [
        _save(throughput_figure(events, faults, end, recovery, drain), root / "throughput.png"),
        _save(latency_figure(events, faults, end, drain), root / "latency.png"),
    ]
    if not result.get("valid", True):
        fig = anomaly_timeline_figure(events, result)
        if fig is not None:
            written.append(_save(fig, root / "anomaly-timeline.png"))
    return written


def recoveries(result: dict[str, Any]) -> dict[int, float | None]:
    """Each fault's recovery (seconds from its start to the next lease, None: no lease
    came), by the index of its start event, from a check result's availability."""
    rows = (result.get("stats") or {}).get("availability") or []
    return {
        a["index"]: a.get("recovery")
        for a in rows
        if isinstance(a, dict) and isinstance(a.get("index"), int)
    }


def drain_span(run: Any) -> tuple[float, float] | None:
    """When the drain ran, in the history's time, from a run.json's phase timings: it
    starts when the workload stops (after the ``workload`` and ``heal`` phases, during
    which the workload still runs) and lasts the ``drain`` phase. None without them."""
    phases = run.get("phases") if isinstance(run, dict) else None
    if not isinstance(phases, dict):
        return None
    try:
        start = float(phases["workload"]) + float(phases["heal"])
        return start, start + float(phases["drain"])
    except (KeyError, TypeError, ValueError):
        return None


def main_plot(run_dir: str | Path) -> int:
    """``python -m harness plot RUN_DIR``: plots and report.md; prints what it wrote.

    Returns 0, or 2 when the run folder has no readable history (the message names the
    file, the line and what is wrong; report.md still says so).
    """
    from .report import write_report

    source = history_path(run_dir)
    try:
        written = plot_run(source.parent)
    except HistoryFormatError as e:
        print(f"{source}:{e.line}: {e.reason}", file=sys.stderr)
        if source.is_file():
            print(write_report(source.parent))
        return EXIT_HARNESS
    except OSError as e:
        print(f"{source}: cannot read: {e.strerror or e}", file=sys.stderr)
        return EXIT_HARNESS
    for path in written:
        print(path)
    print(write_report(source.parent))
    return EXIT_OK


def _load_check(root: Path) -> dict[str, Any] | None:
    result = _load_json(root / "check.json")
    return result if isinstance(result, dict) and "anomalies" in result else None


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


# -- layout shared by both plots ------------------------------------------------------------
LANE_HEIGHT = 0.24  # inches per fault lane above the data
LABEL_FONT = 7.5  # points, fault labels in the lanes
LEGEND_WIDTH = 2.3  # inches right of the data for the legend


def _bin_edges(end: float, start: float = 0.0) -> tuple[np.ndarray, float]:
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


def _seconds_per_char(span: float, axes_inches: float) -> float:
    """Seconds of an axes ``axes_inches`` wide spanning ``span`` s that one character of
    a label at LABEL_FONT takes (an estimate)."""
    return LABEL_FONT * 0.62 / 72 * span / max(axes_inches, 1.0)


def _lanes(spans: Sequence[tuple[float, float]]) -> list[int]:
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


def _fault_lanes(
    faults: list[Fault], labels: list[str], end: float, axes_inches: float
) -> list[int]:
    """A lane for each fault such that no two faults' bars or labels overlap in a lane.

    A label's extent is estimated from its length in characters at LABEL_FONT on an axes
    ``axes_inches`` wide spanning ``[0, end]``.
    """
    per_char = _seconds_per_char(end, axes_inches)
    spans = []
    for fault, label in zip(faults, labels, strict=True):
        stop = end if fault.end is None else fault.end
        spans.append((fault.start, max(stop, fault.start + (len(label) + 2) * per_char)))
    return _lanes(spans)


def _figure(n_lanes: int, height: float = SIZE[1]) -> tuple[Figure, Axes | None, Axes]:
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


def _draw_drain(fig_axes: tuple[Axes | None, Axes], drain: tuple[float, float] | None) -> None:
    """Mark the drain: a line where the workload stopped and the drain's span in grey."""
    if drain is None:
        return
    lane_ax, ax = fig_axes
    start, stop = drain
    label = f"drain after the workload\n({start:.2f}-{stop:.2f} s)"
    ax.axvspan(start, stop, color="0.5", alpha=0.25, lw=0, zorder=0, label=label)
    for a in (ax, lane_ax):
        if a is not None:
            a.axvline(start, color="0.35", lw=1.0, ls="-.", zorder=1)


def _fault_colours(faults: list[Fault]) -> dict[str, Any]:
    kinds = sorted({f.kind for f in faults})
    cmap = plt.get_cmap("Pastel1" if len(kinds) <= 9 else "tab20")
    return {k: cmap(i % cmap.N) for i, k in enumerate(kinds)}


def _draw_faults(
    fig_axes: tuple[Axes | None, Axes],
    faults: list[Fault],
    end: float,
    recovery: dict[int, float | None] | None = None,
) -> None:
    """Shade each fault on the data axes; in the lane strip, a bar per fault with its
    label (and its recovery time, when given) in its own lane."""
    lane_ax, ax = fig_axes
    colours = _fault_colours(faults)
    seen: set[str] = set()
    for fault in faults:
        stop = end if fault.end is None else fault.end
        stop = max(stop, fault.start + end / 500)  # instantaneous faults stay visible
        ax.axvspan(fault.start, stop, color=colours[fault.kind], alpha=0.45, lw=0, zorder=0,
                   label=None if fault.kind in seen else f"fault: {fault.kind}")  # fmt: skip
        seen.add(fault.kind)
    if lane_ax is None:
        return
    labels = [_fault_label(f, recovery) for f in faults]
    lanes = _fault_lanes(faults, labels, end, SIZE[0] - LEGEND_WIDTH - 1.0)
    for fault, label, lane in zip(faults, labels, lanes, strict=True):
        stop = end if fault.end is None else fault.end
        stop = max(stop, fault.start + end / 500)
        lane_ax.barh(lane, stop - fault.start, left=fault.start, height=0.8,
                     color=colours[fault.kind], alpha=0.9, lw=0)  # fmt: skip
        if fault.end is None:  # never ended: an arrow past the end of the history
            lane_ax.plot(end, lane, marker=">", color="gray", ms=4, clip_on=False)
        rec = None if recovery is None else recovery.get(fault.start_index)
        if rec is not None:  # from the fault's start to the next lease, under its label
            lane_ax.plot([fault.start, fault.start + rec], [lane + 0.33] * 2, color="black",
                         lw=2, solid_capstyle="butt")  # fmt: skip
        lane_ax.text(fault.start, lane, f" {label}", fontsize=LABEL_FONT, va="center",
                     ha="left", clip_on=False)  # fmt: skip


def _fault_label(fault: Fault, recovery: dict[int, float | None] | None) -> str:
    if recovery is None or fault.start_index not in recovery:
        return fault.label
    rec = recovery[fault.start_index]
    return f"{fault.label}: " + ("no lease after it" if rec is None else f"next lease +{rec:.2f} s")


def _legend_outside(ax: Axes, extra: Sequence[Any] = ()) -> None:
    handles, labels = ax.get_legend_handles_labels()
    handles += [h for h in extra]
    labels += [h.get_label() for h in extra]
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0, fontsize="small", markerscale=1.5)  # fmt: skip


# -- throughput -----------------------------------------------------------------------------
SERIES = {  # name -> (colour, line width)
    "claims (leases)": ("tab:blue", 2.0),
    "acks": ("tab:green", 1.0),
    "publishes": ("tab:gray", 1.0),
}


def throughput_figure(
    events: Sequence[dict],
    faults: list[Fault],
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
        elif f == "ack":
            series["acks"].append(comp["time"])
        elif f == "publish":
            series["publishes"].append(comp["time"])
    probe = [_fault_label(f, recovery) for f in faults]
    n_lanes = max(_fault_lanes(faults, probe, end, SIZE[0] - LEGEND_WIDTH - 1.0), default=-1) + 1
    fig, lane_ax, ax = _figure(n_lanes)
    edges, width = _bin_edges(end, 0.0 if began >= end else began)
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
    _draw_faults((lane_ax, ax), faults, end, recovery)
    _draw_drain((lane_ax, ax), drain)
    if recovery and any(r is not None for r in recovery.values()):
        extra.append(Line2D([], [], color="black", lw=2, solid_capstyle="butt",
                            label="a fault's start to the next lease"))  # fmt: skip
    ax.set_xlim(0, max(end, width))
    ax.set_ylim(0, top)
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("operations per second" + (f" (bins of {width:g} s)" if width > 1 else ""))
    (lane_ax or ax).set_title(TITLES["throughput.png"])
    _legend_outside(ax, extra)
    return fig


# -- latency --------------------------------------------------------------------------------
class _Milliseconds(LogFormatter):
    """Log-axis tick labels as plain milliseconds (0.1, 1, 10, 1,000), on the ticks
    matplotlib's own log formatter would label."""

    def __call__(self, x: float, pos: int | None = None) -> str:
        if not super().__call__(x, pos):
            return ""
        return f"{x:,.0f}" if x >= 1 else f"{x:.3g}"


def latency_figure(
    events: Sequence[dict],
    faults: list[Fault],
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
    n_lanes = max(_fault_lanes(faults, [f.label for f in faults], end,
                               SIZE[0] - LEGEND_WIDTH - 1.0), default=-1) + 1  # fmt: skip
    fig, lane_ax, ax = _figure(n_lanes)
    _draw_faults((lane_ax, ax), faults, end)
    _draw_drain((lane_ax, ax), drain)
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
        edges, width = _bin_edges(max(end, max(xs)), min(xs))
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
    (lane_ax or ax).set_title(TITLES["latency.png"])
    _legend_outside(ax)
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
    fig, lane_ax, ax = _figure(max((m[3] for m in marks), default=-1) + 1,
                               1.5 + 0.7 * len(groups))  # fmt: skip
    assert lane_ax is not None  # every example has a time: at least one lane
    lane_ax.set_ylabel("anomalies", rotation=0, ha="right", va="center", fontsize="small")
    processes = sorted({x.process for x in leases})
    cmap = plt.get_cmap("tab10")
    colour = {p: cmap(k % 10) for k, p in enumerate(processes)}
    lanes: dict[Any, list[float]] = {g: [] for g in groups}
    for x in sorted(leases, key=lambda x: x.ci):
        last = max(x.end, x.cut if x.cut < float("inf") else x.end)
        if last < lo or x.ci > hi:
            continue
        free = lanes[x.group]
        lane = next((k for k, busy in enumerate(free) if busy < x.ci), len(free))
        if lane == len(free):
            free.append(last)
        free[lane] = last
        _draw_lease(ax, x, rows[x.group] + 0.22 * (lane % 3), colour[x.process])
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
    ax.set_yticks(range(len(groups)), [str(g) for g in groups])
    ax.set_ylim(len(groups) - 0.3, -0.6)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("time since start (s)")
    lane_ax.set_title(TITLES["anomaly-timeline.png"])
    _legend_outside(ax, TIMELINE_KEY)
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
    per_char = _seconds_per_char(hi - lo, SIZE[0] - LEGEND_WIDTH - 1.0)
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
    lanes = _lanes([(a, a + (len(text) + 1) * per_char) for a, _, text, _ in found])
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
    ax.text(x.ci, y - 0.1, f"{x.msg} p{x.process}", fontsize="xx-small", va="bottom")


def _group_of(events: Sequence[dict], i: int) -> Any:
    value = events[i].get("value")
    if isinstance(value, dict) and value.get("group") is not None:
        return value["group"]
    return None
