"""A message's ``enqueued_at`` is when it was published, so ``stats().oldest_ready_age`` is
its age, not the time since the queue was last busy.

On the core with a local SQLite database (each clock mode, no waiting), then both twins
on the shared cluster after a real quiet spell.
"""

from __future__ import annotations

import time

import pytest

from rqueue import Lease, Statements, _admin
from rqueue._core import QueueCore
from rqueue._statements import DEFAULT_CLOCK_TOLERANCE, SERVER_CLOCK_STEP
from rqueue._version import ServerInfo

from .fakes import SqliteExecutor, drive
from .test_core_semantics import Queue

VIS = 30.0
#: how far ``enqueued_at`` and ``oldest_ready_age`` may be off (docs/rqueue.md): the clocks
#: of the nodes that stamp and read may disagree by ``clock_tolerance``, and rqlite's
#: rewritten time is rounded to one server-clock step
BOUND = DEFAULT_CLOCK_TOLERANCE + SERVER_CLOCK_STEP
#: the quiet spell: longer than BOUND, so a stale enqueue time cannot pass unseen
IDLE = 2.0


def enqueued(ex: SqliteExecutor) -> dict[int, float | None]:
    return dict(ex.sql("SELECT seq, enqueued_at FROM messages"))


def test_leader_clock_every_way_in_takes_the_time_of_its_own_request(
    executor: SqliteExecutor,
) -> None:
    q = Queue(executor, "v8.30.0")  # no server clock: the time is bound, from q.clock
    q.core.statements.max_deliveries = 1
    q.clock.now = 1000.0
    first = q.publish("a")
    q.clock.now = 1030.0  # a quiet spell, then each way a message enters the queue
    plain = q.publish("b")
    deduped = q.publish("c", dedup_id="d-1")
    many = drive(q.core.publish_many([("d", "{}", 0), ("e", "{}", 1)]), q.ex)
    assert enqueued(executor) == {
        first: 1000.0,
        plain: 1030.0,
        deduped: 1030.0,
        many[0]: 1030.0,
        many[1]: 1030.0,
    }
    lease = q.claim()
    assert lease is not None and lease.seq == first
    q.nack(lease)
    q.clock.now = 1100.0
    q.claim()  # dead-letters `first`: its enqueue time goes with it
    [dead] = drive(_admin.dead_letters(q.core, None, 0, 10), q.ex)
    assert (dead.seq, dead.enqueued_at) == (first, 1000.0)
    q.clock.now = 1200.0
    assert drive(_admin.redrive(q.core, first, None), q.ex) == 1
    [(again, at)] = executor.sql("SELECT seq, enqueued_at FROM messages WHERE group_id = 'a'")
    assert again > max(many) and at == 1200.0  # a new message at the tail: enqueued now


def test_server_clock_a_publish_after_a_quiet_spell_is_not_dated_back_to_it(
    executor: SqliteExecutor,
) -> None:
    """The bug: a publish took the queue's last stamp (the last claim or ack) as its time."""
    statements = Statements(server_clock=True, clock=lambda: 0.0)
    core = QueueCore(statements, ServerInfo.from_version("v8.36.0"))
    drive(core.open(), executor)
    now = float(executor.sql("SELECT (julianday('now') - 2440587.5) * 86400.0")[0][0])
    executor.sql("INSERT OR REPLACE INTO rqueue_clock (id, ts) VALUES (1, ?)", now - 30.0)
    seq = drive(core.publish("g", "{}", 0, None), executor)
    many = drive(core.publish_many([("h", "{}", 0)]), executor)
    deduped = drive(core.publish("i", "{}", 0, "d-1"), executor)
    for s in (seq, *many, deduped):
        assert enqueued(executor)[s] == pytest.approx(now, abs=1.0)
    age = drive(_admin.stats(core), executor).oldest_ready_age
    assert age is not None and age < 1.0


def test_oldest_ready_age_after_a_quiet_spell_is_the_messages_age(connect, queue_urls) -> None:
    t = connect(",".join(queue_urls), max_deliveries=1)
    t.publish("warm", "{}")
    t.ack(t.claim("w", VIS))  # the queue's last stamped request; then nothing happens
    time.sleep(IDLE)  # the quiet spell under test: nothing is waited for
    before, started = time.time(), time.monotonic()
    seq = t.publish("g", '"x"')
    age = t.stats().oldest_ready_age
    elapsed = time.monotonic() - started
    assert age is not None and age <= elapsed + BOUND, f"age {age:.3f} s after {elapsed:.3f} s"

    lease: Lease | None = t.claim("w", VIS)
    assert lease is not None and lease.seq == seq
    t.nack(lease, 0, error="boom")
    assert t.claim("w", VIS) is None  # the claim dead-letters it
    [dead] = t.dead_letters()
    assert dead.seq == seq and dead.enqueued_at is not None
    assert before - BOUND <= dead.enqueued_at <= time.time() + BOUND
