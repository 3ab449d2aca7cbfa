"""Merged requests fuse claims and acks into one statement of each kind (rqueue._batch):
the calls' operations get the results they would have got alone. Scripted over the
tests' SQLite executor (no server)."""

from __future__ import annotations

import json
from typing import Any

from rqueue import LeaseLost, Statements
from rqueue._batch import merge, split_results
from rqueue._core import QueueCore
from rqueue._models import HttpCall
from rqueue._version import ServerInfo
from rqueue._wire import Outcome, classify_response

from .fakes import SqliteExecutor, drive


def core(version: str = "v10.2.7") -> QueueCore:
    return QueueCore(
        Statements(server_clock=False, clock=lambda: 1000.0), ServerInfo.from_version(version)
    )


def run_merged(ex: SqliteExecutor, ops: list[Any]) -> tuple[HttpCall, list[Any]]:
    """Start every operation, send their first calls as one merged request, hand each its
    slice; return the merged call and what each operation returned (or raised)."""
    calls = [next(op) for op in ops]
    merged = merge(calls)
    answer = ex.run(merged.path, dict(merged.query), merged.body())
    verdict = classify_response(merged, 200, json.dumps(answer))
    assert verdict.outcome is Outcome.OK, verdict.reason
    out: list[Any] = []
    for op, call, part in zip(
        ops, calls, split_results(calls, merged, verdict.results), strict=True
    ):
        try:
            more = op.send(call.for_caller(part))
            while True:  # an ack that changed nothing reads whether it applied before
                assert more.path == "/db/query", f"a second write: {more.what}"
                ans = ex.run(more.path, dict(more.query), more.body())
                more = op.send(classify_response(more, 200, json.dumps(ans)).results)
        except StopIteration as stop:
            out.append(stop.value)
        except LeaseLost as exc:
            out.append(exc)
    return merged, out


def publish(c: QueueCore, ex: SqliteExecutor, groups: str, each: int = 2) -> None:
    drive(c.publish_many([(g, json.dumps(f"{g}{i}"), 0) for i in range(each) for g in groups]), ex)


def test_k_claims_are_one_statement_each_gets_its_own_group_in_claim_order() -> None:
    ex, c = SqliteExecutor(), core()
    drive(c.open(), ex)
    publish(c, ex, "abcdef")
    merged, leases = run_merged(ex, [c.claim(f"w{i}", 30.0, 0) for i in range(4)])
    assert len(merged.statements) == 1  # no stamp (the caller's clock), one claim
    assert [x.group_id for x in leases] == ["a", "b", "c", "d"]
    assert [x.token.split(":")[0] for x in leases] == ["w0", "w1", "w2", "w3"]
    held = dict(ex.sql("SELECT group_id, locked_by FROM groups WHERE locked_by IS NOT NULL"))
    assert held == {x.group_id: x.token for x in leases}
    keys = [k for (k,) in ex.sql("SELECT last_claimed_at FROM groups ORDER BY group_id")]
    assert keys[:4] == sorted(set(keys[:4])) and keys[4:] == [0.0, 0.0]  # in claim order
    # the next claims go on in round-robin order: e and f, then nothing is free
    _, more = run_merged(ex, [c.claim("w", 30.0, 0) for _ in range(3)])
    assert [x and x.group_id for x in more] == ["e", "f", None]


def test_merged_acks_and_ack_and_claims_are_one_statement_of_each_kind() -> None:
    ex, c = SqliteExecutor(), core()
    drive(c.open(), ex)
    publish(c, ex, "abcd")
    _, leases = run_merged(ex, [c.claim("w", 30.0, 0) for _ in range(4)])
    a, b, cc, d = leases
    stale = a.__class__(a.seq, a.group_id, a.event, "w:stale")
    ops = [c.ack(a), c.ack_and_claim(b, "w", 30.0, 0), c.ack_and_claim(stale, "w", 30.0, 0)]
    merged, out = run_merged(ex, [*ops, c.ack_and_claim(cc, "w", 30.0, 0)])
    # stamp-free (caller's clock): the acks, the claims, the drops: three statements
    assert [s.fuse.kind for s in merged.statements] == ["ack", "claim", "drop"]
    assert out[0] is None and isinstance(out[2], LeaseLost)
    assert {out[1].group_id, out[3].group_id} == {"a", "b"}  # the next messages of a and b
    assert ex.sql("SELECT count(*) FROM messages") == [(5,)]  # a0, b0, c0 acked
    assert d.token in dict(ex.sql("SELECT locked_by, 1 FROM groups WHERE locked_by IS NOT NULL"))


def test_a_claim_chained_to_a_lost_ack_takes_nothing_even_beside_applied_acks() -> None:
    ex, c = SqliteExecutor(), core()
    drive(c.open(), ex)
    publish(c, ex, "ab", each=1)
    _, (a, _b) = run_merged(ex, [c.claim("w", 30.0, 0) for _ in range(2)])
    stale = a.__class__(a.seq, a.group_id, a.event, "w:stale")
    _, out = run_merged(ex, [c.ack(a), c.ack_and_claim(stale, "w", 30.0, 0)])
    assert out[0] is None and isinstance(out[1], LeaseLost)
    assert ex.sql("SELECT count(*) FROM groups WHERE locked_by IS NOT NULL") == [(1,)]  # b


def test_v8_servers_do_not_fuse() -> None:
    ex, c = SqliteExecutor(), core("v8.36.18")
    drive(c.open(), ex)
    publish(c, ex, "abcd", each=1)
    merged, leases = run_merged(ex, [c.claim("w", 30.0, 0) for _ in range(3)])
    assert len(merged.statements) == 3 and merged.layout is None
    assert [x.group_id for x in leases] == ["a", "b", "c"]


def test_a_subclass_that_writes_a_claim_its_own_way_is_never_fused() -> None:
    from harness.subjects.mutants import EarlyDeadLetterStatements, NoExclusivityStatements

    for cls, fused in ((Statements, True), (NoExclusivityStatements, False)):
        s = cls(server_clock=True, clock=lambda: 0.0)
        s.fusing = True
        assert (s.fuser is s) is fused
    s = EarlyDeadLetterStatements(server_clock=True, clock=lambda: 0.0)
    s.fusing = True
    assert s.fuser is s  # only its limit differs: its claims fuse with that limit
