"""Rewriting seen from outside, on every engine: what rqlite rewrites is the same on every
node; what it leaves (a time call in a scalar subquery) is evaluated by each node when it
applies the entry, and again when a restarted node replays its log; where its processor
fails the request is a 500 and nothing of it is applied."""

from __future__ import annotations

import uuid

import pytest

from rqueue._version import TIME_REWRITING
from tests.cluster.helpers import wait_until

from ._http import call, execute

pytestmark = pytest.mark.needs_rqlite(TIME_REWRITING, "rewriting of 'now' and random()")

ESCAPE_500 = "SQL rewrite: panic during SQL processing: sql.BinaryExpr.String(): invalid op ESCAPE"


def _local(url: str, sql: str) -> list:
    r = call("POST", url, "/db/query?level=none", [sql])
    assert r.status == 200, r.text
    return r.json["results"][0].get("values", [])


def _values_everywhere(c, table: str, row: int, deadline: float = 20.0) -> dict[str, float]:
    """Row ``row``'s value ``a`` as each node holds it, once every node has applied it."""
    got: dict[str, float] = {}

    def applied() -> bool:
        for n in c.nodes():
            rows = _local(n.url, f"SELECT a FROM {table} WHERE id = {row}")
            if rows and rows[0][0] is not None:
                got[n.id] = rows[0][0]
        return len(got) == len(c.nodes())

    wait_until(applied, deadline, f"every node to apply the write of row {row} in {table}")
    return dict(got)


def test_unrewritten_now_diverges_and_rewritten_now_does_not(make_cluster) -> None:
    c = make_cluster(nodes=3)
    table = f"t_{uuid.uuid4().hex[:8]}"
    lead = c.wait_for_leader(30.0)
    if c.engine == "embedded":  # makes the divergence certain, not merely likely
        follower = next(n for n in c.nodes() if n.id != lead.id)
        c.set_clock_offset(follower.id, 120.0)
        wait_until(
            lambda: call("GET", follower.url, "/status").json["node"]["clock_offset"] == 120.0,
            10.0,
            f"{follower.id} to report its clock offset",
        )
    execute(lead.url, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, a REAL)"])
    for row in (1, 2, 3):
        execute(lead.url, [f"INSERT INTO {table}(id) VALUES ({row})"])
    # rewritten by the receiving node: one literal in the log, the same everywhere
    execute(lead.url, [f"UPDATE {table} SET a = julianday('now') WHERE id = 1"])
    assert len(set(_values_everywhere(c, table, 1).values())) == 1
    # a scalar subquery: rqlite does not rewrite it, every node reads its own clock
    diverged = False
    for attempt in range(5):
        execute(lead.url, [f"UPDATE {table} SET a = (SELECT julianday('now')) WHERE id = 2"])
        values = _values_everywhere(c, table, 2)
        if len(set(values.values())) > 1:
            diverged = True
            break
        execute(lead.url, [f"UPDATE {table} SET a = NULL WHERE id = 2"])
        wait_until(
            lambda: all(
                _local(n.url, f"SELECT a FROM {table} WHERE id = 2") == [[None]] for n in c.nodes()
            ),
            20.0,
            f"every node to clear row 2 (attempt {attempt})",
        )
    assert diverged, f"5 unrewritten writes gave one value on every node: {values}"


def test_a_restarted_node_replays_unrewritten_now_with_its_later_clock(make_cluster) -> None:
    c = make_cluster(nodes=3)
    table = f"t_{uuid.uuid4().hex[:8]}"
    lead = c.wait_for_leader(30.0)
    execute(lead.url, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, a REAL, b REAL)"])
    execute(
        lead.url,
        [f"INSERT INTO {table}(id, a, b) VALUES (1, (SELECT julianday('now')), julianday('now'))"],
    )
    follower = next(n for n in c.nodes() if n.id != lead.id)
    wait_until(
        lambda: _local(follower.url, f"SELECT a, b FROM {table}") != [],
        20.0,
        f"{follower.id} to apply the insert",
    )
    ((a_before, b_before),) = _local(follower.url, f"SELECT a, b FROM {table}")
    c.kill(follower.id)
    shift = 0.0
    if c.engine == "embedded":  # the replay then reads a clock an hour ahead: unmistakable
        shift = 3600.0
        c.set_clock_offset(follower.id, shift)
    c.restart(follower.id)
    wait_until(
        lambda: _reachable_rows(follower.url, table) != [],
        60.0,
        f"{follower.id} to come back and replay its log",
    )
    ((a_after, b_after),) = _local(follower.url, f"SELECT a, b FROM {table}")
    assert b_after == b_before  # the rewritten literal is in the log
    if c.engine != "embedded" and a_after == a_before:
        # rqlite v8 may restore from its own database file instead of replaying the entry
        pytest.skip(f"{c.engine} did not re-apply the entry on restart")
    assert a_after > a_before + shift / 86400 * 0.9, (a_before, a_after)


