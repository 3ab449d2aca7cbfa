"""The core's decisions after unknown outcomes, scripted call by call (no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from rqueue import Lease, LeaseLost, OutcomeUnknown, ProtocolError, Statements, Unavailable
from rqueue._core import QueueCore
from rqueue._decisions import decide_after_unknown
from rqueue._models import HttpCall, Result
from rqueue._statements import LEASE_RETURNING
from rqueue._version import ServerInfo

LEASE = Lease(7, "g", "{}", "w:tok")
READ_BACK = ("seq", "group_id", "event", "lock_expiry")


def core(version: str = "v8.36.0") -> QueueCore:
    return QueueCore(
        Statements(server_clock=True, clock=lambda: 0.0), ServerInfo.from_version(version)
    )


class Script:
    """Step an operation: feed results or throw errors, watch the calls it makes."""

    def __init__(self, op: Any) -> None:
        self.op = op
        self.calls: list[HttpCall] = [next(op)]
        self.value: Any = None
        self.done = False

    @property
    def call(self) -> HttpCall:
        return self.calls[-1]

    def _step(self, fn: Any, arg: Any) -> Script:
        try:
            self.calls.append(fn(arg))
        except StopIteration as stop:
            self.value, self.done = stop.value, True
        return self

    def send(self, *results: Result) -> Script:
        return self._step(self.op.send, tuple(results))

    def throw(self, exc: Exception) -> Script:
        return self._step(self.op.throw, exc)


def own(call: HttpCall) -> tuple:
    """The operation's own statements (without the time stamp the core puts first)."""
    return call.statements[1:] if call.stamped else call.statements


def token_of(call: HttpCall) -> str:
    return own(call)[0].params[0]


def test_claim_unknown_then_token_found_returns_that_lease() -> None:
    s = Script(core().claim("w", 30.0, 0))
    assert s.call.path == "/db/execute"
    token = token_of(s.call)
    s.throw(OutcomeUnknown("leadership lost"))
    assert s.call.path == "/db/query" and s.call.statements[0].params == (token,)
    s.send(Result(READ_BACK, ((5, "g", "{}", 99.0),)))
    assert s.done and s.value == Lease(5, "g", "{}", token)


def test_claim_unknown_then_token_absent_retries_with_the_same_token() -> None:
    s = Script(core().claim("w", 30.0, 0))
    token = token_of(s.call)
    s.throw(OutcomeUnknown("timeout")).send(Result(READ_BACK, ()))
    assert s.call.path == "/db/execute" and token_of(s.call) == token
    # the retried lease UPDATE takes the row already leased to the token, if any
    assert 'coalesce((SELECT group_id FROM "groups" WHERE locked_by = ?)' in own(s.call)[0].sql
    s.send(Result(READ_BACK, ()))
    assert s.done and s.value is None


def test_claim_is_one_request_whose_update_returns_the_leased_row() -> None:
    s = Script(core().claim("w", 30.0, 0))
    assert s.call.path == "/db/execute" and s.call.mergeable and len(own(s.call)) == 1
    lease_sql = own(s.call)[0].sql
    assert lease_sql.endswith(f"RETURNING {LEASE_RETURNING}")
    assert lease_sql.startswith('UPDATE "groups" SET locked_by = ?')  # one row written
    assert 'FROM "groups" WHERE' in lease_sql  # quoted: rqlite's parser must accept it
    token = token_of(s.call)
    s.send(Result(READ_BACK, ((5, "g", "{}", 99.0),)))
    assert s.done and s.value == Lease(5, "g", "{}", token, expires_at=99.0)


def test_claim_run_as_a_plain_write_reads_the_row_back() -> None:
    """A server that ignored RETURNING answers without columns: read back by token."""
    s = Script(core().claim("w", 30.0, 0))
    token = token_of(s.call)
    s.send(Result(rows_affected=1))
    assert s.call.path == "/db/query" and s.call.statements[0].params == (token,)
    s.send(Result(READ_BACK, ((5, "g", "{}", 99.0),)))
    assert s.done and s.value == Lease(5, "g", "{}", token, expires_at=99.0)


def test_claim_applied_but_unreadable_is_unknown() -> None:
    s = Script(core().claim("w", 30.0, 0))
    s.send(Result(rows_affected=1))
    with pytest.raises(OutcomeUnknown, match="applied, but the lease could not be read"):
        s.throw(Unavailable("no leader"))


def test_claim_unknown_and_lookup_impossible_is_unknown() -> None:
    s = Script(core().claim("w", 30.0, 0))
    s.throw(OutcomeUnknown("timeout"))
    with pytest.raises(OutcomeUnknown, match="could not be looked up"):
        s.throw(Unavailable("time is up"))


