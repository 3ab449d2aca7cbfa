"""A run folder's plots: which are drawn, from what, and ``python -m harness plot``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from ..checker import check, history_path
from ..errors import EXIT_HARNESS, EXIT_OK
from ..history import HistoryFormatError, fault_intervals, gc_paused, read_history
from .latency import latency_figure
from .layout import DPI
from .throughput import throughput_figure
from .timeline import anomaly_timeline_figure


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
    from ..report import write_report

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
