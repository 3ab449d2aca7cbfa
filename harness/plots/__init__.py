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

- :mod:`.run`        which plots a run folder gets, and ``python -m harness plot``
- :mod:`.layout`     what they share: sizes, time bins, fault lanes, the figure and legend
- :mod:`.throughput`, :mod:`.latency`, :mod:`.timeline`: one figure each
"""

import matplotlib

matplotlib.use("Agg")  # before any module of the package imports pyplot

from .run import main_plot, plot_run

__all__ = ["main_plot", "plot_run"]