def test_claim_definite_failure_stays_definite() -> None:
    s = Script(core().claim("w", 30.0, 0))
    with pytest.raises(Unavailable):
        s.throw(Unavailable("leader not found"))


def test_old_server_claim_reads_back_after_unknown_lease() -> None:
    s = Script(core("v7.0.0").claim("w", 30.0, 0))
    assert s.call.path == "/db/execute" and "last_claimed_at" in own(s.call)[0].sql
    token = token_of(s.call)
    s.throw(OutcomeUnknown("timeout"))
    assert s.call.path == "/db/query"
    s.send(Result(READ_BACK, ((5, "g", "{}", 99.0),)))
    assert s.done and s.value.token == token


def test_three_request_claim_nothing_claimable() -> None:
    s = Script(core("v7.0.0").claim("w", 30.0, 0))
    s.send(Result(rows_affected=0))
    assert s.done and s.value is None


def test_ack_definite_zero_rows_is_lease_lost() -> None:
    s = Script(core().ack(LEASE))
    s.send(Result(rows_affected=0), Result(), Result())
    # changed nothing: applied before (a second application) only if remembered
    assert s.call.path == "/db/query" and own(s.call)[0].params == ("ack:w:tok",)
    with pytest.raises(LeaseLost):
        s.send(Result(("1",), ()))


def test_ack_zero_rows_but_remembered_is_acked() -> None:
    s = Script(core().ack(LEASE))
    s.send(Result(rows_affected=0), Result(), Result())
    s.send(Result(("1",), ((1,),)))
    assert s.done


@pytest.mark.parametrize(
    ("what", "row", "expected"),
    [
        ("ack", None, "unknown"),
        ("ack", ("w:tok", 1), "retry"),
        ("ack", ("w:tok", 0), "unknown"),  # a late attempt may still delete it
        ("ack", ("other", 1), "lost"),
        ("ack", (None, 0), "lost"),
        ("nack", ("w:tok", 1), "retry"),
        ("nack", ("w:tok", 0), "unknown"),  # a late attempt may still release it
        ("nack", (None, 0), "unknown"),
        ("nack", ("__parked__", 1), "unknown"),
        ("extend", ("w:tok", 1), "retry"),
        ("extend", ("w:tok", 0), "unknown"),
        ("extend", ("other", 1), "unknown"),
    ],
)
def test_decide_after_unknown(what: str, row: Any, expected: str) -> None:
    assert decide_after_unknown(what, "w:tok", [row] if row else []) == expected


def test_ack_unknown_then_row_still_ours_retries_and_succeeds() -> None:
    s = Script(core().ack(LEASE))
    s.throw(OutcomeUnknown("dropped"))
    assert s.call.path == "/db/query"
    s.send(Result(("locked_by", "live"), (("w:tok", 1),)))
    assert s.call.path == "/db/execute"
    s.send(Result(rows_affected=1), Result(), Result())
    assert s.done


def test_ack_unknown_then_row_gone_is_unknown() -> None:
    s = Script(core().ack(LEASE))
    s.throw(OutcomeUnknown("dropped"))
    with pytest.raises(OutcomeUnknown, match="does not settle"):
        s.send(Result(("locked_by", "live"), ()))


def test_ack_unknown_then_other_holder_is_lease_lost() -> None:
    s = Script(core().ack(LEASE))
    s.throw(OutcomeUnknown("dropped"))
    with pytest.raises(LeaseLost):
        s.send(Result(("locked_by", "live"), (("x:other", 1),)))


def test_dedup_publish_retries_after_unknown() -> None:
    s = Script(core().publish("g", "{}", 0, "d1"))
    first = s.call
    s.throw(OutcomeUnknown("timeout"))
    assert s.call == first  # the same statements again: safe with a dedup id
    s.send(Result(), Result(), Result(), Result(), Result(("seq",), ((12,),)))
    assert s.done and s.value == 12


def test_dedup_publish_stored_but_not_read_back_is_unknown() -> None:
    s = Script(core("v8.0.0").publish("g", "{}", 0, "d1"))
    assert s.call.path == "/db/execute"
    s.send(Result(), Result(rows_affected=1), Result(rows_affected=1), Result(rows_affected=1))
    assert s.call.path == "/db/query"
    with pytest.raises(OutcomeUnknown, match="stored, seq not read back"):
        s.throw(Unavailable("no node answered the read"))


