"""No write rqueue sends may depend on when or where it is applied.

Every replica applies a Raft entry at its own moment, and a restarted node replays its
log much later: a time function or ``random()`` left in a write is evaluated again each
time, and the replicas diverge. rqlite >= 8.33 rewrites them to literals, but only where
its own parser accepts the statement and its tree walk reaches the call.

These tests run every operation of the core (each path, on each protocol) against one
SQLite database, collect every write it sends, and pass each statement through
:func:`harness.node.sql.rewrite.rqlite_process`, the embedded node's model of the processor
of rqlite v10.2.7, v9.4.5 and v8.36.18 (held to rqlite's own answers by the corpus tests in
``tests/conformance``). What enters the log must hold no ``'now'`` and no ``random()``.
On servers without rewriting, a write must hold no time function at all.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from harness.node.sql.rewrite import rqlite_process
from rqueue import Lease, Statements, _admin
from rqueue._clock import LeaderClock
from rqueue._core import QueueCore
from rqueue._version import ServerInfo

from .fakes import SqliteExecutor, drive

NOW = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)
RAND = 4242424242
#: any call of SQLite's date and time functions, or its random functions
TIME_OR_RANDOM = re.compile(
    r"\b(date|time|datetime|julianday|unixepoch|strftime|timediff|random|randomblob)\s*\(|"
    r"\bcurrent_(time|date|timestamp)\b",
    re.IGNORECASE,
)
NOW_LEFT = re.compile(r"'now'", re.IGNORECASE)
RANDOM_LEFT = re.compile(r"\brandom(blob)?\s*\(", re.IGNORECASE)

PROTOCOLS = {
    # server version -> the core's clock: the server's stamp, or the leader's clock
    "v10.2.7": True,  # /db/request, time rewriting (the current release)
    "v9.4.5": True,
    "v8.36.18": True,
    "v8.30.0": False,  # /db/request, no rewriting
    "v6.10.2": False,  # neither
}


def core_for(version: str, statements: type[Statements] = Statements) -> QueueCore:
    server_clock = PROTOCOLS[version]
    leader = None if server_clock else LeaderClock()
    clock = leader.now if leader else (lambda: 0.0)
    return QueueCore(
        statements(server_clock=server_clock, clock=clock),
        ServerInfo.from_version(version),
        leader_clock=leader,
    )


def every_operation(core: QueueCore, ex: SqliteExecutor) -> None:
    """Each operation and path the core has, once (a lease for every settle)."""
    run = lambda op: drive(op, ex)  # noqa: E731
    run(core.open())
    run(core.publish("g", '"a"', 1, None))
    run(core.publish("g", '"b"', 1, "dedup-1"))
    run(core.publish_many([("h", '"c"', 0), ("h", '"d"', 0)]))
    first = run(core.claim("w", 30.0, 0))
    second = run(core.claim("w", 30.0, 0))
    run(core.extend(first, 60.0))
    run(core.nack(second, 5.0))  # park
    third = run(core.ack_and_claim(first, "w", 30.0, 0))
    run(core.nack(third, 0))  # release
    fourth = run(core.claim("w", 30.0, 0))
    run(core.ack(fourth))
    stale = Lease(fourth.seq, fourth.group_id, "{}", "w:gone")
    with pytest.raises(Exception, match="no longer leased"):
        run(core.ack(stale))
    dead_letter_operations(core, ex)


def dead_letter_operations(core: QueueCore, ex: SqliteExecutor) -> None:
    """max_deliveries: a claim that dead-letters (both claim paths), redrive and purge."""
    run = lambda op: drive(op, ex)  # noqa: E731
    core.statements.max_deliveries = 1
    moved: list = []
    core.on_dead_letter = moved.append
    run(core.publish_many([("p", '"poison"', 2), ("p", '"next"', 2)]))
    for _ in range(3):  # bounded: a mutant's claim may not count deliveries
        lease = run(core.claim("w", 30.0, 0))
        if lease is not None:
            run(core.nack(lease, 0, "boom"))
    if type(core.statements) is Statements:
        assert [d.event for d in moved] == ['"poison"', '"next"']
    run(_admin.redrive(core, None, "p"))
    assert run(_admin.purge(core, None, None)) == 0
    run(_admin.dead_letters(core, None, 0, 10))
    run(_admin.peek(core, "p", 10))
    run(_admin.stats(core))


def writes(ex: SqliteExecutor) -> list[str]:
    out = []
    for path, body in ex.calls:
        if path == "/db/query":
            continue  # reads are not replicated: the answering node's clock is right
        out.extend(s if isinstance(s, str) else s[0] for s in body)
    return out


def nondeterministic(version: str, sent: list[str]) -> list[str]:
    """The writes whose effect would depend on when a replica applies them."""
    if not PROTOCOLS[version]:
        return [sql for sql in sent if TIME_OR_RANDOM.search(sql)]
    out = []
    for sql in sent:
        logged = rqlite_process(sql, NOW, RAND, version)
        if NOW_LEFT.search(logged) or RANDOM_LEFT.search(logged):
            out.append(sql)
    return out


@pytest.mark.parametrize("version", sorted(PROTOCOLS))
def test_what_enters_the_raft_log_is_the_same_on_every_replica(version: str) -> None:
    ex = SqliteExecutor()
    every_operation(core_for(version), ex)
    sent = writes(ex)
    assert len(sent) >= 20
    assert nondeterministic(version, sent) == []


def test_the_check_catches_the_time_in_a_subquery() -> None:
    """The check can fail: the mutant that reads the server's clock in a subquery."""
    from harness.subjects.mutants import SubqueryNowStatements

    ex = SqliteExecutor()
    every_operation(core_for("v8.36.18", SubqueryNowStatements), ex)
    bad = nondeterministic("v8.36.18", writes(ex))
    assert bad and all('UPDATE "groups" SET locked_by' in sql for sql in bad)


