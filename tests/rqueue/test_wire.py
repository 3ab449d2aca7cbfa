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
