"""The core's SQL and decisions against one local SQLite database (no network).

Uses the worker-clock mode with a controlled clock, so lapses and parks are exact.
"""

from __future__ import annotations

import pytest

from rqueue import Lease, LeaseLost, Statements
from rqueue._core import QueueCore
from rqueue._statements import BATCH_ITEMS
from rqueue._version import ServerInfo

from .fakes import SqliteExecutor, drive


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Queue:
    """The core bound to an executor: each method runs one operation."""

    def __init__(
        self, executor: SqliteExecutor, version: str = "v8.36.0", clock_tolerance: float = 0.0
    ) -> None:
        self.clock = Clock()
        self.ex = executor
        self.core = QueueCore(
            Statements(server_clock=False, clock=self.clock, clock_tolerance=clock_tolerance),
            ServerInfo.from_version(version),
            origin="test",
        )
        drive(self.core.open(), executor)

    def publish(self, group: str, event: str = "{}", priority: int = 0, dedup_id=None) -> int:
        return drive(self.core.publish(group, event, priority, dedup_id), self.ex)

    def claim(self, visibility: float = 30.0, min_priority: int = 0) -> Lease | None:
        return drive(self.core.claim("w", visibility, min_priority), self.ex)

    def ack(self, lease: Lease) -> None:
        drive(self.core.ack(lease), self.ex)

    def nack(self, lease: Lease, delay: float = 0.0) -> None:
        drive(self.core.nack(lease, delay), self.ex)

    def extend(self, lease: Lease, visibility: float) -> None:
        drive(self.core.extend(lease, visibility), self.ex)


@pytest.fixture(params=["v8.36.0", "v7.0.0"], ids=["one-request", "three-requests"])
def q(request: pytest.FixtureRequest, executor: SqliteExecutor) -> Queue:
    return Queue(executor, request.param)


def test_fifo_within_a_group_and_one_in_flight(q: Queue) -> None:
    a, b = q.publish("g", '"a"'), q.publish("g", '"b"')
    first = q.claim()
    assert first is not None and (first.seq, first.event) == (a, '"a"')
    assert q.claim() is None  # the group is in flight
    q.ack(first)
    second = q.claim()
    assert second is not None and second.seq == b


def test_round_robin_by_last_claim_then_seq(q: Queue) -> None:
    q.publish("g1"), q.publish("g1"), q.publish("g2"), q.publish("g2")
    order = []
    for _ in range(4):
        lease = q.claim()
        assert lease is not None
        order.append(lease.group_id)
        q.ack(lease)
    assert order == ["g1", "g2", "g1", "g2"]


def test_priority_floor_and_first_publish_sets_priority(q: Queue) -> None:
    q.publish("low", priority=1)
    q.publish("high", priority=3)
    q.publish("low", priority=4)  # the group's priority stays 1
    lease = q.claim(min_priority=2)
    assert lease is not None and lease.group_id == "high"
    assert q.claim(min_priority=2) is None
    assert q.claim(min_priority=0) is not None


def test_nack_zero_frees_and_nack_delay_parks(q: Queue) -> None:
    seq = q.publish("g")
    lease = q.claim()
    q.nack(lease, 0)
    again = q.claim()
    assert again is not None and again.seq == seq
    q.nack(again, 5.0)
    assert q.claim() is None  # parked: the group stays blocked
    q.clock.now += 5.1
    assert q.claim().seq == seq


def test_lapsed_lease_is_claimable_and_its_ack_is_fenced(q: Queue) -> None:
    q.publish("g")
    old = q.claim(visibility=2.0)
    q.clock.now += 2.5
    new = q.claim(visibility=10.0)
    assert new is not None and new.seq == old.seq and new.token != old.token
    with pytest.raises(LeaseLost):
        q.ack(old)
    with pytest.raises(LeaseLost):
        q.nack(old)
    with pytest.raises(LeaseLost):
        q.extend(old, 10)
    q.ack(new)
    assert q.ex.sql("SELECT count(*) FROM messages") == [(0,)]
    assert q.ex.sql("SELECT count(*) FROM groups") == [(0,)]


def test_a_lapsed_lease_waits_out_the_clock_tolerance(executor: SqliteExecutor) -> None:
    q = Queue(executor, clock_tolerance=0.5)
    q.publish("g")
    old = q.claim(visibility=2.0)
    q.clock.now += 2.4  # expired, but within the tolerance: the group is still in flight
    assert q.claim() is None
    q.clock.now += 0.2
    new = q.claim()
    assert new is not None and new.seq == old.seq and new.token != old.token


def test_expired_lease_ack_refused_even_if_nobody_reclaimed(q: Queue) -> None:
    q.publish("g")
    lease = q.claim(visibility=1.0)
    q.clock.now += 1.5
    with pytest.raises(LeaseLost):
        q.ack(lease)
    assert q.ex.sql("SELECT count(*) FROM messages") == [(1,)]


def test_extend_keeps_the_lease(q: Queue) -> None:
    q.publish("g")
    lease = q.claim(visibility=2.0)
    q.clock.now += 1.5
    q.extend(lease, 5.0)
    q.clock.now += 3.0  # past the first expiry, inside the extended one
    assert q.claim() is None
    q.ack(lease)


