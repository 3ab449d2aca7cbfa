"""A run folder's plots: which are drawn, from what, and ``python -m harness plot``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from ..errors import EXIT_HARNESS, EXIT_OK
from ..history import HistoryFormatError, fault_intervals, gc_paused, read_history
from ..judgement import failure_of, judge
from ..store import ANOMALY_TIMELINE, LATENCY, THROUGHPUT, RunStore
from .latency import latency_figure
from .layout import DPI
from .throughput import throughput_figure
from .timeline import anomaly_timeline_figure


def plot_run(run_dir: str | Path, run: dict[str, Any] | None = None) -> list[Path]:
    """Write the run's plots into ``run_dir``; returns the paths written.

    Reads ``run_dir/history.jsonl`` (raises :class:`~harness.history.HistoryFormatError`
    if it is unreadable) and ``check.json`` if present (else judges the history alone:
    the replicas do not show in the plots). ``run`` is the run's record (the runner
    passes it; else ``run.json``'s is read) for the drain's span.
    """
    store = RunStore.holding(run_dir)
    run = store.run_info() if run is None else run
    with gc_paused():
        events = read_history(store.history)
        # a failed run's anomalies that need a finished run are not drawn (not judged)
        result = judge(events, result=store.stored_check(), failed=failure_of(store, run)).result
        result = result or {}
    faults = fault_intervals(events)
    end = events[-1]["time"] if events else 1.0
    recovery = recoveries(result)
    drain = drain_span(run)
    written = [
        _save(throughput_figure(events, faults, end, recovery, drain), store.path(THROUGHPUT)),
        _save(latency_figure(events, faults, end, drain), store.path(LATENCY)),
    ]
    if not result.get("valid", True):
        fig = anomaly_timeline_figure(events, result)
        if fig is not None:
            written.append(_save(fig, store.path(ANOMALY_TIMELINE)))
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
    """``python -m harness plot RUN_DIR``: plots, report.md and report.html; prints what it
    wrote.

    Returns 0, or 2 when the run folder has no readable history (the message names the
    file, the line and what is wrong; report.md still says so).
    """
    source = RunStore.holding(run_dir).history
    try:
        written = plot_run(source.parent)
    except HistoryFormatError as e:
        print(f"{source}:{e.line}: {e.reason}", file=sys.stderr)
        if source.is_file():
            _reports(source.parent)
        return EXIT_HARNESS
    except OSError as e:
        print(f"{source}: cannot read: {e.strerror or e}", file=sys.stderr)
        return EXIT_HARNESS
    for path in written:
        print(path)
    _reports(source.parent)
    return EXIT_OK


def _reports(run_dir: Path) -> None:
    """Write report.md and report.html (the run judged once for both); print their paths."""
    from ..html import write_html
    from ..report import report_parts, write_report

    parts = report_parts(run_dir)
    print(write_report(run_dir, parts=parts))
    print(write_html(run_dir, parts=parts))


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
