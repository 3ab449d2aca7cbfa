"""The anomaly finders: each returns the examples (lists of event indices) of every
instance of its anomaly in a :class:`~harness.checker.model.HistoryModel`. Each is
registered, under its anomaly's name, in :mod:`.registry`.

Every finder sorts once and sweeps (or binary-searches), so a history of n events is
checked in O(n log n).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from .model import CLOCK_TOLERANCE, INF, HistoryModel, Lease
from .records import Sighting

_first = itemgetter(0)
_ci, _co, _time = attrgetter("ci"), attrgetter("co"), attrgetter("time")


def find_lost(h: HistoryModel) -> list[list[int]]:
    """Published ``ok`` and never acknowledged by an ``ok``/``info`` ack or dead-letter."""
    settled = h.settled
    return [[p.i_inv, p.i_ok] for msg, p in h.pub_ok.items() if msg not in settled]


def find_duplicated(h: HistoryModel) -> list[list[int]]:
    """A published ``msg`` seen stored as more copies (distinct ``seq``, leased or
    dead-lettered) than its publishes that may have taken effect: at least two.

    One pass notes each message's first leased ``seq`` and the messages leased under
    another too; only those, and the dead-lettered ones, are looked at again.
    """
    first_seq: dict[Any, Any] = {}
    several = set()
    for x in h.leases:
        s = x.seq
        if s is not None and first_seq.setdefault(x.msg, s) != s:
            several.add(x.msg)
    copies: dict[Any, dict[Any, Sighting]] = {}
    for msg, dead in h.dead_copies.items():
        copies[msg] = dict(dead)
    for x in h.leases:
        if x.seq is not None and (x.msg in several or x.msg in copies):
            mine = copies.setdefault(x.msg, {})
            seen = mine.get(x.seq)
            if seen is None or x.i_ok < seen.i_ok:
                mine[x.seq] = Sighting(x.i_inv, x.i_ok)
    found = []
    tries, published = h.pub_tries, h.pub_inv
    for msg, mine in copies.items():
        n = len(mine)
        if n < 2 or n <= tries[msg] or msg not in published:
            continue  # one copy; as many publishes as copies; or never published
        shown = [published[msg].index]
        for seen in sorted(mine.values(), key=_first_seen):
            shown += [i for i in seen if i not in shown]
        found.append(shown)
    return found


def _first_seen(s: Sighting) -> tuple[int, int]:
    return s.i_ok, s.i_inv


def find_unexpected(h: HistoryModel) -> list[list[int]]:
    """A claim returned a ``msg`` that no publish ever invoked."""
    published = h.pub_inv
    return [[x.i_inv, x.i_ok] for x in h.leases if x.msg not in published]


def find_corrupted(h: HistoryModel) -> list[list[int]]:
    """A lease whose group (as text) is no publish's group of its ``msg``, or whose body
    digest is none of the digests its publishes recorded (when both sides have one)."""
    forms, first = h.pub_forms, h.pub_inv
    found = []
    for x in h.leases:
        published = forms.get(x.msg)
        if published is None:
            continue  # unexpected, not comparable
        group = x.group if type(x.group) is str else str(x.group)
        digests = {p.digest for p in published if p.digest is not None}
        if all(p.group != group for p in published) or (
            x.digest is not None and digests and x.digest not in digests
        ):
            found.append([first[x.msg].index, x.i_inv, x.i_ok])
    return found


def find_delivered_after_ack(h: HistoryModel) -> list[list[int]]:
    """A claim invoked after an ack of its ``msg`` had returned ``ok``: an ack of the same
    stored copy (an ack naming another ``seq`` than the lease is of another copy, which
    ``duplicated`` reports)."""
    acked, per_seq = h.acked, h.acked_seqs
    found = []
    for x in h.leases:
        a = acked.get(x.msg)
        if a is None or x.ci <= a.time:
            continue
        if x.seq is not None:  # the earliest ack of this copy, or of one not named
            seqs = per_seq[x.msg]
            a = min((seqs[s] for s in (x.seq, None) if s in seqs), key=_time, default=None)
            if a is None or x.ci <= a.time:
                continue
        found.append([a.i_inv, a.i_ok, x.i_inv, x.i_ok])
    return found


def find_duplicate_group_leases(h: HistoryModel) -> list[list[int]]:
    """A claim took effect inside another lease's certain window on the same group.

    Per group, sweep the claims by invoke time while adding, in ok-time order, every
    lease that completed before; the lease with the latest window end is the only one
    that can contain the claim's ok (the second best stands in when that is itself).
    """
    found = []
    for leases in _by(h.leases, lambda x: x.group).values():
        if len(leases) < 2:
            continue
        found += _same_batch(leases)
        by_ok = sorted(leases, key=_co)
        best: Lease | None = None
        second: Lease | None = None
        k = 0
        for x in sorted(leases, key=_ci):
            while k < len(by_ok) and by_ok[k].co <= x.ci:
                y = by_ok[k]
                k += 1
                end = y.end
                if best is None or end > best.end:
                    best, second = y, best
                elif second is None or end > second.end:
                    second = y
            other = second if best is x else best
            if other is not None and other.end >= x.co:
                found.append([other.i_inv, other.i_ok, x.i_inv, x.i_ok])
    return found


def _same_batch(leases: list[Lease]) -> list[list[int]]:
    """A second (third …) lease of the group handed out by one batch claim."""
    seen: set[int] = set()
    found = []
    for x in leases:
        if x.i_ok in seen:
            found.append([x.i_inv, x.i_ok])
        seen.add(x.i_ok)
    return found


def find_fifo_violations(h: HistoryModel) -> list[list[int]]:
    """``b`` leased while an earlier-published ``a`` of its group was certainly unacked.

    Per group, one sweep over the messages in order of first publish invoke (as ``b``)
    against those in order of first ``ok`` publish (as ``a``) gives each ``b`` the latest
    "first possible ack invoke" (infinite if none) of any ``a`` published before it; a
    lease of ``b`` violates FIFO when that reaches the lease's claim ok.
    """
    settled, pub_ok, pub_group = h.settled, h.pub_ok, h.pub_group
    # per group: as a, (first publish ok, first possible ack invoke, msg); as b, (first
    # publish invoke, msg); plain tuples, sorted by their first item
    groups: dict[Any, tuple[list[tuple[float, float, Any]], list[tuple[float, Any]]]] = {}
    for msg, first in h.pub_inv.items():
        as_a, as_b = groups.setdefault(pub_group[msg], ([], []))
        as_b.append((first.time, msg))
        done = pub_ok.get(msg)
        if done is not None:
            s = settled.get(msg)
            as_a.append((done.time, INF if s is None else s.time, msg))
    worst: dict[Any, _Blocker] = {}  # b -> the a whose first possible ack is the latest
    for as_a, as_b in groups.values():
        if not as_a:
            continue
        as_a.sort(key=_first)
        as_b.sort(key=_first)
        k, n, running = 0, len(as_a), _Blocker(-INF, None)
        for invoked, msg in as_b:
            while k < n:
                published, first_ack, a = as_a[k]
                if published >= invoked:
                    break
                if first_ack > running.first_ack:
                    running = _Blocker(first_ack, a)
                k += 1
            if running.msg is not None:
                worst[msg] = running
    found = []
    for x in h.leases:
        w = worst.get(x.msg)
        if w is not None and w.first_ack >= x.co:
            a_ok = pub_ok[w.msg]
            found.append([a_ok.i_inv, a_ok.i_ok, h.pub_inv[x.msg].index, x.i_inv, x.i_ok])
    return found


class _Blocker(NamedTuple):
    """The ``a`` a ``b`` waits for longest: its first possible ack invoke, its msg."""

    first_ack: float
    msg: Any


def find_stale_acks(h: HistoryModel) -> list[list[int]]:
    """An ack/nack/dead-letter returned ``ok`` after its lease expired and another process
    leased the msg.

    Per message, leases sorted by claim invoke carry suffix minima of claim-ok time (the
    best two from distinct processes), so each ack asks "did another process's claim
    invoked at or after my expiry complete by my invoke?" with one binary search.
    """
    found = []
    for leases in _by(h.leases, lambda x: (x.msg, x.seq)).values():
        if len(leases) < 2 or not any(x.releases for x in leases):
            continue
        leases.sort(key=_ci)
        starts = [x.ci for x in leases]
        suffix: list[tuple[Lease | None, Lease | None]] = [(None, None)] * (len(leases) + 1)
        for i in range(len(leases) - 1, -1, -1):
            suffix[i] = _best_two(leases[i], *suffix[i + 1])
        for x in leases:
            for r in x.releases:
                best, second = suffix[bisect_left(starts, x.expiry)]
                other = second if best is not None and best.process == x.process else best
                if other is not None and other.co <= r.time:
                    found.append([x.i_inv, x.i_ok, other.i_inv, other.i_ok, r.i_inv, r.i_ok])
    return found


def find_early_deliveries(h: HistoryModel) -> list[list[int]]:
    """A delayed message leased certainly before its publish's invoke plus its delay.

    The queue stamps the publish no earlier than its invoke and the claim no later than
    its ok, on clocks that may disagree by :data:`CLOCK_TOLERANCE`: a lease is early only
    when its claim returned more than that before the earliest publish's invoke + delay.
    """
    found = []
    delayed, ready = h.delayed, h.ready
    for x in h.leases:
        if x.msg in delayed:
            due = ready[x.msg]
            if x.co + CLOCK_TOLERANCE < due.time:
                found.append([due.index, x.i_inv, x.i_ok])
    return found


def _best_two(x: Lease, best: Lease | None, second: Lease | None) -> tuple:
    """Earliest-ok lease and earliest-ok lease of a different process, given x joins."""
    if best is None or x.co < best.co:
        if best is not None and best.process != x.process:
            return x, best
        return x, second
    if best.process != x.process and (second is None or x.co < second.co):
        return best, x
    return best, second


def _by(items: Iterable[Lease], key: Callable[[Lease], Any]) -> dict[Any, list[Lease]]:
    out: dict[Any, list[Lease]] = {}
    for x in items:
        out.setdefault(key(x), []).append(x)
    return out
