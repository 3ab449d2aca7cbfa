"""The anomalies of dead-lettering, as docs/history-format.md defines them.

A queue with ``max_deliveries`` moves a message out when a claim reaches it after that
many claims. The workload records it on the claim that did it (``dead_lettered`` in the
claim's ``ok`` value) and reads the whole dead-letter queue once after the drain
(``read-dead-letters``; see :mod:`harness.workload.deadletters`);
:class:`~harness.checker.model.HistoryModel` turns both into acknowledgements and
``dead`` entries. The three anomalies (their finders registered in :mod:`.registry`):

* ``early-dead-letter``: dead-lettered although fewer than ``max_deliveries`` claims
  can have leased it: its ``ok`` leases plus every claim that may have delivered unseen
  (unknown outcome, or ``ok`` after at least its visibility) invoked before the
  dead-lettering returned are still fewer;
* ``over-delivered``: one stored copy (one ``msg`` and ``seq``) leased (``ok``) more
  than ``max_deliveries`` times (the queue counts deliveries per stored copy);
* ``dead-letter-while-leased``: a claim dead-lettered a message inside another
  process's certain window on it (fenced like an ack: a live lease is never moved).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from .model import HistoryModel, Lease


def find_early(h: HistoryModel) -> list[list[int]]:
    """Dead-lettered before ``max_deliveries`` claims can have leased it."""
    limit = h.max_deliveries
    if limit is None:
        return []
    if not h.dead:
        return []
    found = []
    leases = _leases_by_msg(h)
    for d in h.dead:
        before = [x for x in leases.get(d.msg, ()) if x.ci < d.co]
        unknown = bisect_left(h.unseen_claims, d.co)
        if len(before) + unknown < limit:
            found.append([x for y in before for x in (y.i_inv, y.i_ok)] + [d.i_inv, d.i_ok])
    return found


def find_over_delivered(h: HistoryModel) -> list[list[int]]:
    """A stored copy of a message leased more than ``max_deliveries`` times."""
    limit = h.max_deliveries
    if limit is None:
        return []
    found = []
    for leases in _by_copy(h).values():
        if len(leases) > limit:
            leases.sort(key=lambda x: x.co)
            found.append([i for x in leases[: limit + 1] for i in (x.i_inv, x.i_ok)])
    return found


def find_while_leased(h: HistoryModel) -> list[list[int]]:
    """A claim dead-lettered a message inside another process's certain window on it."""
    if not h.dead:
        return []
    found = []
    leases = _leases_by_msg(h)
    for d in h.dead:
        if d.process is None:
            continue
        for x in leases.get(d.msg, ()):
            if x.process != d.process and d.ci >= x.co and d.co <= x.end:
                found.append([x.i_inv, x.i_ok, d.i_inv, d.i_ok])
    return found


def _by_copy(h: HistoryModel) -> dict[tuple[Any, Any], list[Lease]]:
    """The leases of each stored copy: of one ``msg`` and one ``seq`` (or none)."""
    out: dict[tuple[Any, Any], list[Lease]] = {}
    for x in h.leases:
        out.setdefault((x.msg, x.seq), []).append(x)
    return out


def _leases_by_msg(h: HistoryModel) -> dict[Any, list[Lease]]:
    out: dict[Any, list[Lease]] = {}
    for x in h.leases:
        out.setdefault(x.msg, []).append(x)
    return out
