"""Subjects: seed-reference keeps the seed's semantics (and its faults); mutants break one thing."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from harness.subjects import MUTANT_NAMES, SUBJECT_NAMES, get_subject
from harness.subjects.seed_reference import (
    AsyncSeedTransport,
    SeedTransport,
    results_of,
)
from harness.workload import pending_messages
from rqueue import OutcomeUnknown, StatementError, Unavailable


def ev(msg: str) -> str:
    return json.dumps({"msg": msg})


def msg(lease) -> str | None:
    return None if lease is None else json.loads(lease.event)["msg"]


# -- pure: outcome classification ----------------------------------------------------------
def test_http_503_is_a_definite_failure():
    with pytest.raises(Unavailable, match="leader not found"):
        results_of(503, "leader not found", write=True)


def test_top_level_error_is_unknown_for_writes_and_a_failure_for_reads():
    body = json.dumps({"results": [], "error": "leadership lost while committing log"})
    with pytest.raises(OutcomeUnknown, match="leadership lost"):
        results_of(200, body, write=True)
    with pytest.raises(Unavailable, match="leadership lost"):
        results_of(200, body, write=False)


def test_statement_errors_and_bad_requests_are_definite():
    body = json.dumps({"results": [{"error": "no such table: nope"}]})
    with pytest.raises(StatementError, match="no such table"):
        results_of(200, body, write=True)
    with pytest.raises(StatementError, match="HTTP 400"):
        results_of(400, "invalid JSON body", write=True)


def test_server_errors_and_garbage_are_unknown_for_writes():
    with pytest.raises(OutcomeUnknown, match="HTTP 500"):
        results_of(500, "boom", write=True)
    with pytest.raises(OutcomeUnknown, match="unparseable"):
        results_of(200, "<html>", write=True)


def test_registry_names_every_subject():
    assert SUBJECT_NAMES[:2] == ("rqueue", "seed-reference")
    assert set(MUTANT_NAMES) == {
        "mutant-no-exclusivity",
        "mutant-lifo",
        "mutant-ack-wrong-row",
        "mutant-subquery-now",
        "mutant-blob-text",
        "mutant-zone-blind",
        "mutant-no-idempotency",
    }
    for name in SUBJECT_NAMES:
        assert get_subject(name).name == name
    with pytest.raises(ValueError, match="unknown subject 'nope'; known subjects: rqueue"):
        get_subject("nope")


def test_seed_reference_refuses_bad_arguments_before_sending():
    t = SeedTransport(["http://127.0.0.1:9"])  # nothing is sent for bad arguments
    with pytest.raises(ValueError, match="visibility must be > 0"):
        t.claim("w", 0)
    with pytest.raises(ValueError, match="delay must be >= 0"):
        t.nack(None, -1)  # type: ignore[arg-type]
    t.close()


def test_seed_reference_names_the_urls_when_nothing_answers():
    with pytest.raises(Unavailable, match=r"no leader answered at http://127\.0\.0\.1:9"):
        SeedTransport.from_url(["http://127.0.0.1:9"], wait=0.3)


# -- against a real cluster ------------------------------------------------------------------
def test_seed_reference_has_the_seeds_semantics(empty_db):
    t = SeedTransport.from_url(empty_db)
    try:
        a1 = t.publish("ga", ev("a1"), priority=1)
        t.publish("ga", ev("a2"), priority=1)
        t.publish("gb", ev("b1"), priority=0)
        first = t.claim("w1", 30)
        assert (first.seq, first.group_id, msg(first)) == (a1, "ga", "a1")
        assert msg(t.claim("w2", 30)) == "b1"  # ga is in flight: next group
        assert t.claim("w3", 30) is None
        t.ack(first)
        lease = t.claim("w1", 30, min_priority=1)
        assert msg(lease) == "a2"
        t.nack(lease, 0)
        again = t.claim("w1", 30)
        assert (msg(again), again.token != lease.token) == ("a2", True)
        t.nack(again, delay=30)  # parked: the group stays blocked
        assert t.claim("w1", 30) is None
    finally:
        t.close()


def test_seed_reference_trusts_the_workers_clock(empty_db):
    honest = SeedTransport.from_url(empty_db)
    ahead = SeedTransport.from_url(empty_db, clock=lambda: time.time() + 60)
    try:
        honest.publish("g", ev("m1"))
        honest.publish("g", ev("m2"))
        held = honest.claim("w1", 30)
        stolen = ahead.claim("w2", 30)  # its clock says the 30 s lease lapsed long ago
        assert msg(held) == msg(stolen) == "m1"
        honest.ack(held)  # by seq: deletes the message the other worker now holds
        assert pending_messages(empty_db) == 1
    finally:
        honest.close()
        ahead.close()


def test_async_seed_reference_round_trip(empty_db):
    async def scenario() -> list[str | None]:
        t = await AsyncSeedTransport.from_url(empty_db)
        try:
            await t.publish("g", ev("x1"))
            await t.publish("g", ev("x2"))
            lease = await t.claim("w", 30)
            blocked = await t.claim("w", 30)
            await t.ack(lease)
            nxt = await t.claim("w", 30)
            await t.extend(nxt, 60)
            await t.ack(nxt)
            return [msg(lease), msg(blocked), msg(nxt), msg(await t.claim("w", 30))]
        finally:
            await t.close()

    assert asyncio.run(scenario()) == ["x1", None, "x2", None]


def _open(name: str, urls: list[str]):
    return get_subject(name).open_sync(urls, time.time, 5.0)


def test_rqueue_subject_keeps_one_message_per_group_in_flight(empty_db):
    c = _open("rqueue", empty_db)
    try:
        c.publish("g", ev("a"))
        c.publish("g", ev("b"))
        assert msg(c.claim("w", 30)) == "a"
        assert c.claim("w", 30) is None
    finally:
        c.close()


def test_mutant_no_exclusivity_leases_a_group_twice(empty_db):
    c = _open("mutant-no-exclusivity", empty_db)
    try:
        c.publish("g", ev("a"))
        c.publish("g", ev("b"))
        # the group's head is leased again while in flight (leases live on group rows)
        assert [msg(c.claim("w", 30)), msg(c.claim("w", 30))] == ["a", "a"]
    finally:
        c.close()


def test_mutant_lifo_takes_the_newest_message(empty_db):
    c = _open("mutant-lifo", empty_db)
    try:
        for m in ("a", "b", "c"):
            c.publish("g", ev(m))
        lease = c.claim("w", 30)
        assert msg(lease) == "c"
        assert c.claim("w", 30) is None  # exclusivity is kept
        c.ack(lease)
        assert msg(c.claim("w", 30)) == "b"
    finally:
        c.close()


def test_mutant_ack_wrong_row_deletes_the_next_message(empty_db):
    c = _open("mutant-ack-wrong-row", empty_db)
    try:
        c.publish("g", ev("a"))
        c.publish("g", ev("b"))
        lease = c.claim("w", 30)
        c.ack(lease)  # "succeeds", but b is gone and a is back
        assert pending_messages(empty_db) == 1
        assert msg(c.claim("w", 30)) == "a"
    finally:
        c.close()


def test_async_mutants_use_the_broken_statements_too(empty_db):
    async def scenario() -> list[str | None]:
        c = await get_subject("mutant-lifo").open_async(empty_db, time.time, 5.0)
        try:
            await c.publish("g", ev("a"))
            await c.publish("g", ev("b"))
            return [msg(await c.claim("w", 30))]
        finally:
            await c.close()

    assert asyncio.run(scenario()) == ["b"]