def _reachable_rows(url: str, table: str) -> list:
    try:
        r = call("POST", url, "/db/query?level=none", [f"SELECT a, b FROM {table}"], timeout=2.0)
    except Exception:  # not listening yet
        return []
    if r.status != 200 or "error" in r.json["results"][0]:
        return []
    return r.json["results"][0].get("values", [])


def test_escape_in_a_rewritten_statement_is_a_500_and_applies_nothing(make_cluster) -> None:
    c = make_cluster(nodes=3)
    table = f"t_{uuid.uuid4().hex[:8]}"
    lead = c.wait_for_leader(30.0)
    follower = next(n for n in c.nodes() if n.id != lead.id)
    execute(lead.url, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, a)"])
    body = [
        f"INSERT INTO {table}(id, a) VALUES (1, 'x')",
        f"UPDATE {table} SET a = julianday('now') WHERE a LIKE '%!%' ESCAPE '!'",
    ]
    for url in (lead.url, follower.url):
        for path in ("/db/execute", "/db/request"):
            r = call("POST", url, path, body)
            assert (r.status, r.text) == (500, ESCAPE_500 + "\n"), (url, path)
    r = call("POST", lead.url, "/db/query?level=strong", [f"SELECT COUNT(*) FROM {table}"])
    assert r.json["results"][0]["values"] == [[0]]
    # without a rewritten call the statement is not re-printed: no failure
    ok = execute(lead.url, [f"UPDATE {table} SET a = 1 WHERE a LIKE '%!%' ESCAPE '!'"])
    assert "error" not in ok["results"][0]


def test_random_on_request_is_rewritten_from_v10_only(make_cluster, server_version) -> None:
    """random() is rewritten on /db/execute by every version; on /db/request v8 and v9 hand
    ``norwrandom`` to the processor un-negated (``http/service.go``), so without it a
    random() sent there is drawn by every node (and a LIKE ... ESCAPE next to it is not
    re-printed: no 500), while v10 rewrites it (the ESCAPE then fails the request)."""
    c = make_cluster(nodes=3)
    table = f"t_{uuid.uuid4().hex[:8]}"
    lead = c.wait_for_leader(30.0)
    follower = next(n for n in c.nodes() if n.id != lead.id)
    execute(lead.url, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, a)"])
    execute(follower.url, [f"INSERT INTO {table}(id, a) VALUES (1, random())"])
    assert len(set(_values_everywhere(c, table, 1).values())) == 1
    v10 = server_version is None or server_version >= (10, 0, 0)
    escape = f"INSERT INTO {table}(id, a) SELECT 3, random() WHERE 'x' LIKE '%!%' ESCAPE '!'"
    r = call("POST", follower.url, "/db/request", [escape])
    assert (r.status, r.text.strip()) == ((500, ESCAPE_500) if v10 else (200, r.text.strip()))
    r = call(
        "POST", follower.url, "/db/request", [f"INSERT INTO {table}(id, a) VALUES (2, random())"]
    )
    assert r.status == 200, r.text
    drawn = set(_values_everywhere(c, table, 2).values())
    assert len(drawn) == (1 if v10 else len(c.nodes()))
    # the inversion: v8 and v9 rewrite random() on /db/request only with norwrandom
    r = call(
        "POST",
        follower.url,
        "/db/request?norwrandom",
        [f"INSERT INTO {table}(id, a) VALUES (4, random())"],
    )
    assert r.status == 200, r.text
    drawn = set(_values_everywhere(c, table, 4).values())
    assert len(drawn) == (len(c.nodes()) if v10 else 1)
