"""Retention (``max_age``): a message still queued that long after it was due is moved to
the dead-letter queue by the next claim that reaches it, fenced like every move (a live
lease or park is never moved). Both twins on a real cluster, then the SQL alone on SQLite
with a controlled clock.
"""

from __future__ import annotations

import json
import math

import pytest

from rqueue import DeadLetter, LeaseLost
from rqueue._statements import DEFAULT_CLOCK_TOLERANCE, RETENTION_SCAN, SERVER_CLOCK_STEP

from .fakes import SqliteExecutor, drive
from .polling import query, wait_for
from .test_core_semantics import Queue

VIS = 30.0
MAX_AGE = 1.0
#: how far past a message's expiry the store's clock must be before a claim moves it
MARGIN = DEFAULT_CLOCK_TOLERANCE + SERVER_CLOCK_STEP
NOW_SQL = "SELECT (julianday('now') - 2440587.5) * 86400.0"


def enqueued_at(urls: list[str], seq: int) -> float:
    [(at,)] = query(urls, "SELECT enqueued_at FROM messages WHERE seq = ?", seq)
    return float(at)


def wait_for_store_time(urls: list[str], when: float) -> None:
    """Wait (bounded) until the store's clock reads past ``when``."""
    wait_for(f"the store's clock to pass {when}", lambda: query(urls, NOW_SQL)[0][0] > when)


def test_an_old_free_head_is_dead_lettered_by_the_next_claim(connect, queue_urls) -> None:
    moved: list[DeadLetter] = []
    t = connect(",".join(queue_urls), max_age=MAX_AGE, on_dead_letter=moved.append)
    old = [t.publish("g", {"n": i}, priority=1) for i in range(2)]
    wait_for_store_time(queue_urls, enqueued_at(queue_urls, old[1]) + MAX_AGE + MARGIN)
    fresh = t.publish("h", {"n": "fresh"})
    lease = t.claim("w", VIS)
    assert lease is not None and lease.seq == fresh  # never the expired head
    assert [(d.seq, d.reason, d.deliveries) for d in moved] == [(old[0], "retention", 0)]
    assert t.claim("w", VIS) is None  # moves the group's next head, leases nothing
    assert [d.seq for d in moved] == old
    dead = t.dead_letters()
    assert [(d.seq, d.group_id, json.loads(d.event), d.priority, d.reason) for d in dead] == [
        (old[0], "g", {"n": 0}, 1, "retention"),
        (old[1], "g", {"n": 1}, 1, "retention"),
    ]
    s = t.stats()
    assert (s.queued, s.leased, s.dead_lettered, s.groups) == (1, 1, 2, 1)
    t.ack(lease)
    # redriven messages are new: queued afresh
    assert t.redrive(all=True) == 2
    assert [json.loads(m.event) for m in t.peek("g")] == [{"n": 0}, {"n": 1}]


def test_a_live_lease_or_park_is_never_moved(connect, queue_urls) -> None:
    moved: list[DeadLetter] = []
    t = connect(",".join(queue_urls), max_age=MAX_AGE, on_dead_letter=moved.append)
    held = t.publish("held", {"n": 0})
    parked = t.publish("parked", {"n": 1})
    lease = t.claim("w", VIS)
    assert lease is not None and lease.seq == held
    other = t.claim("w", VIS)
    assert other is not None and other.seq == parked
    t.nack(other, VIS)
    wait_for_store_time(queue_urls, enqueued_at(queue_urls, parked) + MAX_AGE + MARGIN)
    t.publish("fresh", {"n": 2})
    assert t.claim("w", VIS) is not None
    assert t.claim("w", VIS) is None
    assert moved == [] and t.dead_letters() == []
    t.ack(lease)  # the holder's ack still works
    assert [m.state for m in t.peek("parked")] == ["parked"]


def test_age_counts_from_when_a_delayed_message_is_due(connect, queue_urls) -> None:
    t = connect(",".join(queue_urls), max_age=MAX_AGE)
    seq = t.publish("g", {}, delay=MAX_AGE * 1.5)
    lease = wait_for("the delayed message", lambda: t.claim("w", VIS))
    assert lease.seq == seq and t.dead_letters() == []


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (0, ValueError, "max_age: must be > 0"),
        (-5, ValueError, "max_age: must be > 0"),
        (math.nan, ValueError, "max_age: must be finite"),
        ("60", TypeError, "max_age: expected a number"),
    ],
)
def test_a_bad_max_age_is_refused_naming_it(connect, queue_urls, value, error, match) -> None:
    with pytest.raises(error, match=match):
        connect(",".join(queue_urls), max_age=value)


