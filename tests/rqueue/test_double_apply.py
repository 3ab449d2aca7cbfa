"""rqueue through a real proxy in front of a real node cluster that applies every write
twice (as rqlite v10's resend of a forwarded command does) or loses every second reply
after the write applied (closed or reset): every write is stored once, every claim gets
its lease, every settle succeeds, and no call raises OutcomeUnknown where a retry could
settle it. Both twins (the ``connect`` fixture)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from harness.subjects.mutants import NoIdempotencyStatements
from rqueue import AsyncRqliteTransport, OutcomeUnknown, RqliteTransport

from .replyproxy import ReplyProxy


def count(urls: list[str], sql: str) -> int:
    """One number read through the first node that answers (not through the proxy)."""
    for url in urls:
        try:
            r = requests.post(f"{url}/db/query?level=strong", json=[sql], timeout=10)
            return int(r.json()["results"][0]["values"][0][0])
        except (requests.RequestException, KeyError, IndexError, ValueError):
            continue
    raise AssertionError(f"no node of {urls} answered {sql!r}")


@pytest.fixture(params=["twice", "lose", "reset"])
def proxy(request: pytest.FixtureRequest, queue_urls: list[str]) -> Iterator[ReplyProxy]:
    p = ReplyProxy(queue_urls[0], request.param)
    try:
        yield p
    finally:
        p.close()


def mutant(connect: Any) -> type:
    """The twin under test of ``mutant-no-idempotency``'s transport."""
    base = RqliteTransport if connect.twin == "sync" else AsyncRqliteTransport
    return type("NoIdempotency", (base,), {"statements_class": NoIdempotencyStatements})


def drain(t: Any) -> list[int]:
    """Claim and ack until nothing is claimable; the events' numbers, in order."""
    got: list[int] = []
    for _ in range(100):
        lease = t.claim("w", 30.0)
        if lease is None:
            return got
        got.append(json.loads(lease.event)["n"])
        t.ack(lease)
    raise AssertionError(f"the queue did not drain in 100 claims: {got}")


def test_publishes_claims_and_acks_each_count_once(connect, queue_urls, proxy) -> None:
    t = connect(proxy.url, request_timeout=5.0)
    seqs = [t.publish(f"g{i % 3}", {"n": i}) for i in range(6)]
    seqs += t.publish_many([(f"g{i % 3}", {"n": i}) for i in range(6, 12)])
    assert len(set(seqs)) == 12, seqs
    assert count(queue_urls, "SELECT count(*) FROM messages") == 12
    got = drain(t)
    assert sorted(got) == list(range(12))  # each delivered once, none lost
    for g in range(3):  # FIFO within each group
        mine = [n for n in got if n % 3 == g]
        assert mine == sorted(mine)
    assert count(queue_urls, "SELECT count(*) FROM messages") == 0
    assert count(queue_urls, "SELECT count(*) FROM groups") == 0
    if proxy.mode == "twice":
        assert proxy.applied == 2 * proxy.writes
    else:
        assert proxy.lost > 0


def test_the_other_writes_settle_once(connect, queue_urls, proxy) -> None:
    t = connect(proxy.url, request_timeout=5.0)
    t.publish_many([(g, {"n": i}) for i, g in enumerate("aabbccdd")])
    first = t.claim_many("w", 30.0, 3)
    assert [x.group_id for x in first] == ["a", "b", "c"]
    extended = t.extend(first[0], 60.0)
    assert extended.token == first[0].token
    t.nack(first[1])  # released: b's head goes again
    nxt = t.ack_and_claim(first[2], "w", 30.0)  # c's head acked, d's head leased
    assert nxt is not None and nxt.group_id == "d"
    assert t.ack_many([extended, nxt]) == [None, None]
    rest = t.claim_many("w", 30.0, 10)
    assert sorted(x.group_id for x in rest) == ["a", "b", "c", "d"]
    assert [json.loads(x.event)["n"] for x in sorted(rest, key=lambda x: x.seq)] == [1, 2, 5, 7]
    assert t.ack_many(rest) == [None] * 4
    assert drain(t) == [3]
    assert count(queue_urls, "SELECT count(*) FROM messages") == 0
    assert count(queue_urls, "SELECT count(*) FROM groups") == 0


def test_without_idempotency_a_resend_duplicates_and_loses_claims(connect, queue_urls) -> None:
    """The mutant (today's publish and claim) through the same proxy: what rqueue fixed."""
    p = ReplyProxy(queue_urls[0], "twice")
    try:
        t = connect(p.url, mutant(connect), request_timeout=5.0)
        for i in range(3):
            t.publish("g", {"n": i})
        assert count(queue_urls, "SELECT count(*) FROM messages") == 6  # stored twice
        assert t.claim("w", 30.0) is None  # the first application took the lease
    finally:
        p.close()


def test_without_idempotency_a_lost_reply_is_outcome_unknown(connect, queue_urls) -> None:
    p = ReplyProxy(queue_urls[0], "lose")
    try:
        t = connect(p.url, mutant(connect), request_timeout=5.0)
        with pytest.raises(OutcomeUnknown):
            for i in range(4):
                t.publish("g", {"n": i})
    finally:
        p.close()
