"""Delayed messages (``publish(..., delay=)``): both twins on a real cluster, plus the
SQL alone on SQLite (a park set by the triggers, the migration of an older database).

A delayed message is due at its request's time plus the delay, on the lease clock; while
it is its group's head, the group is parked until then, so no claim path leases it (or
anything behind it) early. "Not before" is checked on the store's own clock: a lease's
``expires_at`` minus its visibility is the time of the claim that took it.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from typing import Any

import pytest
import requests

from rqueue import Lease
from rqueue._schema import COUNTER_TRIGGERS
from rqueue._statements import PARKED

from .fakes import SqliteExecutor, drive
from .polling import query, wait_for
from .test_core_semantics import Queue
from .test_migration import load

VIS = 30.0
DELAY = 1.0
#: a delay that outlasts the checks made while the head is parked, on a loaded machine too
#: (CI at load 9: a 1 s head came due between peek and stats)
HOLD = 5.0


def due_times(urls: list[str], *seqs: int) -> dict[int, float]:
    """The ``deliver_at`` of each message in ``seqs``, read from the store."""
    marks = ", ".join("?" * len(seqs))
    rows = query(urls, f"SELECT seq, deliver_at FROM messages WHERE seq IN ({marks})", *seqs)
    found = {int(seq): float(at) for seq, at in rows if at is not None}
    assert set(found) == set(seqs), f"deliver_at missing for some of {seqs}: {rows}"
    return found


def claimed_at(lease: Lease) -> float:
    """The store's time of the claim that took ``lease``."""
    assert lease.expires_at is not None
    return lease.expires_at - VIS


def claim_when_due(t: Any, what: str, **kw: Any) -> Lease:
    return wait_for(what, lambda: t.claim("w", VIS, **kw))


@pytest.mark.parametrize("version", [None, "v8.0.0"], ids=["current", "worker-clock"])
def test_a_delayed_message_is_claimable_only_once_due(connect, queue_urls, version) -> None:
    t = connect(",".join(queue_urls), assume_version=version)
    seq = t.publish("g", {"n": 1}, delay=DELAY)
    due = due_times(queue_urls, seq)[seq]
    assert t.claim("w", VIS) is None
    assert t.claim_many("w", VIS, 5) == []
    lease = claim_when_due(t, "the delayed message to come due")
    assert lease.seq == seq and claimed_at(lease) >= due
    t.ack(lease)
    assert t.stats().queued == 0


def test_a_delayed_head_holds_its_group_back_others_go_on(connect, queue_urls) -> None:
    t = connect(",".join(queue_urls))
    a = t.publish("g", {"n": "a"}, delay=HOLD)
    b = t.publish("g", {"n": "b"})  # due at once, but behind a
    c = t.publish("h", {"n": "c"})
    first = t.claim("w", VIS)
    assert first is not None and first.seq == c
    assert t.claim("w", VIS) is None  # b waits behind its group's delayed head
    [head] = t.peek("g", limit=1)
    assert head.seq == a and head.state == "parked"
    assert head.lock_expiry == pytest.approx(due_times(queue_urls, a)[a])
    s = t.stats()
    assert (s.leased, s.parked, s.queued) == (1, 1, 3)
    t.ack(first)
    got = claim_when_due(t, "the delayed head")
    assert got.seq == a and claimed_at(got) >= due_times(queue_urls, a)[a]
    t.ack(got)
    nxt = t.claim("w", VIS)
    assert nxt is not None and nxt.seq == b  # FIFO kept
    t.ack(nxt)


def test_an_ack_onto_a_delayed_message_parks_the_group(connect, queue_urls) -> None:
    """The head advances onto a delayed message: by ack_and_claim (its chained claim must
    not take it), by ack, and by ack_many."""
    t = connect(",".join(queue_urls))
    firsts = {g: t.publish(g, {"g": g, "n": 0}) for g in ("p", "q", "r", "s")}
    delayed = {g: t.publish(g, {"g": g, "n": 1}, delay=DELAY) for g in firsts}
    due = due_times(queue_urls, *delayed.values())
    leases = {x.group_id: x for x in t.claim_many("w", VIS, 4)}
    assert {g: x.seq for g, x in leases.items()} == firsts
    assert t.ack_and_claim(leases["p"], "w", VIS) is None
    t.ack(leases["q"])
    assert t.ack_many([leases["r"], leases["s"]]) == [None, None]
    assert t.claim("w", VIS) is None and t.claim_many("w", VIS, 4) == []
    assert {m.state for g in firsts for m in t.peek(g)} == {"parked"}
    got: list[Lease] = []
    wait_for("the delayed heads", lambda: got.extend(t.claim_many("w", VIS, 4)) or len(got) == 4)
    assert sorted(x.seq for x in got) == sorted(delayed.values())
    assert all(claimed_at(x) >= due[x.seq] for x in got)
    assert t.ack_many(got) == [None] * 4


