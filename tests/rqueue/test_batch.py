"""Group commit's sans-IO part (rqueue._batch): turn-taking, merging, and what one merged
exchange means for each of its calls. No network: real ``Endpoints``, canned answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rqueue import Lease, OutcomeUnknown, StatementError, Statements, Unavailable
from rqueue._batch import (
    PAUSE_AFTER_FAILURE,
    Alone,
    Coalescer,
    Done,
    Exchange,
    Failed,
    Waiting,
    answered,
    deadline_of,
    exchange,
    fragment,
    merge,
    merged_body,
    no_word,
    request_path,
    request_target,
    send_failed,
    stopped_sender,
)
from rqueue._core import QueueCore
from rqueue._endpoints import Endpoints
from rqueue._models import HttpCall, Result, Stmt
from rqueue._version import ServerInfo

TX = (("transaction", "true"),)
A, B = "http://a:4001", "http://b:4011"


def call(n: int = 1, path: str = "/db/execute", what: str = "op", query: Any = TX) -> HttpCall:
    """A mergeable call of ``n`` statements, each tagged with ``what`` and its index."""
    stmts = tuple(Stmt("SELECT ?", (f"{what}.{i}",)) for i in range(n))
    return HttpCall(path, stmts, query, what=what, mergeable=True)


def waiting(n: int = 1, what: str = "op", deadline: float = 100.0) -> Waiting:
    return Waiting(call(n, what=what), deadline)


def endpoints() -> Endpoints:
    """Two nodes; ``A`` is current and trusted (it answered the last call)."""
    e = Endpoints([A, B])
    e.succeeded(A)
    return e


def ok_body(*counts: int) -> str:
    """An rqlite answer with one result per statement; ``rows_affected`` numbers them."""
    total = sum(counts)
    return json.dumps({"results": [{"rows_affected": i} for i in range(total)]})


# -- the coalescer's turn-taking ----------------------------------------------------------


def test_first_arrival_sends_alone_at_once() -> None:
    c = Coalescer()
    w = waiting()
    assert c.arrive(w) == [w]
    assert w.taken and c.in_flight == 1
    assert w.batch is None  # its owner is already sending: nobody to wake
    assert c.finished() is None
    assert c.in_flight == 0
    assert (c.merged_requests, c.merged_calls) == (0, 0)


def test_arrivals_during_a_flight_queue_and_go_together_next() -> None:
    c = Coalescer()
    first, second, third = waiting(what="1"), waiting(what="2"), waiting(what="3")
    assert c.arrive(first) == [first]
    assert c.arrive(second) is None
    assert c.arrive(third) is None
    assert not second.taken and not third.taken
    assert c.in_flight == 1

    batch = c.finished()
    assert batch == [second, third]
    assert second.batch is batch  # the oldest waiting call's owner sends it
    assert third.batch is None
    assert second.taken and third.taken
    assert c.in_flight == 1  # the next batch took the flight over
    assert (c.merged_requests, c.merged_calls) == (1, 2)

    assert c.finished() is None
    assert c.in_flight == 0


def test_a_lone_waiting_call_is_not_counted_as_merged() -> None:
    c = Coalescer()
    c.arrive(waiting())
    later = waiting()
    c.arrive(later)
    assert c.finished() == [later]
    assert later.batch == [later]
    assert (c.merged_requests, c.merged_calls) == (0, 0)
    assert c.finished() is None and c.in_flight == 0


def test_batches_respect_max_calls() -> None:
    c = Coalescer(max_calls=2)
    c.arrive(waiting())
    queued = [waiting(what=str(i)) for i in range(5)]
    for w in queued:
        assert c.arrive(w) is None
    sizes = []
    while (batch := c.finished()) is not None:
        sizes.append([w.call.what for w in batch])
    assert sizes == [["0", "1"], ["2", "3"], ["4"]]
    assert (c.merged_requests, c.merged_calls) == (2, 4)
    assert c.in_flight == 0


def test_batches_respect_max_statements_and_an_oversized_call_goes_alone() -> None:
    c = Coalescer(max_statements=5)
    c.arrive(waiting())
    for n in (2, 2, 2, 3, 9, 1):
        c.arrive(waiting(n, what=str(n)))
    batches = []
    while (batch := c.finished()) is not None:
        batches.append([len(w.call.statements) for w in batch])
    # 2+2 (a third 2 would make 6), 2+3, then 9 alone (more than the limit, never stuck)
    assert batches == [[2, 2], [2, 3], [9], [1]]
    assert c.in_flight == 0


def test_withdraw_only_before_being_taken() -> None:
    c = Coalescer()
    sender = waiting()
    c.arrive(sender)
    stays, leaves, last = waiting(what="stays"), waiting(what="leaves"), waiting(what="last")
    for w in (stays, leaves, last):
        c.arrive(w)
    assert not c.withdraw(sender)  # sending: too late
    assert c.withdraw(leaves)
    batch = c.finished()
    assert batch == [stays, last]
    assert not c.withdraw(stays)  # the new sender
    assert not c.withdraw(last)  # taken into its batch
    assert c.finished() is None
    assert c.in_flight == 0


def test_withdrawing_every_waiting_call_leaves_nothing_to_send() -> None:
    c = Coalescer()
    c.arrive(waiting())
    gone = [waiting() for _ in range(3)]
    for w in gone:
        c.arrive(w)
    assert all(c.withdraw(w) for w in gone)
    assert c.finished() is None
    assert c.in_flight == 0


def test_more_flights_at_once_when_allowed() -> None:
    c = Coalescer(max_in_flight=2)
    a, b, q = waiting(), waiting(), waiting()
    assert c.arrive(a) == [a]
    assert c.arrive(b) == [b]
    assert c.arrive(q) is None
    assert c.in_flight == 2
    assert c.finished() == [q]
    assert c.in_flight == 2
    assert c.finished() is None
    assert c.finished() is None
    assert c.in_flight == 0


def test_pause_and_accepting() -> None:
    c = Coalescer()
    assert c.accepting(0.0)
    c.pause(10.0)
    assert not c.accepting(10.0)
    assert not c.accepting(10.0 + PAUSE_AFTER_FAILURE - 0.01)
    assert c.accepting(10.0 + PAUSE_AFTER_FAILURE)
    c.pause(20.0, seconds=5.0)
    c.pause(21.0, seconds=1.0)  # a shorter pause does not cut a longer one short
    assert not c.accepting(24.9)
    assert c.accepting(25.0)


@pytest.mark.parametrize("limits", [(0, 1, 1), (1, 0, 1), (1, 1, 0)])
def test_limits_must_leave_room(limits: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError):
        Coalescer(*limits)


def test_deadline_of_a_batch_is_its_earliest() -> None:
    assert deadline_of([waiting(deadline=5.0), waiting(deadline=3.0), waiting()]) == 3.0


# Any interleaving of arrivals, finished flights and withdrawals (indices into the calls
# still waiting), under any limits.
_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("arrive"), st.integers(1, 6)),
        st.tuples(st.just("finish"), st.just(0)),
        st.tuples(st.just("withdraw"), st.integers(0, 10)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(
    steps=_STEPS,
    max_calls=st.integers(1, 5),
    max_statements=st.integers(1, 12),
    max_in_flight=st.integers(1, 3),
)
def test_every_call_is_taken_once_in_arrival_order_within_the_limits(
    steps: list[tuple[str, int]], max_calls: int, max_statements: int, max_in_flight: int
) -> None:
    c = Coalescer(max_calls, max_statements, max_in_flight)
    arrived: list[Waiting] = []
    withdrawn: list[Waiting] = []
    taken: list[Waiting] = []
    queue: list[Waiting] = []  # the model of who waits
    merged = [0, 0]

    def took(batch: list[Waiting] | None, from_finish: bool) -> None:
        if batch is None:
            return
        assert 1 <= len(batch) <= max_calls
        statements = sum(len(w.call.statements) for w in batch)
        assert len(batch) == 1 or statements <= max_statements
        if from_finish:
            assert batch[0].batch is batch
            assert batch == queue[: len(batch)]
            del queue[: len(batch)]
            if queue and len(batch) < max_calls:  # greedy: stopped only by the statements
                assert statements + len(queue[0].call.statements) > max_statements
            if len(batch) > 1:
                merged[0] += 1
                merged[1] += len(batch)
        assert all(w.taken for w in batch)
        taken.extend(batch)

    for i, (op, arg) in enumerate(steps):
        if op == "arrive":
            w = waiting(arg, what=str(i))
            arrived.append(w)
            batch = c.arrive(w)
            if batch is None:
                queue.append(w)
            else:
                assert batch == [w] and not queue  # nobody overtakes a waiting call
            took(batch, from_finish=False)
        elif op == "finish" and c.in_flight > 0:
            took(c.finished(), from_finish=True)
        elif op == "withdraw" and queue:
            w = queue.pop(arg % len(queue))
            assert c.withdraw(w)
            withdrawn.append(w)
        elif op == "withdraw" and taken:
            assert not c.withdraw(taken[arg % len(taken)])
        assert 0 <= c.in_flight <= max_in_flight
        assert not queue or c.in_flight == max_in_flight  # waiting only while it is full

    while c.in_flight > 0:  # the flights still going end
        took(c.finished(), from_finish=True)
    assert not queue
    assert taken == [w for w in arrived if w not in withdrawn]
    assert len({id(w) for w in taken}) == len(taken)
    assert [c.merged_requests, c.merged_calls] == merged


# -- merge --------------------------------------------------------------------------------


def test_merge_of_one_call_is_that_call() -> None:
    one = call(3, path="/db/request")
    assert merge([one]) is one


def test_merge_keeps_statement_order_and_takes_execute_for_writes_only() -> None:
    calls = [call(2, what="x"), call(1, what="y"), call(3, what="z")]
    merged = merge(calls)
    assert merged.path == "/db/execute"
    assert merged.statements == tuple(s for c in calls for s in c.statements)
    assert merged.query == TX
    assert merged.what == "3 merged calls"
    assert not merged.idempotent  # a merged write is never re-sent blindly


def test_merge_takes_request_when_any_call_is_a_request() -> None:
    calls = [call(1), call(3, path="/db/request", what="claim"), call(1)]
    merged = merge(calls)
    assert merged.path == "/db/request"
    assert [s.params[0] for s in merged.statements] == [
        "op.0",
        "claim.0",
        "claim.1",
        "claim.2",
        "op.0",
    ]


def test_merge_refuses_different_query_parameters() -> None:
    with pytest.raises(ValueError, match="query"):
        merge([call(1), call(1, query=())])


def test_request_target() -> None:
    merged = merge([call(1, what="x"), call(2, path="/db/request", what="y")])
    path, body = request_target(merged)
    assert path == "/db/request?transaction=true"
    assert json.loads(body) == [["SELECT ?", "x.0"], ["SELECT ?", "y.0"], ["SELECT ?", "y.1"]]
    assert request_target(HttpCall("/db/execute", (Stmt("DELETE FROM t"),)))[0] == "/db/execute"


def test_merged_body_joins_the_fragments_each_caller_encoded() -> None:
    calls = [call(1, what="x"), call(2, path="/db/request", what="y")]
    batch = [Waiting(c, 0.0, fragment=fragment(c)) for c in calls]
    assert json.loads(merged_body(batch)) == json.loads(request_target(merge(calls))[1])
    # a waiting call without a fragment (none given) is encoded when the batch is sent
    bare = [Waiting(c, 0.0) for c in calls]
    assert merged_body(bare) == merged_body(batch)
    assert request_path(merge(calls)) == "/db/request?transaction=true"


def stamped_call(what: str, n: int = 2) -> HttpCall:
    """A call that starts with the core's time stamp, then ``n`` statements of its own."""
    own = call(n, what=what)
    stamp = Stmt("INSERT OR REPLACE INTO rqueue_clock (id, ts) VALUES (1, 0.5)")
    return HttpCall(own.path, (stamp, *own.statements), own.query, what=what, stamped=True)


