"""max_deliveries, the dead-letter queue, peek and stats: both twins on a real cluster."""

from __future__ import annotations

import json

import pytest

from rqueue import DeadLetter

VIS = 30.0


def test_poison_is_dead_lettered_after_max_deliveries(connect, queue_urls) -> None:
    moved: list[DeadLetter] = []
    t = connect(",".join(queue_urls), max_deliveries=2, on_dead_letter=moved.append)
    poison = t.publish("g", {"n": 0}, priority=1)
    rest = [t.publish("g", {"n": i}, priority=1) for i in (1, 2)]
    for attempt in (1, 2):
        lease = t.claim("w", VIS)
        assert lease.seq == poison, f"delivery {attempt} is the poison message"
        assert moved == []
        t.nack(lease, 0, error=f"boom {attempt}")
    # the third claim moves it out and leases the next message of its group
    nxt = t.claim("w", VIS, min_priority=1)
    assert nxt.seq == rest[0]
    assert [(d.seq, d.deliveries, d.last_error) for d in moved] == [(poison, 2, "boom 2")]
    [dead] = t.dead_letters()
    assert (dead.seq, dead.group_id, json.loads(dead.event), dead.priority) == (
        poison,
        "g",
        {"n": 0},
        1,
    )
    s = t.stats()
    assert (s.ready, s.leased, s.parked, s.dead_lettered, s.groups) == (1, 1, 0, 1, 1)
    assert s.by_priority[1]["queued"] == 2
    peeked = t.peek("g")
    assert [(m.seq, m.state, m.deliveries) for m in peeked] == [
        (rest[0], "leased", 1),
        (rest[1], "ready", 0),
    ]
    t.ack(nxt)
    # redrive: back at the tail of its group, as a new message
    assert t.redrive(poison) == 1
    assert t.dead_letters() == []
    assert [json.loads(m.event) for m in t.peek("g")] == [{"n": 2}, {"n": 0}]
    assert t.stats().dead_lettered == 0


def test_a_live_lease_is_never_dead_lettered(connect, queue_urls) -> None:
    moved: list[DeadLetter] = []
    t = connect(",".join(queue_urls), max_deliveries=1, on_dead_letter=moved.append)
    seq = t.publish("g", {"x": 1})
    lease = t.claim("w1", VIS)  # its one delivery, still live
    assert t.claim("w2", VIS) is None
    assert moved == [] and t.dead_letters() == []
    t.ack(lease)  # fenced like before: the holder's ack works
    assert t.stats().queued == 0 and seq == lease.seq


def test_redrive_and_purge_selections(connect, queue_urls) -> None:
    t = connect(",".join(queue_urls), max_deliveries=1)
    for g in ("a", "a", "b"):
        t.publish(g, {"x": 1})
    for _ in range(3):
        lease = t.claim("w", VIS)
        if lease is not None:
            t.nack(lease, 0)
    while t.claim("w", VIS) is not None:
        pass
    assert {d.group_id for d in t.dead_letters()} == {"a", "b"}
    assert t.stats().dead_lettered == 3
    assert t.purge(group_id="b") == 1
    assert t.redrive(all=True) == 2
    assert t.stats().dead_lettered == 0 and t.stats().ready == 2
    with pytest.raises(ValueError, match="exactly one"):
        t.purge()
    with pytest.raises(ValueError, match="max_deliveries"):
        connect(",".join(queue_urls), max_deliveries=0)


def test_a_claim_that_leases_nothing_still_reports_what_it_moved(connect, queue_urls) -> None:
    moved: list[DeadLetter] = []
    t = connect(",".join(queue_urls), max_deliveries=1, on_dead_letter=moved.append)
    seq = t.publish("low", {"x": 1}, priority=0)
    t.nack(t.claim("w", VIS), 0)
    assert t.claim("w", VIS, min_priority=3) is None  # nothing that high, but it moves
    assert [d.seq for d in moved] == [seq]


def test_a_claim_that_dead_letters_is_still_one_request(queue_urls) -> None:
    from rqueue import RqliteTransport

    from .test_requests_per_call import _Counted

    t = RqliteTransport.from_url(",".join(queue_urls), max_deliveries=1)
    try:
        if not t.server.one_request_claim:
            pytest.skip(f"server {t.server.version}: claims take three requests before 8.23")
        first, second = t.publish("g", {"n": 1}), t.publish("g", {"n": 2})
        t.nack(t.claim("w", VIS), 0)
        t._session = counted = _Counted(t._session)
        lease = t.claim("w", VIS)  # moves the first, leases the second
        assert lease.seq == second and [d.seq for d in t.dead_letters()] == [first]
        assert counted.bodies[0][0].startswith("/db/request")
        assert len(counted.bodies) == 2  # the claim, then dead_letters()' read
        t.ack(lease)
    finally:
        t.close()