def test_the_stamp_is_the_only_time_function_and_rqlite_rewrites_it() -> None:
    ex = SqliteExecutor()
    every_operation(core_for("v8.36.18"), ex)
    timed = {sql for sql in writes(ex) if TIME_OR_RANDOM.search(sql)}
    stamp = Statements(server_clock=True, clock=lambda: 0.0).stamp()
    assert stamp is not None and timed == {stamp.sql}
    logged = {v: rqlite_process(stamp.sql, NOW, RAND, v) for v in ("8.36.18", "10.2.7")}
    assert "2461042.627843" in logged["10.2.7"]  # rqlite's literal for NOW (a Julian day, %f)
    assert logged["10.2.7"] == logged["8.36.18"]  # the same text enters v8's and v10's log


def test_v10_processes_rqueues_statements_as_v8_does() -> None:
    """rqueue relies on no re-print that changed: every statement it sends (writes, and
    reads, which ``level=strong`` sends through the log) comes out of v10.2.7's processor
    as the very text it comes out of v8.36.18's."""
    ex = SqliteExecutor()
    every_operation(core_for("v10.2.7"), ex)
    sent = [s if isinstance(s, str) else s[0] for _, body in ex.calls for s in body]
    assert len(sent) > len(writes(ex))
    v8 = [rqlite_process(sql, NOW, RAND, "8.36.18") for sql in sent]
    assert [rqlite_process(sql, NOW, RAND, "10.2.7") for sql in sent] == v8
    stamp = Statements(server_clock=True, clock=lambda: 0.0).stamp()
    assert stamp is not None
    assert stamp.sql in {a for a, b in zip(sent, v8, strict=True) if a != b}


def test_a_seed_era_groups_statement_with_now_would_not_be_rewritten() -> None:
    """The trap the stamp avoids: rqlite's parser rejects statements on ``groups``."""
    sql = "UPDATE groups SET last_claimed_at = julianday('now') WHERE group_id = ?"
    assert NOW_LEFT.search(rqlite_process(sql, NOW, RAND))


def test_every_write_on_groups_reads_time_only_from_the_stamp() -> None:
    ex = SqliteExecutor()
    every_operation(core_for("v8.36.18"), ex)
    on_groups = [s for s in writes(ex) if re.search(r"\bgroups\b", s)]
    assert on_groups
    assert all(not TIME_OR_RANDOM.search(s) for s in on_groups)


@pytest.mark.parametrize("version", ["v10.2.7", "v9.4.5", "v8.36.18"])
def test_the_guarded_stamp_leaves_nothing_to_the_replicas_clock(version: str) -> None:
    """The transports' stamp (guarded against nodes off UTC, rqueue._zone): what enters
    the log holds no 'now'; its ``julianday()`` (SQLite's UTC) is only in its RETURNING,
    which changes no row."""
    from rqueue._config import Settings
    from rqueue._zone import GUARDED_STAMP

    ex = SqliteExecutor()
    every_operation(
        Settings.build("http://n:4001").core(ServerInfo.from_version(version), Statements), ex
    )
    sent = writes(ex)
    assert GUARDED_STAMP in sent and nondeterministic(version, sent) == []
    logged = rqlite_process(GUARDED_STAMP, NOW, RAND, version)
    assert TIME_OR_RANDOM.findall(logged.split("RETURNING")[0]) == [("julianday", "")] * 2
