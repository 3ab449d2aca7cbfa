"""``stats()``: the queue's depth from counters and indexes, never a count of the queue.

One read request of three statements:

* ``rqueue_counts``: messages, groups and dead letters per priority, kept exact by
  triggers (see :data:`rqueue._schema.COUNTERS`) in the same transaction as every write;
* the messages in flight (leased or parked, not lapsed): through the partial index on
  ``locked_by``, so it reads only the rows in flight;
* the oldest ready message: the first row in seq order that is not in flight (the
  primary key, skipping at most the rows in flight), and its ``enqueued_at``.

So the cost follows the number of priorities and of messages in flight, not the number
queued (benchmarks/stats_bench.py shows the plans and the time at 1,000,000 queued).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._exceptions import ProtocolError
from ._models import Stats, Stmt
from ._statements import PARKED, SERVER_NOW

if TYPE_CHECKING:
    from ._core import Op, QueueCore

COUNTS = Stmt("SELECT kind, priority, n FROM rqueue_counts")
IN_FLIGHT = Stmt(
    "SELECT m.locked_by = ? AS parked, coalesce(g.priority, 0) AS priority, count(*) AS n "
    "FROM messages m LEFT JOIN groups g ON g.group_id = m.group_id "
    f"WHERE m.locked_by IS NOT NULL AND m.lock_expiry >= {SERVER_NOW} GROUP BY 1, 2",
    (PARKED,),
)
OLDEST_READY = Stmt(
    f"SELECT {SERVER_NOW} - enqueued_at AS age FROM messages "
    f"WHERE locked_by IS NULL OR lock_expiry < {SERVER_NOW} ORDER BY seq LIMIT 1"
)
STATEMENTS = (COUNTS, IN_FLIGHT, OLDEST_READY)


def stats(core: QueueCore) -> Op[Stats]:
    results = yield core.read(STATEMENTS, "stats")
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