def test_plain_publish_unknown_looks_its_key_up_and_sends_it_again() -> None:
    s = Script(core().publish("g", "{}", 0, None))
    first = own(s.call)
    key = first[0].params[-1]
    s.throw(OutcomeUnknown("timeout"))
    assert s.call.path == "/db/query" and own(s.call)[0].params == (key,)
    s.send(Result(("idem_key", "seq"), ()))  # not stored: the same request again
    assert own(s.call)[:3] == first[:3]
    s.throw(OutcomeUnknown("timeout"))
    s.send(Result(("idem_key", "seq"), ((key, 7),)))
    assert s.done and s.value == 7


def test_linearizable_needs_a_new_enough_server() -> None:
    with pytest.raises(ValueError, match="read_consistency"):
        QueueCore(
            Statements(server_clock=False, clock=lambda: 0.0),
            ServerInfo.from_version("v8.31.0"),
            read_consistency="linearizable",
        )
    c = QueueCore(
        Statements(server_clock=True, clock=lambda: 0.0),
        ServerInfo.from_version("v8.32.0"),
        read_consistency="linearizable",
    )
    assert c.read([], "x").query == (("level", "linearizable"),)


# -- ack_and_claim ------------------------------------------------------------------------
def fused_token(call: HttpCall) -> str:
    """The claim's token in an ack_and_claim request (its claim's first parameter)."""
    return own(call)[1].params[0]


def fused_results(acked: int, rows: tuple) -> tuple[Result, ...]:
    """An ack_and_claim's three results: the ack's head advance, claim, emptied group's drop."""
    return (Result(rows_affected=acked), Result(READ_BACK, rows), Result())


def test_ack_and_claim_is_one_request_whose_claim_is_chained_to_the_ack() -> None:
    s = Script(core().ack_and_claim(LEASE, "w", 30.0, 2))
    assert s.call.path == "/db/execute" and s.call.mergeable and len(own(s.call)) == 3
    assert own(s.call)[0].params[-3:] == ("g", LEASE.seq, LEASE.token)
    assert own(s.call)[1].sql.endswith(f"AND changes() > 0 RETURNING {LEASE_RETURNING}")
    token = fused_token(s.call)
    s.send(*fused_results(1, ((9, "h", "[]", 5.0),)))
    assert s.done and s.value == Lease(9, "h", "[]", token, expires_at=5.0)


def test_ack_and_claim_when_nothing_is_claimable_returns_none() -> None:
    s = Script(core().ack_and_claim(LEASE, "w", 30.0, 0))
    s.send(*fused_results(1, ()))
    assert s.done and s.value is None


def test_ack_and_claim_with_a_lost_lease_is_lease_lost_and_not_acked() -> None:
    s = Script(core().ack_and_claim(LEASE, "w", 30.0, 0))
    s.send(*fused_results(0, ()))
    assert s.call.path == "/db/query"  # the ack remembered? (a second application)
    with pytest.raises(LeaseLost, match="nothing was claimed") as caught:
        s.send(Result(("1",), ()))
    assert not caught.value.acked


def test_ack_and_claim_whose_ack_applied_before_claims_with_the_same_token() -> None:
    s = Script(core().ack_and_claim(LEASE, "w", 30.0, 0))
    token = fused_token(s.call)
    s.send(*fused_results(0, ()))
    s.send(Result(("1",), ((1,),)))  # the ack is remembered: applied before
    assert s.call.path == "/db/execute" and token_of(s.call) == token
    # the idempotent claim answers the row the first application leased to the token
    s.send(Result(READ_BACK, ((9, "h", "[]", 5.0),)))
    assert s.done and s.value == Lease(9, "h", "[]", token, expires_at=5.0)


def test_ack_and_claim_definite_failure_is_the_acks() -> None:
    s = Script(core().ack_and_claim(LEASE, "w", 30.0, 0))
    with pytest.raises(Unavailable) as caught:
        s.throw(Unavailable("leader not found"))
    assert not caught.value.acked


def test_ack_and_claim_unknown_then_token_found_proves_both() -> None:
    s = Script(core().ack_and_claim(LEASE, "w", 30.0, 0))
    token = fused_token(s.call)
    s.throw(OutcomeUnknown("leadership lost"))
    assert s.call.path == "/db/query" and s.call.statements[0].params == (token,)
    s.send(Result(READ_BACK, ((9, "h", "[]", 5.0),)))
    assert s.done and s.value == Lease(9, "h", "[]", token, expires_at=5.0)