def test_merged_stamped_calls_share_one_stamp_at_the_front() -> None:
    calls = [stamped_call("x"), call(1, what="plain"), stamped_call("y", 1)]
    merged = merge(calls)
    assert merged.stamped
    assert [s.sql for s in merged.statements].count(calls[0].statements[0].sql) == 1
    assert merged.statements[0] == calls[0].statements[0]
    assert len(merged.statements) == 1 + 2 + 1 + 1
    batch = [Waiting(c, 0.0, fragment=fragment(c)) for c in calls]
    assert json.loads(merged_body(batch)) == json.loads(request_target(merged)[1])
    # each call's results as if sent alone: the shared stamp's result first when stamped
    out = answered(calls, merged, A, 200, ok_body(5), endpoints())
    got = [[r.rows_affected for r in s.results] for s in out]
    assert got == [[0, 1, 2], [3], [0, 4]]
    assert [len(c.for_caller(s.results)) for c, s in zip(calls, out, strict=True)] == [2, 1, 1]


def test_a_lone_stamped_call_keeps_its_own_stamp() -> None:
    lone = stamped_call("x")
    assert merge([lone]) is lone
    batch = [Waiting(lone, 0.0, fragment=fragment(lone))]
    assert json.loads(merged_body(batch)) == json.loads(request_target(lone)[1])


