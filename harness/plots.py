"""Plots of a run, from its ``history.jsonl`` (and ``check.json``) alone.

* ``throughput.png``: successful claims (and acks, publishes) per second, each fault's
  interval shaded and labelled by kind;
* ``latency.png``: every operation's latency at its invoke time, coloured by outcome
  (ok, fail, info), with per-interval p50 and p99 lines of the ``ok`` ones;
* ``anomaly-timeline.png`` (only when the check found anomalies): the leases of the
  groups involved in the first anomalies, around them, each lease drawn as its certain
  validity window.

``python -m harness plot RUN_DIR`` is :func:`main_plot` (:func:`plot_run` and the report).
"""

from __future__ import annotations

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

from .checker import History, Lease, check, history_path
from .history import (
    Fault,
    HistoryFormatError,
    fault_intervals,
    gc_paused,
    pairs,
    read_history,
)

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
    written = [
        _save(throughput_figure(events, faults, end), root / "throughput.png"),
        _save(latency_figure(events, faults, end), root / "latency.png"),
    ]
    if not result.get("valid", True):
        fig = anomaly_timeline_figure(events, result)
        if fig is not None:
            written.append(_save(fig, root / "anomaly-timeline.png"))
    return written


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
        return 2
    except OSError as e:
        print(f"{source}: cannot read: {e.strerror or e}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    print(write_report(source.parent))
    return 0


def _load_check(root: Path) -> dict[str, Any] | None:
    path = root / "check.json"
    if not path.exists():
        return None
    try:
        result = json.loads(path.read_text())
    except ValueError:
        return None
    return result if isinstance(result, dict) and "anomalies" in result else None


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


# -- throughput -----------------------------------------------------------------------------
def _bin_width(end: float) -> float:
    """1 s, or coarser so that a long run has at most MAX_BINS bins."""
    return max(1.0, float(np.ceil(end / MAX_BINS)))


def throughput_figure(events: Sequence[dict], faults: list[Fault], end: float) -> Figure:
    """Successful claims per second over time, with the faults shaded."""
    width = _bin_width(end)
    edges = np.arange(0.0, end + width, width)
    if len(edges) < 2:
        edges = np.array([0.0, width])
    series: dict[str, list[float]] = {"claims (leases)": [], "acks": [], "publishes": []}
    for inv, comp in pairs(events):
        if comp is None or comp["type"] != "ok":
            continue
        f = inv["f"]
        if f == "claim" and comp.get("value") is not None:
            series["claims (leases)"].append(comp["time"])
        elif f == "ack":
            series["acks"].append(comp["time"])
        elif f == "publish":
            series["publishes"].append(comp["time"])
    fig, ax = plt.subplots(figsize=SIZE)
    styles = {"claims (leases)": ("tab:blue", 2.0), "acks": ("tab:green", 1.0),
              "publishes": ("tab:gray", 1.0)}  # fmt: skip
    for name, times in series.items():
        counts, _ = np.histogram(times, bins=edges)
        colour, lw = styles[name]
        ax.step(edges[:-1], counts / width, where="post", color=colour, lw=lw, label=name)
    _shade_faults(ax, faults, end, labels=True)
    ax.set_xlim(0, max(end, width))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("operations per second" + (f" (bins of {width:g} s)" if width > 1 else ""))
    ax.set_title("Throughput: successful claims per second, faults shaded")
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    return fig


def _shade_faults(ax: Axes, faults: list[Fault], end: float, labels: bool) -> None:
    kinds = sorted({f.kind for f in faults})
    cmap = plt.get_cmap("Pastel1" if len(kinds) <= 9 else "tab20")
    colours = {k: cmap(i % cmap.N) for i, k in enumerate(kinds)}
    seen: set[str] = set()
    for i, fault in enumerate(faults):
        stop = end if fault.end is None else fault.end
        stop = max(stop, fault.start + end / 500)  # instantaneous faults stay visible
        ax.axvspan(
            fault.start,
            stop,
            color=colours[fault.kind],
            alpha=0.6,
            lw=0,
            zorder=0,
            label=None if fault.kind in seen else f"fault: {fault.kind}",
        )
        seen.add(fault.kind)
        if labels:
            ax.text(
                fault.start,
                1.0 - 0.06 * (i % 3),
                f" {fault.label}",
                transform=ax.get_xaxis_transform(),
                fontsize="x-small",
                va="top",
                ha="left",
                clip_on=True,
            )


# -- latency --------------------------------------------------------------------------------
def latency_figure(events: Sequence[dict], faults: list[Fault], end: float) -> Figure:
    """Latency of every completed operation at its invoke time, by outcome, p50/p99 lines."""
    points: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in OUTCOME_COLOURS}
    for inv, comp in pairs(events):
        if comp is None:
            continue
        xs, ys = points[comp["type"]]
        xs.append(inv["time"])
        ys.append(comp["time"] - inv["time"])
    fig, ax = plt.subplots(figsize=SIZE)
    _shade_faults(ax, faults, end, labels=False)
    rng = np.random.default_rng(0)
    floor = 1e-5
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
        width = _bin_width(end) * 2
        centres, p50, p99 = _rolling_percentiles(np.asarray(xs), np.asarray(ys), width)
        total50, total99 = np.percentile(ys, [50, 99])
        ax.plot(centres, np.maximum(p50, floor), color="black", lw=1.2,
                label=f"p50 of ok per {width:g} s (overall {total50 * 1000:.1f} ms)")  # fmt: skip
        ax.plot(centres, np.maximum(p99, floor), color="black", lw=1.2, ls="--",
                label=f"p99 of ok per {width:g} s (overall {total99 * 1000:.1f} ms)")  # fmt: skip
    every = [y for _, ys in points.values() for y in ys]
    if every and max(every) <= min(every) * 1.01:  # one latency only: give it some room
        y = max(every[0], floor)
        ax.set_ylim(y / 3, y * 3)
    ax.set_yscale("log")
    ax.set_xlim(0, max(end, 1.0))
    ax.set_xlabel("invoke time since start (s)")
    ax.set_ylabel("latency (s)")
    ax.set_title("Latency by outcome (faults shaded)")
    ax.legend(loc="upper right", fontsize="small", markerscale=1.5)
    fig.tight_layout()
    return fig


