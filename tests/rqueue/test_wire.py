"""Classifying rqlite's answers: ok, retry, failed, unknown."""

from __future__ import annotations

import json

import pytest

from rqueue._models import HttpCall, Stmt
from rqueue._version import ServerInfo, parse_version, version_from_status
from rqueue._wire import Outcome, classify_response

WRITE = HttpCall("/db/execute", (Stmt("INSERT"), Stmt("UPDATE")))
READ = HttpCall("/db/query", (Stmt("SELECT"),), idempotent=True)


def test_ok_results_are_parsed() -> None:
    body = {"results": [{"last_insert_id": 4, "rows_affected": 1}, {"rows_affected": 0}]}
    v = classify_response(WRITE, 200, json.dumps(body))
    assert v.outcome is Outcome.OK
    assert v.results[0].last_insert_id == 4 and v.results[1].rows_affected == 0


def test_query_rows_and_missing_values() -> None:
    v = classify_response(READ, 200, json.dumps({"results": [{"columns": ["a"], "types": []}]}))
    assert v.outcome is Outcome.OK and v.results[0].rows == ()
    body = {"results": [{"columns": ["a", "b"], "values": [[1, "x"]]}]}
    assert classify_response(READ, 200, json.dumps(body)).results[0].dicts() == [{"a": 1, "b": "x"}]


@pytest.mark.parametrize(
    ("status", "text", "write", "read"),
    [
        (503, "leader not found", Outcome.RETRY, Outcome.RETRY),
        (301, "", Outcome.RETRY, Outcome.RETRY),
        (
            200,
            '{"results": [], "error": "leadership lost while committing log"}',
            Outcome.UNKNOWN,
            Outcome.RETRY,
        ),
        (200, "not json", Outcome.UNKNOWN, Outcome.RETRY),
        (200, '{"results": [{}]}', Outcome.UNKNOWN, Outcome.OK),  # count mismatch for WRITE
        (500, "boom", Outcome.UNKNOWN, Outcome.RETRY),
        (400, "invalid JSON body", Outcome.FAILED, Outcome.FAILED),
        (401, "", Outcome.FAILED, Outcome.FAILED),
    ],
)
def test_classification(status: int, text: str, write: Outcome, read: Outcome) -> None:
    assert classify_response(WRITE, status, text).outcome is write
    assert classify_response(READ, status, text).outcome is read


def test_statement_error_is_definite() -> None:
    body = {"results": [{"last_insert_id": 1}, {"error": "no such table: x"}]}
    v = classify_response(WRITE, 200, json.dumps(body))
    assert v.outcome is Outcome.FAILED and "no such table" in v.reason


def test_statement_error_that_stopped_a_transaction_is_definite() -> None:
    three = HttpCall("/db/execute", (Stmt("A"), Stmt("B"), Stmt("C")))
    body = {"results": [{"rows_affected": 1}, {"error": "UNIQUE constraint failed"}]}
    assert classify_response(three, 200, json.dumps(body)).outcome is Outcome.FAILED


# -- a statement's error, by endpoint (rqlite db/db.go: executeWithConn, RequestWithContext) --
OK, ERR = {"rows_affected": 1}, {"error": "no such table: rqueue_dead"}
ROWS = {"columns": ["seq"], "values": [[1]]}


def request(n: int, stamped: bool = False, path: str = "/db/request") -> HttpCall:
    return HttpCall(path, tuple(Stmt(f"S{i}") for i in range(n)), stamped=stamped)


@pytest.mark.parametrize(
    ("call", "results", "outcome"),
    [
        # /db/execute: the first error rolls back and ends the results
        (request(3, path="/db/execute"), [OK, ERR], Outcome.FAILED),
        (request(3, path="/db/execute"), [OK, OK, ERR], Outcome.FAILED),
        (request(3, path="/db/execute"), [ERR, OK, OK], Outcome.UNKNOWN),  # not rqlite's way
        # /db/request, failed while running: rolled back, the results stop at it
        (request(4), [OK, ERR], Outcome.FAILED),
        (request(4), [ERR], Outcome.FAILED),
        # /db/request, failed to prepare: the others ran on and committed
        (request(4), [OK, ERR, OK, ROWS], Outcome.UNKNOWN),
        (request(4), [ERR, ERR, OK, ERR], Outcome.UNKNOWN),
        # the last statement's error with every result there: prepare (the rest
        # committed) or run (rolled back) cannot be told apart
        (request(4), [OK, OK, OK, ERR], Outcome.UNKNOWN),
        (request(1), [ERR], Outcome.FAILED),
        # nothing of the operation ran: every statement failed, or all but the stamp
        (request(3), [ERR, ERR, ERR], Outcome.FAILED),
        (request(3, stamped=True), [OK, ERR, ERR], Outcome.FAILED),
        (request(3, stamped=True), [OK, OK, ERR], Outcome.UNKNOWN),
        # reads write nothing
        (request(2, path="/db/query"), [ROWS, ERR], Outcome.FAILED),
    ],
)
def test_a_statement_error_is_definite_only_where_rqlite_applied_nothing(
    call: HttpCall, results: list, outcome: Outcome
) -> None:
    v = classify_response(call, 200, json.dumps({"results": results}))
    assert v.outcome is outcome and "no such table: rqueue_dead" in v.reason
    assert v.statement_failed is (outcome is Outcome.UNKNOWN)
    if outcome is Outcome.UNKNOWN and call.path == "/db/request":
        assert "may have committed the request's other statements" in v.reason


def test_a_statement_error_that_may_have_committed_is_not_sent_again() -> None:
    """Attempts raises OutcomeUnknown marked ``statement_failed`` (and does not blame the
    node); the claim's loop looks its token up once and raises instead of resending."""
    from rqueue._attempts import Attempts
    from rqueue._endpoints import Endpoints
    from rqueue._exceptions import OutcomeUnknown

    e = Endpoints(["http://a:1", "http://b:2"])
    e.succeeded("http://a:1")
    tries = Attempts(request(3), e, deadline=float("inf"), request_timeout=1.0)
    with pytest.raises(OutcomeUnknown, match="may have committed") as info:
        tries.answered("http://a:1", 200, json.dumps({"results": [ERR, OK, OK]}))
    assert info.value.statement_failed and e.trusted("http://a:1")


def test_auth_refusal_is_flagged() -> None:
    assert classify_response(WRITE, 401, "").auth_failed


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("v8.36.0-rqueue-embedded", (8, 36, 0)),
        ("8.23.1", (8, 23, 1)),
        ("v7.21", (7, 21, 0)),
        ("unknown", None),
        (None, None),
    ],
)
def test_parse_version(text: str | None, number: tuple | None) -> None:
    assert parse_version(text) == number


def test_version_from_header_then_body() -> None:
    assert version_from_status({"X-RQLITE-VERSION": "v8.33.0"}, {}) == "v8.33.0"
    assert version_from_status({}, {"build": {"version": "v8.20.0"}}) == "v8.20.0"
    assert version_from_status({}, {}) is None


def test_features_by_version() -> None:
    new, mid, old, unknown = (
        ServerInfo.from_version(v) for v in ("v8.36.0", "v8.23.0", "v8.22.0", None)
    )
    assert new.one_request_claim and new.linearizable_reads and new.time_rewriting
    assert mid.one_request_claim and not mid.linearizable_reads and not mid.time_rewriting
    assert not old.one_request_claim
    assert not (unknown.one_request_claim or unknown.time_rewriting)