def test_concurrent_merged_claims_never_take_a_delayed_head_early(connect, queue_urls) -> None:
    """Many claims at once (merged into fused requests by group commit), with acks and
    ack_and_claims that move groups onto delayed messages, while delayed heads come due."""
    t = connect(",".join(queue_urls))
    items = []
    for g in range(6):
        items += [(f"g{g}", {"n": 0}, 0, 0), (f"g{g}", {"n": 1}, 0, DELAY), (f"g{g}", {"n": 2})]
    seqs = t.publish_many(items)
    delayed = [s for s, item in zip(seqs, items, strict=True) if len(item) > 3 and item[3]]
    due = due_times(queue_urls, *delayed)
    events = {s: (g, json.dumps(e)) for s, (g, e, *_) in zip(seqs, items, strict=True)}
    taken: list[Lease] = []
    lock = threading.Lock()

    def worker_sync(folds: bool) -> None:
        """Claim, then ack (or, ``folds``, ack_and_claim) until every message was taken."""
        lease = None
        while True:
            if lease is None:
                lease = t.claim("w", VIS, wait=0.5)
                if lease is None:
                    with lock:
                        if len(taken) == len(items):
                            return
                    continue
                with lock:
                    taken.append(lease)
            if folds:
                lease = t.ack_and_claim(lease, "w", VIS)
                if lease is not None:
                    with lock:
                        taken.append(lease)
            else:
                t.ack(lease)
                lease = None

    if connect.twin == "sync":
        threads = [threading.Thread(target=worker_sync, args=(i % 2 == 1,)) for i in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=30)
        assert not any(th.is_alive() for th in threads)
    else:
        transport, loop = t.transport, t._loop

        async def worker_async(folds: bool) -> None:
            lease = None
            while len(taken) < len(items) or lease is not None:
                if lease is None:
                    lease = await transport.claim("w", VIS, wait=0.5)
                    if lease is None:
                        continue
                    taken.append(lease)
                if folds:
                    lease = await transport.ack_and_claim(lease, "w", VIS)
                    if lease is not None:
                        taken.append(lease)
                else:
                    await transport.ack(lease)
                    lease = None

        async def workers() -> None:
            each = (worker_async(i % 2 == 1) for i in range(6))
            await asyncio.wait_for(asyncio.gather(*each), 30)

        loop.run_until_complete(workers())
    assert sorted(x.seq for x in taken) == sorted(seqs)
    for x in taken:
        assert (x.group_id, x.event) == events[x.seq]
        if x.seq in due:
            assert claimed_at(x) >= due[x.seq], f"message {x.seq} leased before it was due"
    for g in range(6):  # FIFO within each group
        mine = [x.seq for x in taken if x.group_id == f"g{g}"]
        assert mine == sorted(mine)


def test_publish_many_with_delays_and_deduplicated_delayed_publish(connect, queue_urls) -> None:
    t = connect(",".join(queue_urls))
    a, b, c, d = t.publish_many(
        [("p", {"n": "a"}, 0, DELAY), ("p", {"n": "b"}), ("q", {"n": "c"}, 2, 0), ("r", "[]", 1, 5)]
    )
    e = t.publish("s", {"n": "e"}, dedup_id="delayed-once", delay=DELAY)
    assert t.publish("s", {"n": "e"}, dedup_id="delayed-once", delay=DELAY) == e
    due = due_times(queue_urls, a, d, e)
    assert due[d] - due[a] == pytest.approx(4.0, abs=1e-6)  # one request, one time
    first = t.claim("w", VIS)
    assert first is not None and first.seq == c
    assert t.claim("w", VIS) is None
    got = []
    wait_for("a and e", lambda: got.extend(t.claim_many("w", VIS, 4)) or len(got) >= 2)
    assert sorted(x.seq for x in got) == [a, e]
    assert all(claimed_at(x) >= due[x.seq] for x in got)
    t.ack_many(got)
    nxt = t.claim("w", VIS)
    assert nxt is not None and nxt.seq == b  # r's message is still 5 s away
    assert [m.state for m in t.peek("r")] == ["parked"]


@pytest.mark.parametrize(
    ("delay", "error", "match"),
    [
        (-1, ValueError, "delay: must be >= 0"),
        (math.nan, ValueError, "delay: must be finite"),
        (math.inf, ValueError, "delay: must be finite"),
        ("1", TypeError, "delay: expected a number"),
        (True, TypeError, "delay: expected a number"),
    ],
)
def test_a_bad_delay_is_refused_naming_it(connect, queue_urls, delay, error, match) -> None:
    t = connect(",".join(queue_urls))
    with pytest.raises(error, match=match):
        t.publish("g", {}, delay=delay)
    with pytest.raises(error, match="items\\[1\\]." + match):
        t.publish_many([("g", {}), ("g", {}, 0, delay)])
    with pytest.raises(TypeError, match="items\\[0\\]"):
        t.publish_many([("g", {}, 0, 0, 0)])
    assert t.stats().queued == 0


# -- the SQL alone (SQLite, a controlled clock) ----------------------------------------


