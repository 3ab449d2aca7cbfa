"""Named queues (rqueue._queues): the rewrite of names, and several queues in one database
on real nodes (both twins, the admin CLI, the worker command)."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import random
import re
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import requests

from rqueue import (
    QueueInfo,
    QueueNotFound,
    RqliteTransport,
    RqueueError,
    Statements,
    _admin,
    _cli,
    _many,
    _queues,
    _schema,
    _stats,
)
from rqueue._config import Settings
from rqueue._core import QueueCore
from rqueue._dlq import DeadLetters
from rqueue._models import Claim, Fuse, Lease, Stmt
from rqueue._queues import check_name, qualify, qualify_sql
from rqueue._statements import CLOCK_REF, STAMP
from rqueue._version import ServerInfo
from rqueue._wire import classify_response

from .fakes import SqliteExecutor, drive
from .polling import query, wait_for
from .test_migration import RELEASE

ROOT = Path(__file__).resolve().parents[2]
VIS = 30.0
LEASE = Lease(7, "g", "{}", "w:tok")
SERVER = ServerInfo.from_version("v8.36.0")


def fresh_name() -> str:
    """A queue of this test alone (the shared cluster keeps every queue it was given)."""
    return f"t{uuid.uuid4().hex[:10]}"


# -- names -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["a", "orders", "eu_west_1", "x" * 40, "a__b"])
def test_valid_queue_names(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", [None, "default"])
def test_the_default_queue_has_no_name(name: str | None) -> None:
    assert check_name(name) is None


@pytest.mark.parametrize("name", ["", "Orders", "1st", "_x", "a-b", "a b", "x" * 41, "é", "a;"])
def test_a_bad_queue_name_says_the_argument_and_the_rule(name: str) -> None:
    with pytest.raises(ValueError, match=r"^--queue: .* is not a queue name: a lowercase letter"):
        check_name(name, "--queue")
    with pytest.raises(ValueError, match=r"^queue: "):
        Settings.build("http://127.0.0.1:4001", queue=name)


def test_a_queue_name_of_another_type_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="queue: expected a queue name"):
        check_name(3)


# -- the rewrite -----------------------------------------------------------------------------
_WORD = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|[A-Za-z_][A-Za-z0-9_$]*""")


def unqualified(sql: str) -> set[str]:
    """Names of the default queue's tables, indexes and triggers that ``sql`` still holds
    as identifiers (string literals are skipped; column names follow a dot)."""
    out = set()
    for m in _WORD.finditer(sql):
        word = m.group().strip('"')
        if m.group().startswith("'") or sql[max(0, m.start() - 1)] == ".":
            continue
        if word in ("messages", "groups") or (
            word.startswith("rqueue_") and word not in _queues.SHARED
        ):
            out.add(word)
    return out


def every_statement() -> list[Stmt]:
    """Every statement rqueue sends, of every builder, in both clock modes."""
    out: list[Stmt] = [
        *_schema.TABLES,
        *_schema.INDEXES,
        *_schema.COUNTERS,
        *_schema.MOVE_LEASES,
        *_schema.BACKFILL,
        _schema.COUNT_TRIGGERS,
        *(_schema.table_columns(t) for t in _schema.ALTERED_TABLES),
        *(alter for t in _schema.ALTERED_TABLES for _, alter in _schema.missing_columns(t, ())),
        *_stats.STATEMENTS,
        _stats.peek("g", 5),
    ]
    for server_clock in (True, False):
        s = Statements(server_clock=server_clock, clock=lambda: 1.0, max_deliveries=3)
        d = DeadLetters(s)
        claims = [Claim("t1", VIS), Claim("t2", VIS, LEASE)]
        out += [
            *s.publish("g", "{}", 0),
            *s.publish_batch([("g", "{}", 0), ("h", "{}", 1)]),
            *s.publish_dedup("g", "{}", 0, "d", 60.0),
            s.dedup_seq("d"),
            s.claim_lease("t", VIS, 0),
            s.claim_returning("t", VIS, 0),
            s.claim_batch(claims, 0),
            s.claim_read_back("t"),
            *s.ack(LEASE),
            *s.ack_batch([LEASE]),
            *s.ack_and_claim(LEASE, "t", VIS, 0),
            *s.nack(LEASE, 0.0, "e"),
            *s.nack(LEASE, 5.0),
            s.extend_returning(LEASE, VIS),
            s.extended_read_back(LEASE),
            s.lookup(LEASE),
            *d.move("t"),
            *d.moved_by("t"),
            d.list("g", 0, 10),
            *d.redrive(None, "g"),
            d.purge(1, None),
        ]
    return out


