"""The dead-letter statements, the counters and the migration, on one SQLite database
through the core (fakes.SqliteExecutor): exact figures, in-place upgrades, query plans."""

from __future__ import annotations

from rqueue import _dlq, _stats
from rqueue._models import DeadLetter

from .fakes import SqliteExecutor, drive
from .test_core_semantics import SEED_SCHEMA, Queue

#: rqueue's schema before dead letters and counters (messages without their new columns)
PREVIOUS_SCHEMA = [
    *SEED_SCHEMA[:1],
    "CREATE TABLE groups (group_id TEXT PRIMARY KEY, last_claimed_at REAL NOT NULL"
    " DEFAULT 0.0, priority INT NOT NULL DEFAULT 0, head_seq INTEGER)",
    "CREATE TABLE rqueue_dedup (dedup_id TEXT PRIMARY KEY, seq INTEGER NOT NULL,"
    " created_at REAL NOT NULL)",
]


def stats(q: Queue):
    return drive(_stats.stats(q.core), q.ex)


def exact(q: Queue) -> tuple[int, int, int]:
    """(messages, groups, dead letters) counted the slow way."""
    (m,), (g,), (d,) = (
        q.ex.sql(f"SELECT count(*) FROM {t}")[0] for t in ("messages", "groups", "rqueue_dead")
    )
    return m, g, d


def test_an_existing_queue_is_upgraded_in_place_and_counted(executor: SqliteExecutor) -> None:
    for sql in PREVIOUS_SCHEMA:
        executor.sql(sql)
    executor.sql("INSERT INTO messages (group_id, event) VALUES ('a', '1'), ('a', '2'), ('b', '3')")
    executor.sql(
        "INSERT INTO groups (group_id, priority, head_seq) VALUES ('a', 2, 1), ('b', 0, 3)"
    )
    q = Queue(executor)
    cols = {r[1] for r in executor.sql("PRAGMA table_info(messages)")}
    assert {"deliveries", "last_error", "enqueued_at"} <= cols
    s = stats(q)
    assert (s.ready, s.groups, s.by_priority[2]["queued"], s.by_priority[0]["queued"]) == (
        3,
        2,
        2,
        1,
    )
    Queue(executor)  # opening again: the counters are not counted twice
    assert stats(q).ready == 3


def test_counters_stay_exact_through_every_operation(executor: SqliteExecutor) -> None:
    q = Queue(executor)
    q.core.statements.max_deliveries = 2
    moved: list[DeadLetter] = []
    q.core.on_dead_letter = moved.append
    for i in range(6):
        q.publish(f"g{i % 3}", "{}", priority=i % 2)
    drive(q.core.publish_many([("h", "{}", 1), ("h", "{}", 1)]), q.ex)
    q.publish("g0", "{}", dedup_id="d1")
    q.publish("g0", "{}", dedup_id="d1")  # stored once
    for _ in range(12):
        lease = q.claim()
        if lease is None:
            break
        if lease.group_id == "g1":
            q.nack(lease)  # g1's head fails until it is dead-lettered
        else:
            q.ack(lease)
        s = stats(q)
        m, g, d = exact(q)
        assert (s.queued, s.groups, s.dead_lettered) == (m, g, d)
    assert moved and all(x.group_id == "g1" and x.deliveries == 2 for x in moved)
    assert drive(_dlq.redrive(q.core, None, "g1"), q.ex) == len(moved)
    s = stats(q)
    assert (s.queued, s.groups, s.dead_lettered) == exact(q)


def test_the_dead_lettering_reads_exhausted_heads_through_an_index(
    executor: SqliteExecutor,
) -> None:
    q = Queue(executor)
    q.core.statements.max_deliveries = 3
    for stmt in q.core.dead.move("t"):
        plan = " | ".join(r[3] for r in q.ex.sql("EXPLAIN QUERY PLAN " + stmt.sql, *stmt.params))
        assert "SCAN messages" not in plan and "SCAN m " not in plan + " ", (stmt.sql, plan)