def test_no_word_names_the_call_and_how_long_it_waited() -> None:
    out = no_word(waiting(what="claim"), 15.0)
    assert isinstance(out.error, OutcomeUnknown) and not out.poisoned
    assert str(out.error) == (
        "claim: outcome unknown: no word from the sender of its merged request after 15 s"
    )


def test_exchange_goes_to_the_trusted_node_within_the_time_left() -> None:
    batch = [Waiting(c, 0.0, fragment=fragment(c)) for c in three()]
    ex = exchange(batch, endpoints(), request_timeout=10.0, time_left=2.5)
    assert isinstance(ex, Exchange)
    assert (ex.url, ex.timeout, ex.path) == (A, 2.5, "/db/request?transaction=true")
    assert json.loads(ex.body) == json.loads(request_target(merge(ex.calls))[1])
    assert all(isinstance(s, Done) for s in ex.answered(200, ok_body(3, 1, 2)))
    failed = ex.failed("connection refused", sent=False)
    assert all(isinstance(s, Alone) for s in failed)


def test_exchange_sends_every_call_alone_without_a_trusted_node_or_time() -> None:
    batch = [waiting(2), waiting(1)]
    untrusted = Endpoints([A, B])  # nobody answered yet: failover needs its probe
    for e, left in ((untrusted, 5.0), (endpoints(), 0.0)):
        out = exchange(batch, e, request_timeout=10.0, time_left=left)
        assert isinstance(out, list) and all(isinstance(s, Alone) for s in out)