def test_the_default_queue_sends_every_statement_as_it_is() -> None:
    for stmt in every_statement():
        assert qualify(stmt, None) is stmt


@pytest.mark.parametrize("stmt", every_statement(), ids=lambda s: s.sql[:50])
def test_a_named_queue_qualifies_every_name_and_nothing_else(stmt: Stmt) -> None:
    q = qualify(stmt, "orders")
    assert unqualified(q.sql) == set()
    assert qualify(q, "orders") == q  # a second pass changes nothing
    # only names change: the placeholders, the time (and where it stands), the quoting
    assert q.sql.count("?") == stmt.sql.count("?") and len(q.params) == len(stmt.params)
    assert q.sql.count("julianday('now')") == stmt.sql.count("julianday('now')")
    assert q.sql.count(CLOCK_REF) == stmt.sql.count(CLOCK_REF)
    assert q.sql.count('"') == stmt.sql.count('"')
    assert re.sub(r"\brq_orders__", "", q.sql) == stmt.sql


def test_names_in_strings_and_parameters() -> None:
    s = Statements(server_clock=True, clock=lambda: 1.0)
    batch = qualify(s.publish_batch([("g", "{}", 0)])[1], "orders")
    assert "sqlite_sequence WHERE name = 'rq_orders__messages'" in batch.sql
    # a counter's kind 'groups' is a value, not a table
    counted = [c.sql for c in _schema.COUNTERS if "kind = 'groups'" in c.sql]
    assert counted and all("kind = 'groups'" in qualify_sql(c, "orders") for c in counted)
    assert qualify(_schema.table_columns("groups"), "orders").params == ("rq_orders__groups",)
    names = qualify(_schema.COUNT_TRIGGERS, "orders").params
    assert all(n.startswith("rq_orders__rqueue_") for n in names)
    # a group or event named like a table is a value: never rewritten
    pub = qualify(s.publish("messages", '"groups"', 0)[0], "orders")
    assert pub.params == ("messages", '"groups"')
    assert qualify_sql('SELECT g.groups, "groups".x FROM "groups"', "q") == (
        'SELECT g.groups, "rq_q__groups".x FROM "rq_q__groups"'
    )


def test_the_clock_and_the_registry_are_shared() -> None:
    assert qualify(STAMP, "orders") == STAMP
    for stmt in (_queues.REGISTRY, _queues.LIST, _queues.CATALOG):
        assert qualify(stmt, "orders") is stmt


def test_fused_statements_are_qualified_by_one_stable_fuser() -> None:
    s = Statements(server_clock=True, clock=lambda: 1.0)
    s.fusing = True
    naming = _queues.Naming("orders")
    fuser = naming.fuser(s.fuser)
    assert fuser is naming.fuser(s.fuser)  # merging needs the same object for every call
    fused = fuser.fused([Fuse("claim", claims=(Claim("t", VIS),))])
    assert unqualified(fused.sql) == set() and "rq_orders__groups" in fused.sql
    assert _queues.Naming(None).fuser(s.fuser) is s


