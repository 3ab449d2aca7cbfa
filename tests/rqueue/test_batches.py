"""claim_many and ack_many: both twins, on a real embedded cluster and through faults."""

from __future__ import annotations

import json
import threading

import pytest

from rqueue import Lease, LeaseLost, OutcomeUnknown, RqliteTransport

from .fakes import FakeNode, SqliteExecutor


def fill(t, groups: str, each: int) -> None:
    t.publish_many([(g, json.dumps(f"{g}{i}")) for i in range(each) for g in groups])


def test_claim_many_leases_one_head_per_group_and_ack_many_settles_each(
    connect, queue_urls
) -> None:
    t = connect(",".join(queue_urls))
    fill(t, "abcde", 2)
    leases = t.claim_many("w", 30, max_messages=10)
    assert [x.event for x in leases] == ['"a0"', '"b0"', '"c0"', '"d0"', '"e0"']
    assert len({x.token for x in leases}) == 5 and t.claim("w", 30) is None
    stale = Lease(leases[0].seq, "a", leases[0].event, "w:stale", origin=leases[0].origin)
    outcomes = t.ack_many([*leases[1:], stale])
    assert outcomes[:4] == [None] * 4 and isinstance(outcomes[4], LeaseLost)
    assert [x.event for x in t.claim_many("w", 30, max_messages=3)] == ['"b1"', '"c1"', '"d1"']
    assert t.ack_many([leases[0]]) == [None]  # the live lease of a, acked on its own
    assert [x.event for x in t.claim_many("w", 30)] == ['"a1"', '"e1"']  # a claimed first
    assert t.claim_many("w", 30) == []


def test_claim_many_checks_its_arguments(connect, queue_urls) -> None:
    t = connect(",".join(queue_urls))
    with pytest.raises(ValueError, match="max_messages"):
        t.claim_many("w", 30, max_messages=0)
    with pytest.raises(TypeError, match="max_messages"):
        t.claim_many("w", 30, max_messages=2.0)
    assert t.ack_many([]) == []


def test_concurrent_claim_many_never_leases_a_group_twice(queue_urls) -> None:
    t = RqliteTransport.from_url(",".join(queue_urls))
    try:
        fill(t, [f"g{i}" for i in range(40)], 2)
        got: list[list[Lease]] = [[] for _ in range(8)]

        def work(k: int) -> None:
            got[k] = t.claim_many(f"w{k}", 30, max_messages=5)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=60)
        leases = [x for batch in got for x in batch]
        assert len(leases) == 40 and len({x.group_id for x in leases}) == 40
        assert all(x.event.endswith('0"') for x in leases)  # every group's head
        assert t.ack_many(leases) == [None] * 40
    finally:
        t.close()


@pytest.mark.parametrize("version", ["v10.2.7", "v8.36.18"])
@pytest.mark.parametrize("fault", ["lost", "drop"])
def test_claim_many_applied_but_answer_lost_returns_the_leases(
    connect, executor: SqliteExecutor, version: str, fault: str
) -> None:
    node = FakeNode(executor, version)
    try:
        t = connect(node.url)
        fill(t, "abc", 1)
        node.inject("/db/execute", fault)
        leases = t.claim_many("w", 30)
        assert [x.group_id for x in leases] == ["a", "b", "c"]
        held = dict(executor.sql("SELECT group_id, locked_by FROM groups"))
        assert held == {x.group_id: x.token for x in leases}
        node.inject("/db/execute", fault)
        # applied, answer lost: the rows are gone, but each applied ack is remembered
        # (rqueue_keys, 'ack:TOKEN'): each outcome is known, acked
        outcomes = t.ack_many(leases)
        assert outcomes == [None, None, None]
        assert executor.sql("SELECT count(*) FROM messages") == [(0,)]
    finally:
        node.stop()


def test_not_applied_is_sent_again_and_a_live_lease_is_acked_after_a_lookup(
    connect, executor: SqliteExecutor
) -> None:
    node = FakeNode(executor, "v10.2.7")
    try:
        t = connect(node.url)
        fill(t, "ab", 1)
        node.inject("/db/execute", "503")
        leases = t.claim_many("w", 30)
        assert [x.group_id for x in leases] == ["a", "b"]
        node.inject("/db/execute", "503")
        assert t.ack_many(leases) == [None, None]
        assert executor.sql("SELECT count(*) FROM messages") == [(0,)]
    finally:
        node.stop()


def test_ack_many_unknown_then_still_ours_sends_those_again() -> None:
    from rqueue._many import ack_many
    from rqueue._models import Result

    from .test_core_decisions import LEASE, Script, core

    other = Lease(8, "h", "{}", "w:other")
    s = Script(ack_many(core("v10.2.7"), [LEASE, other]))
    assert s.call.path == "/db/execute" and len(s.call.statements) == 3  # stamp, ack, drop
    s.throw(OutcomeUnknown("leadership lost"))
    # each row, and whether each ack is remembered as applied
    assert s.call.path == "/db/query" and len(s.call.statements) == 4
    none = Result(("1",), ())
    ours, gone = Result(("locked_by", "live"), (("w:tok", 1),)), Result(("locked_by", "live"))
    s.send(ours, gone, none, none)
    assert s.call.path == "/db/execute" and s.call.statements[1].params == ("g", "w:tok")
    s.send(Result(("acked_by",), (("w:tok",),)), Result())
    assert s.done and s.value[0] is None and isinstance(s.value[1], OutcomeUnknown)


def test_claim_many_unknown_then_no_token_found_sends_the_same_tokens_again() -> None:
    """The claim loop the batch shares with the single claim (QueueCore.claim_until_known)."""
    from rqueue import Unavailable
    from rqueue._many import claim_many
    from rqueue._models import Result

    from .test_core_decisions import READ_BACK, Script, core, own

    columns = (*READ_BACK, "token")
    s = Script(claim_many(core("v10.2.7"), "w", 30.0, 0, 2))
    sent = own(s.call)
    assert s.call.path == "/db/execute" and len(sent) == 1  # one fused UPDATE
    s.throw(OutcomeUnknown("leadership lost"))
    tokens = s.call.statements[0].params
    assert s.call.path == "/db/query" and len(tokens) == 2
    s.send(Result(columns, ()))  # none found: nothing was leased
    assert s.call.path == "/db/execute" and own(s.call) == sent  # the same tokens again
    s.send(Result(columns, ((6, "b", "{}", 99.0, tokens[1]), (5, "a", "{}", 99.0, tokens[0]))))
    assert s.done and [(x.seq, x.token) for x in s.value] == [(5, tokens[0]), (6, tokens[1])]

    s = Script(claim_many(core("v10.2.7"), "w", 30.0, 0, 2))
    s.throw(OutcomeUnknown("timeout")).send(Result(columns, ()))
    with pytest.raises(OutcomeUnknown, match="timeout; retries gave up"):
        s.throw(Unavailable("no leader"))
