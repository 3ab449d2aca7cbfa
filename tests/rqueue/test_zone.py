"""Nodes whose rewritten time is off UTC: the stamp's guard, the checks, the refusal
(sans-IO: :mod:`rqueue._zone`, its use in ``Attempts``, ``_batch`` and the core).

The end-to-end tests, on local clusters with nodes in other zones and a daylight-saving
jump during the test, are in ``test_zone_cluster.py``.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from harness.node.sql.rewrite import rqlite_process
from harness.subjects.mutants import ZoneBlindStatements
from rqueue import StatementError, Statements, ZoneRefused
from rqueue._attempts import Attempts
from rqueue._batch import Alone, Waiting, answered, exchange
from rqueue._config import Settings
from rqueue._endpoints import Endpoints
from rqueue._models import HttpCall, Result, Stmt
from rqueue._render import STAMP
from rqueue._version import ServerInfo
from rqueue._zone import BOUND, GUARDED_STAMP, MEASURE, RECHECK_AFTER, ZoneGuard, ZoneLog

from .fakes import SqliteExecutor, drive
from .test_core_decisions import Script

NOW = datetime(2026, 3, 29, 0, 59, 58, tzinfo=UTC)
EPOCH = NOW.timestamp()
A, B = "http://a:4001", "http://b:4001"


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def guard(utc: float | None = EPOCH, zone_log: ZoneLog | None = None) -> tuple[ZoneGuard, Clock]:
    clock = Clock()
    zone = ZoneGuard(monotonic=clock, zone_log=zone_log or ZoneLog())
    if utc is not None:
        zone.calibrate(utc)
    return zone, clock


# -- the guard in the stamp, as rqlite logs and every replica applies it -----------------------
def apply(logged: str, reference: float | None) -> list[Any]:
    """The logged stamp applied to a fresh SQLite: its RETURNING rows, or the error."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE rqueue_clock (id INTEGER PRIMARY KEY, ts REAL)")
    try:
        return db.execute(logged, (reference,)).fetchall()
    except sqlite3.Error as exc:
        return [str(exc)]


@pytest.mark.parametrize("version", ["8.36.18", "9.4.5", "10.2.7"])
def test_the_guard_writes_only_a_time_within_the_bound_of_the_reference(version: str) -> None:
    utc = rqlite_process(GUARDED_STAMP, NOW, 1, version)  # a node in UTC
    local = rqlite_process(GUARDED_STAMP, NOW.astimezone(timezone(timedelta(hours=1))), 1, version)
    for logged in (utc, local):  # what enters the log holds no 'now' left to evaluate
        assert "'now'" not in logged and "julianday()" in logged.split("RETURNING")[1]
    [(ts, _)] = apply(utc, EPOCH + 0.5)
    assert abs(ts - EPOCH) < 0.1
    assert apply(utc, EPOCH - BOUND + 1)[0][0] == ts  # inside the bound
    assert apply(utc, None) == ["datatype mismatch"]  # no reference: refused, not unguarded
    assert apply(local, EPOCH) == ["datatype mismatch"]  # an hour off: the whole request fails
    assert apply(utc, EPOCH - BOUND - 1) == ["datatype mismatch"]


def test_reads_use_sqlites_own_utc_which_rqlite_never_rewrites() -> None:
    from rqueue import _stats
    from rqueue._clock import SERVER_TIME_READ

    s = Statements(server_clock=True, clock=lambda: 0.0)
    reads = [*_stats.STATEMENTS, _stats.peek("g", 5), SERVER_TIME_READ]
    reads.append(s.lookup(__import__("rqueue").Lease(1, "g", "{}", "t")))
    for stmt in reads:
        assert "'now'" not in stmt.sql
        assert rqlite_process(stmt.sql, NOW.astimezone(timezone(timedelta(hours=3))), 1) in (
            stmt.sql,
            rqlite_process(stmt.sql, NOW, 1),  # re-printed, but not by the zone
        )
    logged = rqlite_process(MEASURE.sql, NOW.astimezone(timezone(timedelta(hours=1))), 1)
    assert "julianday(2461128.583310)" in logged and "julianday()" in logged


# -- the reference and the nodes -------------------------------------------------------------
def test_the_reference_follows_the_monotonic_clock_not_the_wall_clock() -> None:
    zone, clock = guard(None)
    assert zone.reference() is None and zone.stamp().params == (None,)
    zone.calibrate(EPOCH)
    clock.t += 12.5
    assert zone.reference() == EPOCH + 12.5
    zone.observed(Result(("ts", "utc"), ((EPOCH + 3612.0, EPOCH + 12.0),)))  # a stamp's answer
    assert zone.reference() == EPOCH + 12.0
    assert zone.stamp() == Stmt(GUARDED_STAMP, (EPOCH + 12.0,))