def test_conclude_settles_the_others_and_wakes_the_next_sender_first() -> None:
    c = Coalescer()
    own, other = waiting(what="own"), waiting(what="other")
    assert c.arrive(own) == [own]
    late = waiting(what="late")
    assert c.arrive(late) is None
    batch = [own, other]
    settled = [Done(()), Failed(OutcomeUnknown("x"), poisoned=True)]
    wake = c.conclude(batch, settled, own, now=50.0)
    assert wake == [late, other]  # the next sender, then the settled caller
    assert late.batch == [late] and other.settled is settled[1] and own.settled is None
    assert not c.accepting(50.5) and c.accepting(50.0 + PAUSE_AFTER_FAILURE)
    assert c.conclude([late], [Done(())], late, now=60.0) == [] and c.in_flight == 0


# -- answered: what one exchange means for each call -----------------------------------------


def three() -> list[HttpCall]:
    return [call(3, path="/db/request", what="claim"), call(1, what="ack"), call(2, what="nack")]


def test_ok_splits_the_results_per_call() -> None:
    calls, e = three(), Endpoints([A, B])
    e.failed(A)
    out = answered(calls, merge(calls), B, 200, ok_body(3, 1, 2), e)
    assert all(isinstance(s, Done) for s in out)
    assert [[r.rows_affected for r in s.results] for s in out] == [[0, 1, 2], [3], [4, 5]]
    assert e.current == B and e.trusted(B)  # the answering node is the one to stick to


