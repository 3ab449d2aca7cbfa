"""The unknown-outcome ladder (rqueue._ladder): its rungs on their own, scripted call by
call (no I/O); that it is the only retry loop in rqueue; and that a core leaves the
statements it is given as they are."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import rqueue
from rqueue import OutcomeUnknown, StatementError, Statements, Unavailable
from rqueue._config import Settings
from rqueue._core import QueueCore
from rqueue._decisions import Proof, decide_after_unknown
from rqueue._ladder import (
    LOOK_UP,
    Known,
    Ladder,
    Lookup,
    Tries,
    Unsettled,
    climb,
    sending,
)
from rqueue._models import HttpCall, Result, Stmt
from rqueue._version import ServerInfo

from .test_core_decisions import LEASE, Script, core

WRITE = HttpCall("/db/execute", (Stmt("UPDATE t SET x = 1"),), what="write")
READ = HttpCall("/db/query", (Stmt("SELECT x FROM t"),), idempotent=True, what="look up")
ROW = Result(("x",), ((1,),))
PACKAGE = Path(rqueue.__file__).parent


def ladder(lookup: bool = True, names_cause: bool = True, **kw: Any) -> Ladder[Any, Any]:
    """A write whose answer is its value ("answered"); its lookup finds the rows read."""
    found = Lookup(lambda: READ, lambda res: res[0].rows, "the row could not be looked up")
    if not names_cause:
        found = Lookup(found.read, found.found, found.unreadable, names_cause=False)
    answered = kw.pop("answered", lambda results, tries: Known("answered"))
    return Ladder(sending(lambda: WRITE), answered, found if lookup else None, **kw)


def unknown(why: str = "timeout", statement_failed: bool = False) -> OutcomeUnknown:
    exc = OutcomeUnknown(why)
    exc.statement_failed = statement_failed
    return exc


def test_an_answer_is_the_value() -> None:
    s = Script(climb(ladder())).send(Result())
    assert s.done and s.value == "answered" and s.calls == [WRITE]


def test_unknown_then_found_is_the_value() -> None:
    s = Script(climb(ladder())).throw(unknown())
    assert s.call is READ
    s.send(ROW)
    assert s.done and s.value == ((1,),) and s.calls == [WRITE, READ]


def test_unknown_then_not_found_sends_the_same_request_again() -> None:
    s = Script(climb(ladder())).throw(unknown()).send(Result(("x",), ()))
    assert s.calls == [WRITE, READ, WRITE]
    s.send(Result())
    assert s.done and s.value == "answered"


def test_without_a_lookup_the_request_goes_again_at_once() -> None:
    s = Script(climb(ladder(lookup=False))).throw(unknown())
    assert s.calls == [WRITE, WRITE]


@pytest.mark.parametrize("lookup", [True, False])
def test_a_failed_statement_is_not_sent_again(lookup: bool) -> None:
    failed = unknown("statement 1 failed", statement_failed=True)
    s = Script(climb(ladder(lookup=lookup)))
    with pytest.raises(OutcomeUnknown) as caught:
        s.throw(failed)
        s.send(Result(("x",), ()))  # not found: nothing applied, and it would fail alike
    assert caught.value is failed


def test_a_failed_statement_whose_effect_is_found_is_the_value() -> None:
    s = Script(climb(ladder())).throw(unknown(statement_failed=True)).send(ROW)
    assert s.done and s.value == ((1,),)


def test_a_definite_failure_first_is_raised_as_it_is() -> None:
    refused = StatementError("no such table")
    with pytest.raises(StatementError) as caught:
        Script(climb(ladder())).throw(refused)
    assert caught.value is refused


def test_a_definite_failure_after_an_unknown_outcome_is_unknown() -> None:
    s = Script(climb(ladder())).throw(unknown()).send(Result(("x",), ()))
    with pytest.raises(OutcomeUnknown, match=r"^timeout; retries gave up: no leader$") as caught:
        s.throw(Unavailable("no leader"))
    assert isinstance(caught.value.__cause__, Unavailable)


@pytest.mark.parametrize(
    ("names_cause", "message"),
    [
        (True, "timeout; the row could not be looked up: down"),
        (False, "timeout; the row could not be looked up"),
    ],
)
def test_a_lookup_that_fails_leaves_the_outcome_unknown(names_cause: bool, message: str) -> None:
    s = Script(climb(ladder(names_cause=names_cause))).throw(unknown())
    with pytest.raises(OutcomeUnknown) as caught:
        s.throw(Unavailable("down"))
    assert str(caught.value) == message


def test_what_the_lookup_proves_is_the_operations() -> None:
    s = Script(climb(ladder(proves=lambda rows: Unsettled("the row does not settle it"))))
    with pytest.raises(OutcomeUnknown, match=r"^timeout; the row does not settle it$"):
        s.throw(unknown()).send(ROW)


def test_an_answer_that_does_not_settle_it_is_looked_up() -> None:
    """A fenced write that changed nothing after an earlier unknown try (of another
    operation: ``Tries(unknown)``) is looked up, not taken for a lost lease."""
    op = climb(ladder(answered=lambda results, tries: LOOK_UP), Tries(unknown("earlier")))
    s = Script(op).send(Result())
    assert s.calls == [WRITE, READ]
    s.send(ROW)
    assert s.done and s.value == ((1,),)


def test_an_answer_may_read_more() -> None:
    def answered(results: Any, tries: Tries) -> Any:
        (read,) = yield READ
        return Known(read.rows)

    s = Script(climb(ladder(answered=answered))).send(Result())
    assert s.calls == [WRITE, READ]
    s.send(ROW)
    assert s.done and s.value == ((1,),)


def test_unknown_from_here_keeps_the_first_unknown_outcome() -> None:
    tries = Tries()
    tries.unknown_from_here("stored, not read back")
    first = tries.unknown
    tries.unknown_from_here("later")
    assert tries.unknown is first and str(first) == "stored, not read back"


# -- every operation climbs it ------------------------------------------------------------
def test_the_ladder_is_the_only_loop_that_retries_after_an_unknown_outcome() -> None:
    """No module of rqueue but rqueue._ladder has a ``while`` loop around a handler of
    OutcomeUnknown (the operations' own loops, before the ladder, were such)."""
    found = []
    for path in sorted(PACKAGE.glob("*.py")):
        for loop in ast.walk(ast.parse(path.read_text())):
            if not isinstance(loop, ast.While):
                continue
            for node in ast.walk(loop):
                if isinstance(node, ast.ExceptHandler) and "OutcomeUnknown" in ast.unparse(
                    node.type or ast.Constant(None)
                ):
                    found.append(f"{path.name}:{loop.lineno}")
    assert found == [f"_ladder.py:{_climb_loop()}"]


def _climb_loop() -> int:
    tree = ast.parse((PACKAGE / "_ladder.py").read_text())
    (loop,) = [n for n in ast.walk(tree) if isinstance(n, ast.While)]
    return loop.lineno


def test_a_fenced_write_whose_statement_failed_is_not_sent_again() -> None:
    """As for every operation: the row still live would send it again, but the same
    request would fail alike."""
    failed = unknown("ack: outcome unknown: statement 1 failed", statement_failed=True)
    s = Script(core().ack(LEASE)).throw(failed)
    assert s.call.path == "/db/query"
    with pytest.raises(OutcomeUnknown) as caught:
        s.send(Result(("locked_by", "live"), (("w:tok", 1),)))
    assert caught.value is failed


def test_a_rows_proof_is_typed() -> None:
    assert decide_after_unknown("ack", "w:tok", [("w:tok", 1)]) is Proof.RETRY
    assert decide_after_unknown("ack", "w:tok", [("other", 1)]) is Proof.LOST
    assert decide_after_unknown("nack", "w:tok", []) is Proof.UNKNOWN


# -- the statements a core is given -------------------------------------------------------
class SealedStatements(Statements):
    """Statements that refuse to be changed once built."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.__dict__["sealed"] = True

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("sealed"):
            raise AssertionError(f"{name} changed after the statements were built")
        super().__setattr__(name, value)


@pytest.mark.parametrize("version", ["v10.2.7", "v8.36.18", "v8.30.0", "v7.0.0"])
def test_nothing_changes_the_statements_once_built(version: str) -> None:
    server = ServerInfo.from_version(version)
    core = Settings.build("http://n:4001", max_deliveries=3, max_age=60.0).core(
        server, SealedStatements
    )
    s = core.statements
    assert (s.max_deliveries, s.max_age) == (3, 60.0)
    assert s.zone is core.zone and (core.zone is not None) is server.time_rewriting
    given = SealedStatements(server_clock=True, clock=lambda: 0.0)
    fuses = QueueCore(given, server).fusing
    assert fuses is (version in ("v10.2.7",)) and given.fusing is False


def test_a_fusing_core_fuses_with_the_statements_it_was_given() -> None:
    given = Statements(server_clock=True, clock=lambda: 0.0)
    before = dict(vars(given))
    core = QueueCore(given, ServerInfo.from_version("v10.2.7"))
    call = core.claim("w", 30.0, 0)
    assert next(call).fuser is given and vars(given) == before
