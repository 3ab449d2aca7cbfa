"""One history checked: the model built, every finder run, the statistics added."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import divergence
from ..history import gc_paused
from .model import HistoryModel
from .registry import ANOMALIES, FINDERS
from .statistics import statistics

MAX_EXAMPLES = 10


def check(events: Sequence[dict], replicas: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check a history (a list of events as :func:`read_history` returns); check.json shape.

    ``replicas`` is the run's record of every node's tables (``replicas.json``): a row
    not the same on every node is a ``replica-divergence``; without it that count is 0
    and ``stats["replicas"]`` says the replicas were not compared.

    Raises :class:`HistoryFormatError` when operations do not pair up or a value lacks
    what a check needs, :class:`~harness.divergence.SnapshotFormatError` for a
    malformed ``replicas``.
    """
    with gc_paused():
        h = HistoryModel(events)
        anomalies = {}
        for name, finder in FINDERS.items():
            found = finder(h)
            found.sort(key=lambda ex: (max(ex), ex))
            anomalies[name] = {"count": len(found), "examples": found[:MAX_EXAMPLES]}
        stats = statistics(h, events)
    anomalies[divergence.NAME], stats["replicas"] = divergence.compare(replicas)
    anomalies = {name: anomalies[name] for name in ANOMALIES}
    valid = all(a["count"] == 0 for a in anomalies.values())
    return {"valid": valid, "anomalies": anomalies, "stats": stats}