def _rolling_percentiles(x: np.ndarray, y: np.ndarray, width: float) -> tuple[np.ndarray, ...]:
    """p50 and p99 of ``y`` in consecutive bins of ``width`` over ``x`` (empty bins: NaN)."""
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    edges = np.arange(0.0, x[-1] + width, width)
    cuts = np.searchsorted(x, edges)
    centres, p50, p99 = [], [], []
    for a, b, left in zip(cuts[:-1], cuts[1:], edges[:-1], strict=True):
        centres.append(left + width / 2)
        if b > a:
            lo, hi = np.percentile(y[a:b], [50, 99])
        else:
            lo = hi = np.nan
        p50.append(lo)
        p99.append(hi)
    return np.asarray(centres), np.asarray(p50), np.asarray(p99)


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
    history = History(events)
    leases = [x for x in history.leases if x.group in groups]
    span = max(times) - min(times)
    pad = max(1.0, 0.25 * span, *(x.stretch - x.ci for x in leases[:1000]))
    lo, hi = max(0.0, min(times) - pad), max(times) + pad
    rows = {g: k for k, g in enumerate(groups)}
    fig, ax = plt.subplots(figsize=(SIZE[0], 1.5 + 0.7 * len(groups)))
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
    for k, (name, ex) in enumerate(examples):
        t = max(events[i]["time"] for i in ex if 0 <= i < n)
        ax.axvline(t, color="red", lw=1, ls=":")
        ax.text(t, 1.0 - 0.05 * k, f" {name} {ex}", color="red", fontsize="x-small",
                transform=ax.get_xaxis_transform(), va="top")  # fmt: skip
    ax.set_yticks(range(len(groups)), [str(g) for g in groups])
    ax.set_ylim(len(groups) - 0.3, -0.6)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("time since start (s)")
    ax.set_title(
        "Leases around the first anomalies: solid = certain validity window, "
        "pale = claim in flight, x = ack/nack invoked (dashed: after the window), ^ = publish ok",
        fontsize="small",
    )
    fig.tight_layout()
    return fig


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