def test_ok_carries_rows_of_each_calls_own_statements() -> None:
    calls = [call(1, what="a"), call(1, what="b")]
    body = {
        "results": [
            {"columns": ["seq"], "values": [[7]]},
            {"columns": ["seq"], "values": [[9]], "rows_affected": 1},
        ]
    }
    out = answered(calls, merge(calls), A, 200, json.dumps(body), endpoints())
    assert out == [
        Done((Result(("seq",), ((7,),)),)),
        Done((Result(("seq",), ((9,),), rows_affected=1),)),
    ]


def test_503_sends_every_call_alone_and_fails_the_node_over() -> None:
    calls, e = three(), endpoints()
    out = answered(calls, merge(calls), A, 503, "leader not found", e)
    assert all(isinstance(s, Alone) for s in out) and len(out) == 3
    assert A in out[0].reason and "503" in out[0].reason
    assert e.current == B and not e.trusted(A)


@pytest.mark.parametrize("status", [301, 307, 308])
def test_a_redirect_sends_every_call_alone(status: int) -> None:
    calls = three()
    out = answered(calls, merge(calls), A, status, "", endpoints())
    assert all(isinstance(s, Alone) for s in out)


def unknowns(out: list[Any]) -> list[OutcomeUnknown]:
    assert all(isinstance(s, Failed) for s in out)
    errors = [s.error for s in out]
    assert all(type(err) is OutcomeUnknown for err in errors)
    return errors


def test_200_with_a_top_level_error_is_unknown_for_every_call_named() -> None:
    calls, e = three(), endpoints()
    body = json.dumps({"error": "leadership lost while committing log"})
    out = answered(calls, merge(calls), A, 200, body, e)
    errors = unknowns(out)
    assert not any(s.poisoned for s in out)
    for c, err in zip(calls, errors, strict=True):
        assert str(err).startswith(f"{c.what} (merged with 2 other calls)")
        assert "leadership lost" in str(err)
    assert e.current == B  # an unknown answer fails the node over too


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (500, "boom"),
        (200, "not json"),
        (200, json.dumps({"results": [{}]})),  # too few results for six statements
        (200, json.dumps([1, 2])),
    ],
)
def test_other_unreadable_answers_are_unknown_for_every_call(status: int, text: str) -> None:
    calls = three()
    out = answered(calls, merge(calls), A, status, text, endpoints())
    assert len(unknowns(out)) == 3


def statement_failed() -> str:
    """Results that stop at a failed statement (rqlite with ``transaction``)."""
    return json.dumps({"results": [{"rows_affected": 1}, {"error": "UNIQUE constraint failed"}]})


def test_a_failed_statement_of_one_call_is_a_statement_error() -> None:
    calls, e = [call(3, path="/db/request", what="claim")], endpoints()
    out = answered(calls, merge(calls), A, 200, statement_failed(), e)
    assert len(out) == 1 and isinstance(out[0], Failed)
    assert isinstance(out[0].error, StatementError) and not out[0].poisoned
    assert str(out[0].error).startswith("claim: ") and "UNIQUE" in str(out[0].error)
    assert e.current == A and e.trusted(A)  # the node did its job


def test_a_rolled_back_merged_request_sends_every_call_alone_and_pauses() -> None:
    """A statement failed while running: rqlite rolled everything back and the results
    stop at it. Nothing applied: each call goes alone (the culprit then fails alone)."""
    calls, e = three(), endpoints()
    out = answered(calls, merge(calls), A, 200, statement_failed(), e)
    assert all(isinstance(s, Alone) and s.poisoned and "UNIQUE" in s.reason for s in out)
    co = Coalescer()
    own = Waiting(calls[0], 0.0)
    co.conclude([own, Waiting(calls[1], 0.0), Waiting(calls[2], 0.0)], out, own, now=5.0)
    assert not co.accepting(5.5) and co.accepting(6.0)


def test_a_prepare_failure_in_a_merged_request_poisons_every_call() -> None:
    """On /db/request a statement that fails to prepare gets an error entry and the others
    commit: every call's outcome is unknown, and each looks itself up."""
    calls, e = three(), endpoints()
    results = [{"rows_affected": 1}, {"error": "no such table: nope"}, *[{}] * 4]
    out = answered(calls, merge(calls), A, 200, json.dumps({"results": results}), e)
    errors = unknowns(out)
    assert all(s.poisoned for s in out)
    for c, err in zip(calls, errors, strict=True):
        assert str(err).startswith(f"{c.what} (merged with 2 other calls)")
        assert "no such table" in str(err) and "may have committed" in str(err)
        assert not err.statement_failed  # its own statements may be fine: it may go alone