def test_a_node_off_utc_is_refused_with_one_line_and_checked_again_later(caplog) -> None:
    zone, clock = guard()
    assert zone.check_due(A) and zone.measured(A, [[EPOCH + 3.0, EPOCH]]) is None
    assert not zone.check_due(A) and not zone.refused(A)
    with caplog.at_level(logging.ERROR, logger="rqueue"):
        line = zone.measured(B, [[EPOCH + 5400.0, EPOCH]])
    assert line == (
        f"rqueue: node {B} rewrites 'now' +5400 s (+01:30) off UTC (its local time zone is "
        "not UTC): refused for timed calls; start rqlited with TZ=UTC, or give its container "
        "no /etc/localtime of another zone"
    )
    assert [r.getMessage() for r in caplog.records] == [line]
    assert zone.refused(B) and not zone.check_due(B)
    assert zone.all_refused([B]) == line and zone.all_refused([A, B]) is None
    clock.t += RECHECK_AFTER
    assert not zone.refused(B) and zone.check_due(B)  # it may have been fixed: look again
    zone.forget(A)  # the guard fired there
    assert zone.check_due(A)


def test_a_node_off_utc_is_logged_when_its_state_changes_not_per_check(caplog) -> None:
    """A pool of transports (one guard each, as the harness's workers have) checking a
    node off UTC again and again logs it once; once fixed, one line says so; off again,
    one more."""
    shared = ZoneLog()
    guards = [guard(zone_log=shared) for _ in range(13)]
    with caplog.at_level(logging.WARNING, logger="rqueue"):
        for _ in range(3):
            for zone, clock in guards:
                zone.measured(B, [[EPOCH + 3600.0, EPOCH]])
                clock.t += RECHECK_AFTER
        assert [r.levelname for r in caplog.records] == ["ERROR"]
        for zone, _ in guards:
            assert zone.measured(B, [[EPOCH + 1.0, EPOCH]]) is None
        assert [r.levelname for r in caplog.records] == ["ERROR", "WARNING"]
        assert "in UTC again" in caplog.records[-1].getMessage()
        for zone, _ in guards:
            zone.measured(B, [[EPOCH - 7200.0, EPOCH]])
    assert [r.levelname for r in caplog.records] == ["ERROR", "WARNING", "ERROR"]
    assert "-7200 s" in caplog.records[-1].getMessage()


def test_every_node_refused_is_one_line_naming_them_all() -> None:
    zone, _ = guard()
    zone.measured(A, [[EPOCH + 3600.0, EPOCH]])
    zone.measured(B, [[EPOCH - 18000.0, EPOCH]])
    assert zone.all_refused([A, B]) == (
        "rqueue: every node rewrites 'now' off UTC (their local time zones are not UTC), "
        f"so none takes a timed call: {A} +3600 s (+01:00), {B} -18000 s (-05:00); "
        "start rqlited with TZ=UTC, or give its container no /etc/localtime of another zone"
    )


# -- Attempts: one call's tries ---------------------------------------------------------------
def timed(what: str = "claim") -> HttpCall:
    stmts = (STAMP, Stmt("UPDATE t SET a = ?", ("x",)))
    return HttpCall("/db/execute", stmts, (("transaction", "true"),), what=what, stamped=True)


def measured(offset: float) -> str:
    return json.dumps({"results": [{"columns": ["r", "u"], "values": [[EPOCH + offset, EPOCH]]}]})


def stamped_ok() -> str:
    stamp = {"columns": ["ts", "utc"], "values": [[EPOCH + 2.0, EPOCH + 2.0]], "rows_affected": 1}
    return json.dumps({"results": [stamp, {"rows_affected": 1}]})


GUARD_FIRED = json.dumps({"results": [{"error": "datatype mismatch"}]})


def test_a_timed_call_checks_each_node_first_and_goes_past_a_refused_one() -> None:
    zone, clock = guard()
    e = Endpoints([A, B])
    tries = Attempts(timed(), e, deadline=float("inf"), request_timeout=1.0, zone=zone)
    url, _ = tries.next()
    assert url == A and tries.zone_check_due(A)
    path, body = tries.zone_check()
    assert path == "/db/query?level=strong" and json.loads(body) == [MEASURE.sql]
    assert tries.zone_answered(A, 200, measured(3600.0)) is False  # refused: next node
    url, _ = tries.next()
    assert url == B and tries.zone_answered(B, 200, measured(0.2)) is True
    clock.t += 7.0
    path, body = tries.target()
    stamp = json.loads(body)[0]
    assert stamp == [GUARDED_STAMP, EPOCH + 7.0]  # the reference of the moment
    assert tries.answered(B, 200, stamped_ok()) is not None
    assert zone.reference() == EPOCH + 2.0  # calibrated from the stamp's RETURNING
    again = Attempts(timed(), e, deadline=float("inf"), request_timeout=1.0, zone=zone)
    assert again.next()[0] == B and not again.zone_check_due(B)  # checked once