def test_ack_and_claim_unknown_then_token_absent_settles_the_ack_then_claims() -> None:
    s = Script(core().ack_and_claim(LEASE, "w", 30.0, 0))
    token = fused_token(s.call)
    s.throw(OutcomeUnknown("timeout")).send(Result(READ_BACK, ()))
    assert s.call.path == "/db/execute" and "head_seq = (SELECT min(seq)" in own(s.call)[0].sql
    s.send(Result(rows_affected=1), Result())
    assert s.call.path == "/db/execute" and token_of(s.call) == token  # the same token
    s.send(Result(READ_BACK, ((9, "h", "[]", None),)))
    assert s.done and s.value == Lease(9, "h", "[]", token)


def test_ack_and_claim_unknown_then_row_gone_is_the_acks_unknown() -> None:
    s = Script(core().ack_and_claim(LEASE, "w", 30.0, 0))
    s.throw(OutcomeUnknown("timeout")).send(Result(READ_BACK, ()))
    s.send(Result(rows_affected=0), Result(), Result())
    assert s.call.path == "/db/query"  # the ack's own lookup
    with pytest.raises(OutcomeUnknown, match="timeout") as caught:
        s.send(Result(("locked_by", "live"), ()))
    assert not caught.value.acked


def test_ack_and_claim_claim_failure_after_the_ack_applied_says_acked() -> None:
    s = Script(core().ack_and_claim(LEASE, "w", 30.0, 0))
    s.throw(OutcomeUnknown("timeout")).send(Result(READ_BACK, ()))
    s.send(Result(rows_affected=1), Result(), Result())
    with pytest.raises(Unavailable) as caught:
        s.throw(Unavailable("no node answered"))
    assert caught.value.acked


def test_ack_and_claim_unreadable_row_after_the_ack_says_acked() -> None:
    s = Script(core().ack_and_claim(LEASE, "w", 30.0, 0))
    with pytest.raises(ProtocolError) as caught:
        s.send(*fused_results(1, (("x", 1, 2, 3),)))
    assert caught.value.acked


def test_ack_and_claim_on_an_old_server_acks_then_claims() -> None:
    s = Script(core("v7.0.0").ack_and_claim(LEASE, "w", 30.0, 0))
    assert s.call.path == "/db/execute" and own(s.call)[0].params[-3:] == ("g", 7, "w:tok")
    s.send(Result(rows_affected=1), Result())
    assert s.call.path == "/db/execute" and "locked_by = ?" in own(s.call)[0].sql
    with pytest.raises(OutcomeUnknown) as caught:
        s.throw(OutcomeUnknown("timeout")).throw(Unavailable("gone"))
    assert caught.value.acked


def test_ack_and_claim_on_an_old_server_with_a_lost_lease_claims_nothing() -> None:
    s = Script(core("v7.0.0").ack_and_claim(LEASE, "w", 30.0, 0))
    s.send(Result(rows_affected=0), Result(), Result())
    with pytest.raises(LeaseLost) as caught:
        s.send(Result(("1",), ()))
    assert not caught.value.acked


# -- a statement's error where rqlite may have committed the rest (rqueue._wire) -----------
def failed_statement(text: str = "no such table: rqueue_dead") -> OutcomeUnknown:
    exc = OutcomeUnknown(f"claim: outcome unknown: statement 1 failed: {text}")
    exc.statement_failed = True
    return exc


def test_claim_after_a_failed_statement_returns_the_lease_it_may_have_taken() -> None:
    s = Script(core().claim("w", 30.0, 0))
    token = token_of(s.call)
    s.throw(failed_statement())
    assert s.call.path == "/db/query"  # the token looked up
    s.send(Result(READ_BACK, ((5, "g", "{}", 99.0),)))
    assert s.done and s.value == Lease(5, "g", "{}", token)


def test_claim_after_a_failed_statement_is_not_sent_again() -> None:
    """The same request would fail alike: one lookup, then the error, not a resend."""
    s = Script(core().claim("w", 30.0, 0))
    s.throw(failed_statement())
    with pytest.raises(OutcomeUnknown, match="no such table") as info:
        s.send(Result(READ_BACK, ()))
    assert info.value.statement_failed and len(s.calls) == 2


def test_dedup_publish_after_a_failed_statement_is_not_sent_again() -> None:
    s = Script(core().publish("g", "{}", 0, "d-1"))
    assert s.call.path == "/db/request"
    with pytest.raises(OutcomeUnknown, match="no such table"):
        s.throw(failed_statement())
    assert len(s.calls) == 1
    s = Script(core().publish("g", "{}", 0, "d-1"))  # a lost answer is still retried
    s.throw(OutcomeUnknown("timeout"))
    assert len(s.calls) == 2 and s.call.path == "/db/request"