@pytest.mark.parametrize("version", ["v10.2.7", "v8.36.0", "v7.0.0"])
def test_two_queues_in_one_sqlite_database(version: str) -> None:
    """The core's statements for two queues run on one SQLite database, apart."""
    ex = SqliteExecutor()
    cores = {
        q: QueueCore(
            Statements(server_clock=False, clock=lambda: 1e6),
            ServerInfo.from_version(version),
            queue=q,
        )
        for q in (None, "orders")
    }
    for core in cores.values():
        drive(core.open(), ex)
        drive(core.open(), ex)  # idempotent
    a = drive(cores[None].publish("g", '"a"', 0, None), ex)
    b = drive(cores["orders"].publish("g", '"b"', 0, None), ex)
    drive(cores["orders"].publish_many([("g", '"b2"', 0)]), ex)
    la = drive(cores[None].claim("w", VIS, 0), ex)
    lb = drive(cores["orders"].claim("w", VIS, 0), ex)
    assert (la.seq, la.event, lb.seq, lb.event) == (a, '"a"', b, '"b"')
    assert drive(cores["orders"].claim("w", VIS, 0), ex) is None  # g is leased in orders
    drive(cores["orders"].ack(lb), ex)
    assert ex.sql("SELECT count(*) FROM messages") == [(1,)]
    assert ex.sql("SELECT count(*) FROM rq_orders__messages") == [(1,)]
    listed = drive(_queues.list_queues(cores["orders"]), ex)
    assert [q.name for q in listed] == ["default", "orders"]


def test_a_named_queue_that_does_not_exist_is_refused_with_nothing_written() -> None:
    """open(create=False): one read finds the queue missing; QueueNotFound names it and
    both cures; nothing was written (no table, no registry entry)."""
    ex = SqliteExecutor()
    drive(QueueCore(Statements(server_clock=False, clock=lambda: 1e6), SERVER).open(), ex)
    core = QueueCore(Statements(server_clock=False, clock=lambda: 1e6), SERVER, queue="ordres")
    op = core.open(create=False)
    first = next(op)
    assert first.path == "/db/query" and "rq_ordres__messages" in first.statements[0].sql
    answer = ex.run(first.path, dict(first.query), first.body())
    verdict = classify_response(first, 200, json.dumps(answer))
    with pytest.raises(QueueNotFound) as caught:
        op.send(verdict.results)
    said = str(caught.value)
    assert "no queue 'ordres' on these nodes" in said
    assert "create=True" in said and "python -m rqueue queues create ordres" in said
    assert ex.sql("SELECT name FROM sqlite_master WHERE name LIKE 'rq_ordres%'") == []
    assert ex.sql("SELECT name FROM rqueue_queues") == [("default",)]
    drive(core.open(create=True), ex)  # on purpose
    drive(core.open(create=False), ex)  # it exists now
    assert ex.sql("SELECT name FROM rqueue_queues ORDER BY name") == [("default",), ("ordres",)]


def test_the_default_queue_is_created_without_being_asked() -> None:
    ex = SqliteExecutor()
    core = QueueCore(Statements(server_clock=False, clock=lambda: 1e6), SERVER)
    drive(core.open(create=False), ex)
    assert ex.sql("SELECT name FROM rqueue_queues") == [("default",)]


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _outcome(op: Any, ex: SqliteExecutor) -> Any:
    """What an operation returned (leases without their tokens) or raised."""
    try:
        value = drive(op, ex)
    except RqueueError as exc:
        return type(exc).__name__
    if isinstance(value, Lease):
        return (value.seq, value.group_id, value.event, value.expires_at)
    if isinstance(value, list):
        return [_outcome_value(v) for v in value]
    return value


def _outcome_value(v: Any) -> Any:
    if isinstance(v, Lease):
        return (v.seq, v.group_id, v.event, v.expires_at)
    return v if v is None or isinstance(v, int | str) else type(v).__name__