def test_untimed_calls_are_not_checked_nor_refused() -> None:
    zone, _ = guard()
    zone.measured(A, [[EPOCH + 3600.0, EPOCH]])
    read = HttpCall("/db/query", (Stmt("SELECT 1"),), idempotent=True)
    tries = Attempts(read, Endpoints([A]), deadline=float("inf"), request_timeout=1.0, zone=zone)
    assert tries.next()[0] == A and not tries.zone_check_due(A)


def test_a_timed_call_with_every_node_refused_raises_before_sending() -> None:
    zone, _ = guard()
    for url in (A, B):
        zone.measured(url, [[EPOCH + 3600.0, EPOCH]])
    tries = Attempts(timed(), Endpoints([A, B]), float("inf"), 1.0, zone=zone)
    with pytest.raises(ZoneRefused, match=r"every node rewrites 'now' off UTC .*TZ=UTC"):
        tries.next()
    assert issubclass(ZoneRefused, __import__("rqueue").Unavailable)  # definite


def test_the_guard_firing_checks_the_node_again_then_gives_up() -> None:
    """Nothing applied (a run-time failure rolls back): the call may go again, after the
    node's check, with a fresh reference; a node that keeps refusing is not tried again."""
    zone, _ = guard()
    zone.measured(A, [[EPOCH, EPOCH]])
    tries = Attempts(timed(), Endpoints([A]), float("inf"), 1.0, zone=zone)
    for _ in range(2):
        assert tries.answered(A, 200, GUARD_FIRED) is None
        assert zone.check_due(A)
        zone.measured(A, [[EPOCH, EPOCH]])  # its check found it in UTC (a stale reference)
    with pytest.raises(StatementError, match="datatype mismatch"):
        tries.answered(A, 200, GUARD_FIRED)


# -- merged requests --------------------------------------------------------------------------
def test_merged_requests_go_to_a_checked_node_with_a_fresh_reference() -> None:
    zone, clock = guard()
    e = Endpoints([A])
    e.succeeded(A)
    batch = [Waiting(timed("1"), 10.0), Waiting(timed("2"), 10.0)]
    out = exchange(batch, e, 1.0, 5.0, zone)
    assert isinstance(out, list) and all(isinstance(s, Alone) for s in out)  # check first
    zone.measured(A, [[EPOCH, EPOCH]])
    clock.t += 3.0
    ex = exchange(batch, e, 1.0, 5.0, zone)
    assert not isinstance(ex, list)
    assert json.loads(ex.body)[0] == [GUARDED_STAMP, EPOCH + 3.0]
    out = ex.answered(200, GUARD_FIRED)
    assert all(isinstance(s, Alone) and not s.poisoned for s in out) and zone.check_due(A)
    stamp = {"columns": ["ts", "utc"], "values": [[EPOCH + 9, EPOCH + 9]]}
    body = {"results": [stamp, {"rows_affected": 1}, {"rows_affected": 1}]}
    answered([b.call for b in batch], ex.merged, A, 200, json.dumps(body), e, zone)
    assert zone.reference() == EPOCH + 9


# -- the core and the settings ----------------------------------------------------------------
def test_the_first_timed_operation_reads_the_servers_utc_once() -> None:
    settings = Settings.build("http://n:4001")
    core = settings.core(ServerInfo.from_version("v10.2.7"), Statements)
    assert core.zone is not None and core.statements.zone is core.zone
    s = Script(core.publish("g", "{}", 0, None))
    assert s.call.statements == (MEASURE,) and s.call.path == "/db/query"
    s.send(Result(("rewritten", "utc"), ((EPOCH, EPOCH),)))
    stamp = s.call.statements[0]
    assert s.call.stamped and stamp.sql == GUARDED_STAMP
    assert stamp.params[0] == pytest.approx(EPOCH, abs=1.0)  # real monotonic time passes
    ex = SqliteExecutor()  # and on SQLite, whose 'now' is UTC, the guard lets it through
    core = settings.core(ServerInfo.from_version("v10.2.7"), Statements)
    drive(core.open(), ex)
    assert drive(core.publish("g", "{}", 0, None), ex) == 1


@pytest.mark.parametrize(
    ("version", "statements", "guarded"),
    [
        ("v10.2.7", Statements, True),
        ("v8.36.18", Statements, True),
        ("v8.30.0", Statements, False),  # no rewriting: the leader's clock, no stamp
        ("v10.2.7", ZoneBlindStatements, False),  # the mutant
    ],
)
def test_who_guards_the_stamp(version: str, statements: type, guarded: bool) -> None:
    core = Settings.build("http://n:4001").core(ServerInfo.from_version(version), statements)
    assert (core.zone is not None) is guarded
    stamp = core.statements.stamp()
    assert (stamp is not None and stamp.sql == GUARDED_STAMP) is guarded
