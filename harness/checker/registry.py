"""Every anomaly the checker reports, registered once: its name and its finder.

:data:`REGISTRY` is the one list: its order is the order of ``anomalies`` in check.json
(docs/history-format.md defines each), and :data:`ANOMALIES` and :data:`FINDERS` are
read off it. An anomaly found elsewhere than in the history has no finder here:
``replica-divergence`` comes from the replicas' tables (:mod:`harness.divergence`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import divergence
from . import deadletters, finders
from .model import HistoryModel

#: A finder: the examples (lists of event indices) of every instance of its anomaly.
Finder = Callable[[HistoryModel], list[list[int]]]


@dataclass(frozen=True)
class Anomaly:
    """One kind of anomaly: its name in check.json and the finder that finds it in a
    history's model (None for one judged from elsewhere than the history)."""

    name: str
    finder: Finder | None


REGISTRY: tuple[Anomaly, ...] = (
    Anomaly("lost", finders.find_lost),
    Anomaly("duplicated", finders.find_duplicated),
    Anomaly("duplicate-group-lease", finders.find_duplicate_group_leases),
    Anomaly("fifo-violation", finders.find_fifo_violations),
    Anomaly("delivered-after-ack", finders.find_delivered_after_ack),
    Anomaly("unexpected", finders.find_unexpected),
    Anomaly("corrupted", finders.find_corrupted),
    Anomaly("stale-ack-accepted", finders.find_stale_acks),
    Anomaly("early-delivery", finders.find_early_deliveries),
    Anomaly("early-dead-letter", deadletters.find_early),
    Anomaly("over-delivered", deadletters.find_over_delivered),
    Anomaly("dead-letter-while-leased", deadletters.find_while_leased),
    Anomaly(divergence.NAME, None),  # from the replicas' tables (replicas.json)
)

#: every anomaly's name, in check.json's order
ANOMALIES: tuple[str, ...] = tuple(a.name for a in REGISTRY)
#: the anomalies found in the history: name -> finder, in check.json's order
FINDERS: dict[str, Finder] = {a.name: a.finder for a in REGISTRY if a.finder is not None}