@pytest.mark.parametrize("version", ["v10.2.7", "v8.36.0", "v7.0.0"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_named_queue_behaves_as_the_default_one(version: str, seed: int) -> None:
    """The same random operations on the default queue and on a named one, in one SQLite
    database, give the same answers and leave the same rows: the rewrite changes names
    only, on every path (claims with dead-lettering, batches, chained acks, dedup)."""
    rng = random.Random(seed)
    ex, clock = SqliteExecutor(), _Clock()
    cores = [
        QueueCore(
            Statements(server_clock=False, clock=clock, max_deliveries=2),
            ServerInfo.from_version(version),
            queue=q,
        )
        for q in (None, "orders")
    ]
    held: list[list[Lease]] = [[], []]
    for core in cores:
        drive(core.open(), ex)
    for step in range(250):
        kind = rng.choice(["pub", "many", "claim", "claim", "cmany", "ack", "ack", "nack",
                           "ext", "amany", "aclaim", "aclaim", "tick", "redrive"])  # fmt: skip
        group, prio, pick = f"g{rng.randrange(4)}", rng.randrange(3), rng.random()
        dedup = f"d{rng.randrange(5)}" if rng.random() < 0.3 else None
        delay = rng.choice([0.0, 5.0])
        seen = []
        for core, mine in zip(cores, held, strict=True):
            lease = mine[-1 - int(pick * min(len(mine), 4))] if mine else None  # a recent one
            if kind == "pub":
                op = core.publish(group, f'"{step}"', prio, dedup)
            elif kind == "many":
                op = core.publish_many([(group, f'"{step}"', prio), ("g9", f'"{step}b"', 0)])
            elif kind in ("claim", "cmany"):
                op = (
                    core.claim("w", 10.0, 0)
                    if kind == "claim"
                    else _many.claim_many(core, "w", 10.0, 0, 3)
                )
            elif kind == "tick":
                clock.now += 0.01  # both cores see the one clock move once
                seen.append(None)
                continue
            elif kind == "redrive":
                op = _admin.redrive(core, None, None)
            elif lease is None:
                seen.append("no lease")
                continue
            elif kind == "ack":
                op = core.ack(lease)
            elif kind == "nack":
                op = core.nack(lease, delay, "e")
            elif kind == "ext":
                op = core.extend(lease, 10.0)
            elif kind == "amany":
                op = _many.ack_many(core, mine[:2])
            else:
                op = core.ack_and_claim(lease, "w", 10.0, 0)
            before = {id(x) for x in mine}
            try:
                value = drive(op, ex)
            except RqueueError as exc:
                value = type(exc).__name__
            got = value if isinstance(value, list) else [value]
            mine.extend(x for x in got if isinstance(x, Lease) and id(x) not in before)
            seen.append(_outcome_value(value) if not isinstance(value, list) else
                        [_outcome_value(v) for v in value])  # fmt: skip
        if kind == "tick" and rng.random() < 0.3:
            clock.now += 12.0  # leases lapse
        assert seen[0] == seen[1], (step, kind, seen)
    stats = [drive(_admin.stats(core), ex) for core in cores]  # ages: read at two moments
    assert [dataclasses.replace(x, oldest_ready_age=None) for x in stats] == [
        dataclasses.replace(stats[0], oldest_ready_age=None)
    ] * 2
    for core in cores:
        assert drive(_admin.dead_letters(core, None, 0, 1000), ex) == drive(
            _admin.dead_letters(cores[0], None, 0, 1000), ex
        )
    for table in ("messages", "groups", "rqueue_counts", "rqueue_dedup"):
        cols = "*" if table != "groups" else "group_id, priority, head_seq, deliveries"
        assert sorted(ex.sql(f"SELECT {cols} FROM {table}")) == sorted(
            ex.sql(f"SELECT {cols} FROM rq_orders__{table}")
        )


# -- real nodes: two queues, both twins -------------------------------------------------------
def test_two_queues_are_independent(connect: Any, queue_urls: list[str]) -> None:
    url = ",".join(queue_urls)
    name = fresh_name()
    default = connect(url, max_deliveries=1)
    named = connect(url, queue=name, max_deliveries=1, create=True)
    d1 = default.publish("g", {"q": "default", "n": 1})
    n1 = named.publish("g", {"q": name, "n": 1})
    n2, n3 = named.publish_many([("g", {"q": name, "n": 2}), ("h", {"q": name, "n": 3}, 2)])

    # the same group in both: FIFO and leases apart
    ld = default.claim("w", VIS)
    ln = named.claim("w", VIS)
    assert ld is not None and json.loads(ld.event) == {"q": "default", "n": 1}
    assert ln is not None and (ln.seq, ln.group_id) == (n1, "g")
    assert [x.seq for x in named.claim_many("w", VIS, 5)] == [n3]  # g is leased: only h
    assert default.claim("w", VIS) is None

    # a lease of one queue is refused by the other's transport
    with pytest.raises(ValueError, match="another queue"):
        default.ack(ln)
    named.ack(ln)
    nxt = named.claim("w", VIS)
    assert nxt is not None and nxt.seq == n2
    named.nack(nxt, 0, error="boom")

    # dead letters and stats per queue: n2 had its one delivery
    assert named.claim("w", VIS) is None  # moves n2 out; nothing else is free
    [dead] = named.dead_letters()
    assert (dead.seq, dead.last_error) == (n2, "boom")
    assert default.dead_letters() == []
    sn, sd = named.stats(), default.stats()
    assert (sn.ready, sn.leased, sn.dead_lettered, sn.groups) == (0, 1, 1, 1)
    assert (sd.ready, sd.leased, sd.dead_lettered, sd.groups) == (0, 1, 0, 1)
    assert named.redrive(all=True) == 1
    assert default.stats().ready == 0 and named.stats().ready == 1
    assert [m.seq for m in default.peek("g")] == [d1]

    listed = {q.name: q for q in named.queues()}
    assert {"default", name} <= set(listed)
    assert listed[name].created_at is not None
    # queues() gives each queue's depth, as its own stats() does
    for q, info in ((named, listed[name]), (default, listed["default"])):
        s = q.stats()
        assert info.stats is not None
        assert (info.stats.ready, info.stats.leased, info.stats.dead_lettered) == (
            s.ready,
            s.leased,
            s.dead_lettered,
        )
        assert (info.stats.groups, info.stats.by_priority) == (s.groups, s.by_priority)


def test_a_misspelt_queue_is_an_error_not_a_new_queue(connect: Any, queue_urls: list[str]) -> None:
    url = ",".join(queue_urls)
    name = fresh_name()
    with pytest.raises(QueueNotFound, match=f"no queue '{name}' on these nodes") as caught:
        connect(url, queue=name)
    assert f"queues create {name}" in str(caught.value)
    assert query(queue_urls, f"SELECT name FROM sqlite_master WHERE name LIKE 'rq_{name}%'") == []
    assert name not in [q.name for q in connect(url).queues()]
    with pytest.raises(TypeError, match="create: expected a bool"):
        connect(url, queue=name, create="yes")

    made = connect(url, queue=name, create=True)
    made.publish("g", {"n": 1})
    again = connect(url, queue=name)  # it exists now: opened without create
    assert again.stats().ready == 1
    assert name in [q.name for q in again.queues()]


def test_a_named_queue_of_an_earlier_release_opens_without_create(
    connect: Any, queue_urls: list[str]
) -> None:
    """A release before create= made a named queue on first use: its tables and its
    registry row are there, and it opens as it is."""
    name = fresh_name()
    created = [qualify(s, name).sql for s in _schema.TABLES]
    registered = f"INSERT INTO rqueue_queues (name, created_at) VALUES ('{name}', 1e9)"
    leader_execute(queue_urls, [*created, registered])
    q = connect(",".join(queue_urls), queue=name)
    q.publish("g", {"n": 1})
    assert q.claim("w", VIS) is not None
    assert {i.name: i.created_at for i in q.queues()}[name] == 1e9


def test_merged_claims_and_acks_of_a_named_queue(queue_urls: list[str]) -> None:
    """Concurrent callers of one transport share requests (fused claims and acks,
    :mod:`rqueue._batch`): on a named queue, every message is delivered once, in order."""
    name = fresh_name()
    with RqliteTransport.from_url(",".join(queue_urls), queue=name, create=True) as t:
        t.publish_many([(f"g{i % 4}", {"n": i}) for i in range(40)])
        got: list[Lease] = []
        lock = threading.Lock()

        def work() -> None:
            while (lease := t.claim("w", VIS)) is not None:
                with lock:
                    got.append(lease)
                t.ack(lease)

        threads = [threading.Thread(target=work) for _ in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert sorted(json.loads(x.event)["n"] for x in got) == list(range(40))
        for g in range(4):
            seqs = [x.seq for x in got if x.group_id == f"g{g}"]
            assert seqs == sorted(seqs)
        assert t.stats().queued == 0
    assert query(queue_urls, f"SELECT count(*) FROM rq_{name}__messages") == [(0,)]


def leader_execute(urls: list[str], body: list[Any]) -> list[dict[str, Any]]:
    """One transaction on ``/db/execute`` of whichever node leads (no redirect followed)."""
    for url in urls:
        r = requests.post(
            f"{url}/db/execute?transaction=true", json=body, timeout=10, allow_redirects=False
        )
        if r.status_code == 200:
            return r.json()["results"]
    raise AssertionError(f"no node of {urls} took {body!r}")


def test_the_nodes_parser_takes_a_named_queues_returning_writes(queue_urls: list[str]) -> None:
    """rqlite returns a write's rows only where its own parser takes the statement (see
    rqueue._statements): the qualified claims still return theirs, in one request."""
    name = fresh_name()
    with RqliteTransport.from_url(",".join(queue_urls), queue=name, create=True) as t:
        t.publish_many([("g", {"n": 1}), ("h", {"n": 2}), ("i", {"n": 3})])
    s = Statements(server_clock=True, clock=lambda: 1.0)
    for i, claim in enumerate(
        [s.claim_returning("t1", VIS, 0), s.claim_batch([Claim("t2", VIS), Claim("t3", VIS)], 0)]
    ):
        body = [STAMP.to_json(), qualify(claim, name).to_json()]
        result = leader_execute(queue_urls, body)[1]
        assert "error" not in result and result.get("columns"), result
        assert len(result["values"]) == i + 1


def test_a_bad_queue_name_is_refused_before_anything_is_sent(connect: Any) -> None:
    with pytest.raises(ValueError, match="queue: 'Bad-Name' is not a queue name"):
        connect("http://127.0.0.1:9", queue="Bad-Name", timeout=1)


# -- a database written before named queues -----------------------------------------------------
def load_release(urls: list[str]) -> dict[str, Any]:
    """Load the release database of test_migration into the nodes (``/db/load``)."""
    data = json.loads(RELEASE.read_text())
    body = "\n".join(data["dump"]).encode()
    for url in urls:
        r = requests.post(
            f"{url}/db/load", data=body, headers={"Content-Type": "text/plain"}, timeout=10
        )
        if r.status_code == 200 and "error" not in r.text:
            return data
    raise AssertionError(f"no node of {urls} loaded the dump")


def cli(*argv: str, urls: list[str] | str) -> tuple[int, str]:
    out = io.StringIO()
    url = urls if isinstance(urls, str) else ",".join(urls)
    return _cli.run(["--url", url, "--timeout", "5", *argv], out=out), out.getvalue()


def test_the_default_queue_reads_an_older_database_unchanged(
    connect: Any, make_cluster: Any
) -> None:
    urls = list(make_cluster(nodes=1).urls)
    load_release(urls)
    before = query(urls, "SELECT seq, group_id, event FROM messages ORDER BY seq")
    dead_before = query(urls, "SELECT seq, group_id, event FROM rqueue_dead ORDER BY seq")

    # no transport of this release opened it yet: the CLI still lists its one queue
    code, text = cli("queues", "--json", urls=urls)
    assert code == 0 and json.loads(text) == [{"name": "default", "created_at": None}]
    code, text = cli("queues", urls=urls)
    assert code == 0 and text.splitlines()[1].strip() == "default" and "older" in text

    url = ",".join(urls)
    default = connect(url)
    named = connect(url, queue="orders", create=True)
    assert query(urls, "SELECT seq, group_id, event FROM messages ORDER BY seq") == before
    assert [(d.seq, d.group_id, d.event) for d in default.dead_letters()] == [
        tuple(r) for r in dead_before
    ]
    peeked = [(m.seq, m.group_id, m.event) for g in "abcde" for m in default.peek(g)]
    assert sorted(peeked) == [tuple(r) for r in before]
    assert default.stats().queued == len(before)
    assert named.stats().queued == 0 and named.dead_letters() == []
    assert [q.name for q in default.queues()] == ["default", "orders"]
    assert all(isinstance(q, QueueInfo) for q in named.queues())
    # the leases of that release lapsed long ago: the default queue delivers its messages
    lease = default.claim("w", VIS)
    assert lease is not None and (lease.seq, lease.group_id) in {(r[0], r[1]) for r in before}


# -- the admin CLI and the worker command ----------------------------------------------------
def test_the_cli_lists_queues_and_acts_on_one(queue_urls: list[str], capsys: Any) -> None:
    name = fresh_name()
    with RqliteTransport.from_url(
        ",".join(queue_urls), queue=name, max_deliveries=1, create=True
    ) as t:
        code, text = cli("publish", "g", '{"n": 1}', "--queue", name, urls=queue_urls)
        assert code == 0
        seq = int(text)
        code, text = cli("--queue", name, "peek", "g", "--json", urls=queue_urls)
        assert [m["seq"] for m in json.loads(text)] == [seq]
        assert json.loads(cli("peek", "g", "--json", urls=queue_urls)[1]) == []  # default
        code, text = cli("stats", "--queue", name, urls=queue_urls)
        assert code == 0 and f"queue {name}" in text and "ready 1" in text

        t.nack(t.claim("w", VIS), 0, error="boom")
        assert t.claim("w", VIS) is None  # moved out
        code, text = cli("dlq", "list", "--queue", name, "--json", urls=queue_urls)
        assert [d["seq"] for d in json.loads(text)] == [seq]
        code, text = cli("dlq", "list", "--json", urls=queue_urls)
        assert seq not in [d["seq"] for d in json.loads(text)]

        code, text = cli("queues", urls=queue_urls)
        assert code == 0
        [line] = [x for x in text.splitlines() if x.split()[0] == name]
        assert line.split()[1:] == ["0", "0", "0", "1", "0"]  # ready leased parked dead groups
        assert any(x.split()[0] == "default" for x in text.splitlines()[1:])
        docs = {d["name"]: d for d in json.loads(cli("queues", "--json", urls=queue_urls)[1])}
        assert docs[name]["dead_lettered"] == 1 and docs[name]["created_at"] is not None

        code, text = cli("dlq", "purge", "--all", "--yes", "--queue", name, urls=queue_urls)
        assert (code, text) == (0, "1 purged\n")

    assert cli("stats", "--queue", "Nope!", urls=queue_urls)[0] == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --queue: 'Nope!' is not a queue name") and err.count("\n") == 1
    assert cli("stats", "--queue", fresh_name(), urls=queue_urls)[0] == 1
    assert "no queue" in capsys.readouterr().err


def test_the_worker_command_works_on_its_queue(queue_urls: list[str], tmp_path: Path) -> None:
    name = fresh_name()
    log = tmp_path / "log"
    url = ",".join(queue_urls)
    with (
        RqliteTransport.from_url(url, queue=name, create=True) as t,
        RqliteTransport.from_url(url) as d,
    ):
        mine = set(t.publish_many([(f"g{n % 2}", {"n": n}) for n in range(4)]))
        other = d.publish("g0", {"n": "default"})
        env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKER_TEST_LOG": str(log)}
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "rqueue", "worker", "tests.rqueue.worker_handlers:slow",
                "--url", url, "--queue", name, "--timeout", "20",
            ],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for("the named queue drained", lambda: t.stats().queued == 0, 30.0)
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert f"queue {name}" in err
        done = {int(x.split()[1]) for x in log.read_text().splitlines() if x.startswith("done")}
        assert done == mine
        assert [m.seq for m in d.peek("g0")] == [other]  # the default queue's is untouched


def test_the_worker_command_refuses_a_bad_queue_name(capsys: Any) -> None:
    assert cli("worker", "json:loads", "--queue", "9x", urls="http://127.0.0.1:9")[0] == 2
    assert "--queue: '9x' is not a queue name" in capsys.readouterr().err


def test_the_worker_command_refuses_a_queue_that_does_not_exist(
    queue_urls: list[str], capsys: Any
) -> None:
    name = fresh_name()
    assert cli("worker", "json:loads", "--queue", name, urls=queue_urls)[0] == 1
    err = capsys.readouterr().err
    assert f"error: no queue '{name}' on these nodes" in err and "queues create" in err