def test_ack_advances_head_and_drops_empty_group(q: Queue) -> None:
    a, b = q.publish("g"), q.publish("g")
    assert q.ex.sql("SELECT head_seq FROM groups") == [(a,)]
    q.ack(q.claim())
    assert q.ex.sql("SELECT head_seq FROM groups") == [(b,)]
    q.ack(q.claim())
    assert q.ex.sql("SELECT count(*) FROM groups") == [(0,)]
    q.publish("g", priority=2)  # a new group row, with the new priority
    assert q.ex.sql("SELECT priority, last_claimed_at FROM groups") == [(2, 0.0)]


def test_dedup_publish_stores_at_most_once_even_after_ack(q: Queue) -> None:
    first = q.publish("g", dedup_id="d1")
    assert q.publish("g", dedup_id="d1") == first
    q.ack(q.claim())
    assert q.publish("g", dedup_id="d1") == first
    assert q.ex.sql("SELECT count(*) FROM messages") == [(0,)]
    assert q.ex.sql("SELECT count(*) FROM groups") == [(0,)]


def test_dedup_ids_expire_after_their_ttl(q: Queue) -> None:
    first = q.publish("g", dedup_id="d1")
    q.ack(q.claim())
    q.clock.now += q.core.dedup_ttl + 1
    assert q.publish("g", dedup_id="d1") > first


def test_publish_many_is_one_request_in_order(q: Queue) -> None:
    before = len(q.ex.calls)
    seqs = drive(q.core.publish_many([("a", "1", 0), ("b", "2", 3), ("a", "3", 0)]), q.ex)
    assert len(q.ex.calls) == before + 1
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    rows = q.ex.sql("SELECT group_id, priority, head_seq FROM groups ORDER BY group_id")
    assert rows == [("a", 0, seqs[0]), ("b", 3, seqs[1])]


def test_publish_many_is_three_statements_per_chunk(q: Queue) -> None:
    items = [(f"g{i % 3}", str(i), 0) for i in range(BATCH_ITEMS + 1)]
    before = len(q.ex.calls)
    seqs = drive(q.core.publish_many(items), q.ex)
    assert len(q.ex.calls) == before + 1
    # two chunks: messages, their key, their groups; and (one in PURGE_EVERY) the purge
    assert len(q.ex.calls[-1][1]) == 7
    assert q.ex.sql("SELECT seq, event FROM messages ORDER BY seq") == [
        (seq, str(i)) for i, seq in enumerate(seqs)
    ]
    with pytest.raises(ValueError, match="1 to 199 items"):
        q.core.statements.publish_batch(items)


def test_claim_is_one_request_on_new_servers(executor: SqliteExecutor) -> None:
    q = Queue(executor, "v8.23.0")
    q.publish("g")
    before = len(executor.calls)
    assert q.claim() is not None
    assert [c[0] for c in executor.calls[before:]] == ["/db/execute"]


def test_claim_is_a_write_and_a_read_back_on_old_servers(executor: SqliteExecutor) -> None:
    q = Queue(executor, "v8.22.9")
    q.publish("g")
    before = len(executor.calls)
    assert q.claim() is not None
    assert [c[0] for c in executor.calls[before:]] == ["/db/execute", "/db/query"]


SEED_SCHEMA = [
    "CREATE TABLE messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, group_id TEXT NOT NULL,"
    " event TEXT NOT NULL, locked_by TEXT, lock_expiry REAL)",
    "CREATE TABLE groups (group_id TEXT PRIMARY KEY, last_claimed_at REAL NOT NULL"
    " DEFAULT 0.0, priority INT NOT NULL DEFAULT 0)",
]


def test_opening_a_seed_database_migrates_it(executor: SqliteExecutor) -> None:
    for sql in SEED_SCHEMA:
        executor.sql(sql)
    executor.sql("INSERT INTO messages (group_id, event) VALUES ('g', '1'), ('g', '2')")
    executor.sql("INSERT INTO groups (group_id, priority) VALUES ('g', 2), ('empty', 0)")
    q = Queue(executor)
    assert q.ex.sql("SELECT group_id, head_seq FROM groups") == [("g", 1)]
    names = {r[0] for r in q.ex.sql("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"rqueue_messages_group_seq", "rqueue_groups_order"} <= names
    lease = q.claim(min_priority=2)
    assert lease is not None and lease.seq == 1
    Queue(executor)  # opening again changes nothing
    assert q.ex.sql("SELECT group_id, head_seq FROM groups") == [("g", 1)]


def test_claim_query_does_not_scan_messages(q: Queue) -> None:
    stmt = q.core.statements.claim_lease("t", 1.0, 0)
    plan = " | ".join(r[3] for r in q.ex.sql("EXPLAIN QUERY PLAN " + stmt.sql, *stmt.params))
    assert "USING INDEX rqueue_groups_order" in plan
    assert "SCAN m" not in plan and "SCAN messages" not in plan