def test_http_400_sends_merged_calls_alone_but_fails_a_single_one() -> None:
    calls = three()
    out = answered(calls, merge(calls), A, 400, "bad body", endpoints())
    assert all(isinstance(s, Alone) for s in out) and "400" in out[0].reason
    one = [call(1, what="ack")]
    (single,) = answered(one, merge(one), A, 400, "bad body", endpoints())
    assert isinstance(single, Failed) and isinstance(single.error, StatementError)


@pytest.mark.parametrize("status", [401, 403])
@pytest.mark.parametrize("n", [1, 3])
def test_refused_credentials_are_unavailable_for_every_call(status: int, n: int) -> None:
    calls = three()[:n]
    out = answered(calls, merge(calls), A, status, "", endpoints())
    assert len(out) == n
    for c, s in zip(calls, out, strict=True):
        assert isinstance(s, Failed) and isinstance(s.error, Unavailable)
        assert str(s.error).startswith(f"{c.what}: ") and not s.poisoned


# -- the exchange did not complete ----------------------------------------------------------


def test_send_failed_before_sending_sends_every_call_alone() -> None:
    calls, e = three(), endpoints()
    out = send_failed(calls, A, "connection refused", sent=False, endpoints=e)
    assert all(isinstance(s, Alone) for s in out) and len(out) == 3
    assert "connection refused" in out[0].reason
    assert e.current == B


def test_send_failed_after_sending_is_unknown_for_every_call() -> None:
    calls, e = three(), endpoints()
    out = send_failed(calls, A, "read timed out", sent=True, endpoints=e)
    for c, err in zip(calls, unknowns(out), strict=True):
        assert str(err).startswith(f"{c.what} (merged with 2 other calls)")
        assert "read timed out" in str(err)
    assert e.current == B


def test_send_failed_of_a_single_call_names_it_plainly() -> None:
    (out,) = send_failed([call(1, what="ack")], A, "reset", sent=True, endpoints=endpoints())
    assert isinstance(out, Failed) and str(out.error).startswith("ack: outcome unknown")


def test_stopped_sender() -> None:
    batch = [waiting(what="claim"), waiting(what="ack")]
    assert all(isinstance(s, Alone) for s in stopped_sender(batch, sent=False))
    out = stopped_sender(batch, sent=True)
    for w, err in zip(batch, unknowns(out), strict=True):
        assert str(err).startswith(f"{w.call.what}: outcome unknown")


# -- which calls the core offers for merging -------------------------------------------------

LEASE = Lease(7, "g", "{}", "w:tok")


def first_call(op: Any) -> HttpCall:
    return next(op)


@pytest.mark.parametrize(
    ("version", "make", "mergeable"),
    [
        ("v8.36.0", lambda c: c.claim("w", 30.0, 0), True),
        ("v8.36.0", lambda c: c.ack(LEASE), True),
        ("v8.36.0", lambda c: c.nack(LEASE, 0.0), True),
        ("v8.36.0", lambda c: c.nack(LEASE, 5.0), True),
        ("v8.36.0", lambda c: c.extend(LEASE, 30.0), True),
        ("v8.36.0", lambda c: c.publish("g", "{}", 0, "d-1"), True),
        ("v8.36.0", lambda c: c.publish("g", "{}", 0, None), False),
        ("v8.36.0", lambda c: c.publish_many([("g", "{}", 0)]), False),
        ("v8.36.0", lambda c: c.open(), False),
        ("v8.0.0", lambda c: c.claim("w", 30.0, 0), False),  # three requests
        ("v8.0.0", lambda c: c.publish("g", "{}", 0, "d-1"), False),
    ],
)
def test_which_calls_the_core_marks_mergeable(version: str, make: Any, mergeable: bool) -> None:
    core = QueueCore(
        Statements(server_clock=True, clock=lambda: 0.0), ServerInfo.from_version(version)
    )
    assert first_call(make(core)).mergeable is mergeable
