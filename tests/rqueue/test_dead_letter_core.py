"""The dead-letter statements, the counters and the migration, on one SQLite database
through the core (fakes.SqliteExecutor): exact figures, in-place upgrades, query plans."""

from __future__ import annotations

import pytest

from rqueue import _admin
from rqueue._models import DeadLetter, Result

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
    return drive(_admin.stats(q.core), q.ex)


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
    assert drive(_admin.redrive(q.core, None, "g1"), q.ex) == len(moved)
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


DEAD = (
    "seq",
    "group_id",
    "event",
    "priority",
    "deliveries",
    "last_error",
    "enqueued_at",
    "dead_at",
)
READ_BACK = ("seq", "group_id", "event", "lock_expiry")


def test_after_an_unknown_outcome_each_dead_letter_is_reported_once() -> None:
    from rqueue._exceptions import OutcomeUnknown

    from .test_core_decisions import Script, core

    c = core()
    c.statements.max_deliveries = 3
    moved: list[DeadLetter] = []
    c.on_dead_letter = moved.append
    s = Script(c.claim("w", 30.0, 0))
    first = s.call
    assert first.path == "/db/request" and len(first.statements) == 1 + 3 + 1 + 1
    s.throw(OutcomeUnknown("leadership lost"))
    # the lookup reads the lease and what the claim moved: it moved 9 but leased nothing
    assert s.call.path == "/db/query" and len(s.call.statements) == 2
    s.send(Result(READ_BACK, ()), Result(DEAD, ((9, "g", "{}", 0, 3, "x", None, 1.0),)))
    assert moved == []  # reported only when the claim returns
    # the retry (same token) reads back 9 again, and 12 that it moved this time
    s.send(
        *([Result()] * 3),
        Result(READ_BACK, ((10, "g", "{}", 99.0),)),  # the claim's RETURNING
        Result(
            DEAD, ((9, "g", "{}", 0, 3, "x", None, 1.0), (12, "h", "{}", 1, 3, None, None, 2.0))
        ),
    )
    assert s.done and s.value.seq == 10
    assert [d.seq for d in moved] == [9, 12]


def test_a_claim_that_fails_reports_nothing() -> None:
    from rqueue._exceptions import OutcomeUnknown, Unavailable

    from .test_core_decisions import Script, core

    c = core()
    c.statements.max_deliveries = 3
    moved: list[DeadLetter] = []
    c.on_dead_letter = moved.append
    s = Script(c.claim("w", 30.0, 0))
    s.throw(OutcomeUnknown("timeout"))
    s.send(Result(READ_BACK, ()), Result(DEAD, ((9, "g", "{}", 0, 3, "x", None, 1.0),)))
    with pytest.raises(OutcomeUnknown):
        s.throw(Unavailable("no leader"))
    assert moved == []