# -- the SQL alone (SQLite, a controlled clock) ----------------------------------------


def aged_queue(executor: SqliteExecutor, max_deliveries: int | None = None) -> Queue:
    q = Queue(executor)
    q.core.statements.max_age = 60.0
    q.core.statements.max_deliveries = max_deliveries
    return q


def test_many_old_groups_are_moved_group_by_group_and_none_is_leased(
    executor: SqliteExecutor,
) -> None:
    q = aged_queue(executor)
    n = RETENTION_SCAN * 2 + 3
    for i in range(n):
        q.publish(f"old{i}", priority=4)
    q.clock.now += 61.0
    q.publish("fresh", priority=0)
    lease = q.claim(min_priority=0)
    assert lease is not None and lease.group_id == "fresh"
    assert q.claim(min_priority=4) is None  # an old head beyond the scan: skipped, kept
    for _ in range(n):  # each claim moves the old heads among the first free groups
        assert q.claim() is None
    assert executor.sql("SELECT count(*), min(reason), max(reason) FROM rqueue_dead") == [
        (n, "retention", "retention")
    ]
    assert executor.sql("SELECT group_id FROM groups") == [("fresh",)]


def test_both_limits_record_their_reason(executor: SqliteExecutor) -> None:
    q = aged_queue(executor, max_deliveries=1)
    q.publish("tried")
    q.publish("old")
    first = q.claim()
    assert first is not None and first.group_id == "tried"
    q.nack(first)  # its one delivery: exhausted
    q.clock.now += 61.0  # and both are old
    assert q.claim() is None
    rows = executor.sql("SELECT group_id, reason, deliveries FROM rqueue_dead ORDER BY seq")
    assert rows == [("tried", "max_deliveries", 1), ("old", "retention", 0)]


def test_a_lapsed_lease_moved_out_is_lost_to_its_holder(executor: SqliteExecutor) -> None:
    q = aged_queue(executor)
    q.publish("g")
    lease = q.claim(visibility=5.0)
    assert lease is not None
    q.clock.now += 61.0  # lapsed, and old
    assert q.claim() is None
    assert executor.sql("SELECT reason FROM rqueue_dead") == [("retention",)]
    with pytest.raises(LeaseLost):
        q.ack(lease)


def test_the_retention_move_reads_through_indexes(executor: SqliteExecutor) -> None:
    for max_deliveries in (None, 3):
        q = aged_queue(executor, max_deliveries)
        for stmt in q.core.dead.move("t"):
            plan = " | ".join(
                r[3] for r in executor.sql("EXPLAIN QUERY PLAN " + stmt.sql, *stmt.params)
            )
            scans = [p for p in plan.split(" | ") if p.startswith("SCAN")]
            # the claim order's index (bounded by RETENTION_SCAN), then its few rows
            assert all("USING" in p or p == "SCAN g" for p in scans), (stmt.sql, plan)
            assert "SCAN messages" not in plan and "SCAN m " not in plan + " "


def test_without_max_age_nothing_expires(executor: SqliteExecutor) -> None:
    q = Queue(executor)
    q.publish("g")
    q.clock.now += 10 * 365 * 86400.0
    assert q.core.dead.move("t") == []
    lease = q.claim()
    assert lease is not None
    drive(q.core.ack(lease), executor)


def test_a_delayed_message_ages_from_when_its_park_lapses(executor: SqliteExecutor) -> None:
    """Even with ``max_age`` below the lapse margin, a delayed message is claimable once
    due before it counts as old."""
    q = Queue(executor, clock_tolerance=0.5)
    q.core.statements.max_age = 0.2
    seq = drive(q.core.publish("g", '"a"', 0, None, 10.0), executor)
    q.clock.now += 10.5  # due, the park not yet lapsed by the margin
    assert q.claim() is None
    q.clock.now += 0.1
    lease = q.claim()
    assert lease is not None and lease.seq == seq
    assert executor.sql("SELECT count(*) FROM rqueue_dead") == [(0,)]
