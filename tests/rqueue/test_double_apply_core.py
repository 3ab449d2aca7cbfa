"""The core's writes applied twice, on real SQLite (no network): every write the core
yields runs twice on the executor and the operation gets the second answer, as rqlite
v10 answers a forwarded command it resent. Each server generation's statements: fused
(v10.2.7, v9.4.5), one-request claims without fusing (v8.36.18) and three-request
claims (v8.0.0); merged (group commit) requests too."""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

import pytest

from rqueue import LeaseLost
from rqueue._batch import merge, split_results
from rqueue._core import QueueCore
from rqueue._many import ack_many, claim_many
from rqueue._models import HttpCall
from rqueue._statements import Statements
from rqueue._version import ServerInfo
from rqueue._wire import Outcome, classify_response

from .fakes import SqliteExecutor, drive

VERSIONS = ["v10.2.7", "v9.4.5", "v8.36.18", "v8.0.0"]


def twice(op: Generator[HttpCall, Any, Any], ex: SqliteExecutor) -> Any:
    """Run ``op``, every write applied twice and answered with the second result."""
    try:
        call = next(op)
        while True:
            answer = ex.run(call.path, dict(call.query), call.body())
            if call.path != "/db/query":
                answer = ex.run(call.path, dict(call.query), call.body())
            verdict = classify_response(call, 200, json.dumps(answer))
            assert verdict.outcome is Outcome.OK, verdict.reason
            call = op.send(call.for_caller(verdict.results))
    except StopIteration as stop:
        return stop.value


def core(version: str) -> QueueCore:
    c = QueueCore(
        Statements(server_clock=False, clock=lambda: 1000.0), ServerInfo.from_version(version)
    )
    return c


@pytest.fixture(params=VERSIONS)
def q(request: pytest.FixtureRequest) -> tuple[QueueCore, SqliteExecutor]:
    ex, c = SqliteExecutor(), core(request.param)
    drive(c.open(), ex)
    return c, ex


def rows(ex: SqliteExecutor, sql: str) -> list[tuple[Any, ...]]:
    return ex.sql(sql)


def test_publish_and_publish_many_store_once_and_return_their_seqs(q) -> None:
    c, ex = q
    one = twice(c.publish("a", '"a0"', 0, None), ex)
    many = twice(c.publish_many([("a", '"a1"', 0), ("b", '"b0"', 2)]), ex)
    seqs = [one, *many]
    assert rows(ex, "SELECT seq, event FROM messages ORDER BY seq") == list(
        zip(seqs, ['"a0"', '"a1"', '"b0"'], strict=True)
    )
    assert rows(ex, "SELECT group_id, priority, head_seq FROM groups ORDER BY group_id") == [
        ("a", 0, one),
        ("b", 2, many[1]),
    ]


def test_claims_answer_the_lease_they_took_and_count_one_delivery(q) -> None:
    c, ex = q
    drive(c.publish_many([(g, f'"{g}"', 0) for g in "abcd"]), ex)
    first = twice(c.claim("w", 30.0, 0), ex)
    assert first is not None and first.group_id == "a"
    batch = twice(claim_many(c, "w", 30.0, 0, 2), ex)
    assert [x.group_id for x in batch] == ["b", "c"]
    leased = dict(rows(ex, "SELECT group_id, locked_by FROM groups WHERE locked_by IS NOT NULL"))
    assert leased == {x.group_id: x.token for x in [first, *batch]}
    assert rows(ex, "SELECT DISTINCT deliveries FROM groups WHERE locked_by IS NOT NULL") == [(1,)]


def test_settles_applied_twice_succeed_once(q) -> None:
    c, ex = q
    drive(c.publish_many([(g, f'"{g}{i}"', 0) for i in range(2) for g in "abcd"]), ex)
    a, b, cc, d = (drive(c.claim("w", 30.0, 0), ex) for _ in range(4))
    twice(c.ack(a), ex)
    twice(c.nack(b, 0.0), ex)
    twice(c.extend(cc, 60.0), ex)
    nxt = twice(c.ack_and_claim(cc, "w", 30.0, 0), ex)
    assert nxt is not None and nxt.group_id in "ab"  # a's and b's heads are free
    assert twice(ack_many(c, [d, nxt]), ex) == [None, None]
    # a0, c0, d0 and nxt's head acked, each once: four messages left, each group's own
    left = rows(ex, "SELECT event FROM messages ORDER BY seq")
    assert len(left) == 4
    with pytest.raises(LeaseLost):
        drive(c.nack(a, 0.0), ex)  # acked, not nacked: a nack of it is still refused


@pytest.mark.parametrize("version", ["v10.2.7", "v8.36.18"])
def test_merged_claims_and_acks_applied_twice(version: str) -> None:
    """Group commit: concurrent claims and ack_and_claims merged into one request (fused
    into one statement per kind on v10), that request applied twice."""
    ex, c = SqliteExecutor(), core(version)
    drive(c.open(), ex)
    drive(c.publish_many([(g, f'"{g}{i}"', 0) for i in range(2) for g in "abcdef"]), ex)
    held = [drive(c.claim("w", 30.0, 0), ex) for _ in range(2)]
    ops = [c.claim("w", 30.0, 0), c.claim("w", 30.0, 0), c.ack_and_claim(held[0], "w", 30.0, 0)]
    calls = [next(op) for op in ops]
    merged = merge(calls)
    ex.run(merged.path, dict(merged.query), merged.body())
    answer = ex.run(merged.path, dict(merged.query), merged.body())
    verdict = classify_response(merged, 200, json.dumps(answer))
    assert verdict.outcome is Outcome.OK, verdict.reason
    out = []
    for op, call, part in zip(
        ops, calls, split_results(calls, merged, verdict.results), strict=True
    ):
        try:
            more = op.send(call.for_caller(part))
            while True:  # reads of what applied before
                ans = ex.run(more.path, dict(more.query), more.body())
                more = op.send(classify_response(more, 200, json.dumps(ans)).results)
        except StopIteration as stop:
            out.append(stop.value)
    assert all(x is not None for x in out), out
    leased = dict(rows(ex, "SELECT locked_by, group_id FROM groups WHERE locked_by IS NOT NULL"))
    # held[1] and the three new leases, each answered to its caller
    assert {x.token for x in out} | {held[1].token} == set(leased)
    assert rows(ex, "SELECT count(*) FROM messages") == [(11,)]  # held[0]'s head acked once