def test_a_park_set_by_the_triggers_never_overwrites_a_lease(executor: SqliteExecutor) -> None:
    q = Queue(executor)
    q.publish("g", '"a"')
    drive(q.core.publish("g", '"b"', 0, None, 10.0), executor)
    lease = q.claim()
    assert lease is not None
    # a head advance that keeps the lease (no statement of rqueue writes one): untouched
    executor.sql("UPDATE groups SET head_seq = head_seq + 1 WHERE group_id = 'g'")
    assert executor.sql("SELECT locked_by FROM groups") == [(lease.token,)]


def test_a_delayed_message_comes_due_by_the_lease_clock(executor: SqliteExecutor) -> None:
    q = Queue(executor)
    drive(q.core.publish("g", '"a"', 0, None, 10.0), executor)
    q.clock.now += 10.0  # due, but within the lapse margin (0 here): not yet
    assert q.claim() is None
    q.clock.now += 0.001
    assert q.claim() is not None


def test_an_older_database_gains_the_column_and_the_triggers() -> None:
    ex, _ = load()  # the release before this one, written by its own code
    assert "deliver_at" not in {r[1] for r in ex.sql("PRAGMA table_info(messages)")}
    q = Queue(ex)
    assert "deliver_at" in {r[1] for r in ex.sql("PRAGMA table_info(messages)")}
    assert "reason" in {r[1] for r in ex.sql("PRAGMA table_info(rqueue_dead)")}
    names = {r[0] for r in ex.sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert set(COUNTER_TRIGGERS) <= names
    seq = drive(q.core.publish("new", '"x"', 0, None, 5.0), ex)
    assert ex.sql("SELECT head_seq, locked_by FROM groups WHERE group_id = 'new'") == [
        (seq, PARKED)
    ]


def test_the_schema_migrates_on_the_cluster(connect, queue_urls) -> None:
    """A database without the column or the triggers (as an older release left it)."""
    stmts = [
        "DROP TRIGGER IF EXISTS rqueue_delay_new",
        "DROP TRIGGER IF EXISTS rqueue_delay_head",
        "ALTER TABLE messages DROP COLUMN deliver_at",
    ]
    for stmt in stmts:
        query_write(queue_urls, stmt)
    t = connect(",".join(queue_urls))
    columns = {r[0] for r in query(queue_urls, "SELECT name FROM pragma_table_info('messages')")}
    assert "deliver_at" in columns
    t.publish("g", {}, delay=60)
    assert t.claim("w", VIS) is None
    assert [m.state for m in t.peek("g")] == ["parked"]


def query_write(urls: list[str], sql: str) -> None:
    """One write straight over HTTP (not through rqueue), to any node that takes it."""
    for url in urls:
        try:
            r = requests.post(f"{url}/db/execute", json=[sql], timeout=10)
        except requests.RequestException:
            continue
        if r.status_code == 200 and "error" not in r.text:
            return
    raise AssertionError(f"no node of {urls} took {sql!r}")


def test_the_admin_cli_shows_a_delayed_head_parked_until_due(connect, queue_urls) -> None:
    from .test_admin_cli import cli

    t = connect(",".join(queue_urls))
    seq = t.publish("g", {"n": 1}, delay=3600)
    t.publish("g", {"n": 2})
    code, text = cli("peek", "g", urls=queue_urls)
    first, second = text.splitlines()
    assert code == 0 and first.split()[0] == str(seq)
    assert "state='parked'" in first and "parked_until=" in first
    assert "state='ready'" in second and "parked_until" not in second


def test_peek_shows_a_delayed_message_behind_the_head_as_delayed(connect, queue_urls) -> None:
    """Behind its group's head a message not yet due is ``delayed``, with its due time;
    ``stats()`` counts it as ready (its coming due is no write: see rqueue._stats)."""
    from .test_admin_cli import cli

    t = connect(",".join(queue_urls))
    a = t.publish("g", {"n": "a"})
    b = t.publish("g", {"n": "b"}, delay=3600)
    c = t.publish("g", {"n": "c"})
    due = due_times(queue_urls, b)[b]
    assert [(m.seq, m.state, m.deliver_at) for m in t.peek("g")] == [
        (a, "ready", None),
        (b, "delayed", pytest.approx(due)),
        (c, "ready", None),
    ]
    s = t.stats()
    assert (s.ready, s.leased, s.parked) == (3, 0, 0)
    code, text = cli("peek", "g", urls=queue_urls)
    delayed = text.splitlines()[1]
    assert code == 0 and "state='delayed'" in delayed and "delayed_until=" in delayed
    assert "parked_until" not in delayed and "delayed_until" not in text.splitlines()[0]
    lease = t.claim("w", VIS)
    assert lease is not None and lease.seq == a
    t.ack(lease)  # b is the head now: its group parks until b is due
    head, rest = t.peek("g")
    assert (head.seq, head.state, rest.state) == (b, "parked", "ready")
    assert head.lock_expiry == pytest.approx(due) and head.deliver_at == pytest.approx(due)
