"""What an operator reads of the queue: ``stats()`` and ``peek()``'s statements and rows
(the calls that run them: :mod:`rqueue._admin`).

``stats()``: the queue's depth from counters and indexes, never a count of the queue.
One read request of three statements:

* ``rqueue_counts``: messages, groups and dead letters per priority, kept exact by
  triggers (see :data:`rqueue._schema.COUNTERS`) in the same transaction as every write;
* the messages in flight (leased or parked, not lapsed): the group rows that hold them,
  through the partial index on ``groups.locked_by``, so it reads only those;
* the oldest ready message: the first row in seq order that is not in flight (the
  primary key, skipping at most the rows in flight), and its ``enqueued_at``.

A delayed message counts as parked while it is its group's head (its group is parked
until it is due), and as ready while it waits behind the head: its coming due is time
passing, which no write marks, so exact counters cannot follow it, and telling it apart
would take a scan of the queue. ``peek`` shows it as ``delayed``, with its due time.

So the cost follows the number of priorities and of messages in flight, not the number
queued (benchmarks/stats_bench.py shows the plans and the time at 1,000,000 queued).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._exceptions import ProtocolError
from ._models import QueuedMessage, Result, Stats, Stmt
from ._statements import PARKED, SERVER_UTC

COUNTS = Stmt("SELECT kind, priority, n FROM rqueue_counts")
IN_FLIGHT = Stmt(
    "SELECT locked_by = ? AS parked, priority, count(*) AS n FROM groups "
    f"WHERE locked_by IS NOT NULL AND lock_expiry >= {SERVER_UTC} GROUP BY 1, 2",
    (PARKED,),
)
OLDEST_READY = Stmt(
    f"SELECT {SERVER_UTC} - m.enqueued_at AS age FROM messages m WHERE NOT EXISTS ("
    "SELECT 1 FROM groups g WHERE g.group_id = m.group_id AND g.head_seq = m.seq "
    f"AND g.locked_by IS NOT NULL AND g.lock_expiry >= {SERVER_UTC}) ORDER BY m.seq LIMIT 1"
)
STATEMENTS = (COUNTS, IN_FLIGHT, OLDEST_READY)


def stats_of(results: Sequence[Result]) -> Stats:
    """The :class:`Stats` in the results of :data:`STATEMENTS`."""
    try:
        counts, flight, oldest = results
        by: dict[int, dict[str, int]] = {}

        def slot(priority: int) -> dict[str, int]:
            return by.setdefault(
                int(priority),
                {"queued": 0, "ready": 0, "leased": 0, "parked": 0, "groups": 0, "dead": 0},
            )

        pending = 0
        for kind, priority, n in counts.rows:
            if kind == "pending":
                pending += int(n)
            elif kind in ("queued", "groups", "dead"):
                slot(priority)[kind] += int(n)
        for parked, priority, n in flight.rows:
            slot(priority)["parked" if parked else "leased"] += int(n)
        for c in by.values():
            c["ready"] = max(0, c["queued"] - c["leased"] - c["parked"])
        age = oldest.rows[0][0] if oldest.rows else None
        shown = {p: c for p, c in by.items() if any(c.values())}
        return Stats(
            ready=sum(c["ready"] for c in by.values()) + max(0, pending),
            leased=sum(c["leased"] for c in by.values()),
            parked=sum(c["parked"] for c in by.values()),
            dead_lettered=sum(c["dead"] for c in by.values()),
            groups=sum(c["groups"] for c in by.values()),
            oldest_ready_age=None if age is None else max(0.0, float(age)),
            by_priority=shown,
        )
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"stats: unreadable answer: {exc}") from exc


def peek(group_id: str, limit: int) -> Stmt:
    """A group's queued messages in order, with their state (a read on the answering
    node's clock, which any rqlite accepts in a read): a head leased or parked (a
    delayed head not yet due is parked), else ``delayed`` while not yet due (a message
    behind its group's head), else ``ready``."""
    held = "g.head_seq = m.seq"
    return Stmt(
        "SELECT m.seq AS seq, m.group_id AS group_id, m.event AS event, CASE "
        f"WHEN NOT {held} OR g.locked_by IS NULL OR g.lock_expiry < {SERVER_UTC} "
        f"THEN CASE WHEN m.deliver_at > {SERVER_UTC} THEN 'delayed' ELSE 'ready' END "
        "WHEN g.locked_by = ? THEN 'parked' ELSE 'leased' END AS state, "
        f"CASE WHEN {held} THEN g.deliveries ELSE 0 END AS deliveries, m.last_error AS "
        f"last_error, CASE WHEN {held} THEN g.lock_expiry END AS lock_expiry, "
        "m.deliver_at AS deliver_at, "
        f"CASE WHEN {held} THEN g.locked_by END AS locked_by, "
        f"CASE WHEN {held} THEN g.lock_expiry - {SERVER_UTC} END AS expires_in "
        "FROM messages m LEFT JOIN groups g ON g.group_id = m.group_id "
        "WHERE m.group_id = ? ORDER BY m.seq LIMIT ?",
        (PARKED, group_id, limit),
    )


def queued_of(res: Result) -> list[QueuedMessage]:
    """The rows of :func:`peek` as :class:`QueuedMessage`."""
    try:
        return [
            QueuedMessage(
                seq=int(r["seq"]),
                group_id=str(r["group_id"]),
                event=str(r["event"]),
                state=str(r["state"]),
                deliveries=int(r["deliveries"] or 0),
                last_error=r.get("last_error"),
                lock_expiry=_num(r.get("lock_expiry")),
                deliver_at=_num(r.get("deliver_at")),
                **_holder(r),
            )
            for r in res.dicts()
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"peek: unreadable row: {exc}") from exc


def _holder(row: dict[str, Any]) -> dict[str, Any]:
    """Who holds a leased message (the worker id its token starts with) and for how
    many more seconds, by the answering node's clock; nothing for other states."""
    if row.get("state") != "leased" or not isinstance(row.get("locked_by"), str):
        return {}
    return {
        "held_by": row["locked_by"].rpartition(":")[0] or row["locked_by"],
        "expires_in": _num(row.get("expires_in")),
    }


def _num(x: Any) -> float | None:
    return None if x is None else float(x)
