"""Six smaller places where the embedded node follows rqlite (issue 40): the write queue's
batch timeout, ``?redirect`` with no leader, the request-body size, ``/readyz``, a
``RETURNING`` write rqlite's parser rejects, and multi-way JOINs as each version's
rqlite/sql prints them (docs/embedded-node.md, "Smaller places, by rqlite's source")."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import requests

from harness.node.sql.rewrite import rqlite_process
from harness.node.statements import Statement
from harness.node.write_queue import WriteQueue
from tests.cluster.helpers import wait_until

from ._http import call
from ._versioned import VERSIONS

CLOCK = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)  # the corpora's clock
JD = "2461042.627843"  # its Julian day, as rqlite prints it


def _first_batch_delay() -> float:
    """Seconds from queueing one write on a queue with the default batch timeout to its
    batch being written."""
    written = threading.Event()
    at: list[float] = []

    def run(stmts: list[Statement]) -> None:
        at.append(time.monotonic())
        written.set()

    q = WriteQueue(run, lambda name, n: None, 0)
    try:
        start = time.monotonic()
        q.write([Statement("A")], None)
        assert written.wait(5.0), "the queued write was never written"
        return at[0] - start
    finally:
        q.close()


def test_the_write_queue_waits_50_ms_for_a_batch() -> None:
    """rqlited's ``-write-queue-timeout`` defaults to 50 ms (every version followed): a lone
    queued write is written 50 ms after it came, not the 100 ms of ``service.go``'s own
    default. A timer only fires late, so the quickest of five tries shows the timeout."""
    delays = [_first_batch_delay() for _ in range(5)]
    assert min(delays) >= 0.05, delays
    assert min(delays) < 0.1, f"a lone write waited {min(delays):.3f} s at best: {delays}"


def test_a_body_larger_than_64_mib_is_read_as_rqlite_reads_it(urls: dict) -> None:
    """rqlite reads a request body whole (``io.ReadAll``, a ``json.Decoder``), with no
    size limit in any version followed; the node refused more than 64 MiB. The body here
    is mostly JSON whitespace, so nothing large enters the log; sent with a length and
    chunked."""
    body = b" " * (65 * 1024 * 1024) + b'["SELECT 1"]'
    r = call("POST", urls["leader"], "/db/query?level=none", raw=body, timeout=120.0)
    assert r.status == 200 and r.json["results"][0]["values"] == [[1]], r.text[:200]

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 8 * 1024 * 1024):
            yield body[start : start + 8 * 1024 * 1024]

    r2 = requests.post(
        urls["leader"] + "/db/query?level=none",
        data=chunks(),
        headers={"Content-Type": "application/json"},
        timeout=120.0,
    )
    assert r2.status_code == 200 and r2.json()["results"][0]["values"] == [[1]], r2.text[:200]


def test_readyz_asks_the_leader_and_redirect_without_one_is_500(make_cluster) -> None:
    """``/readyz`` on a follower whose leader is gone but still named (for an election
    timeout): ``503 [+]node ok / [+]leader not contactable: ...`` (rqlite asks the leader
    for its meta); the node answered ``200``. Then a node that knows no leader, asked with
    ``?redirect``: ``500 leader not found`` (rqlite's ``FormRedirect``), without it ``503``,
    on ``/db/execute``, ``/db/query`` and ``/db/request``; the node answered ``503``."""
    c = make_cluster(nodes=3)
    lead = c.wait_for_leader(30.0)
    first, second = (n for n in c.nodes() if n.id != lead.id)
    c.kill(lead.id)
    r = call("GET", first.url, "/readyz?timeout=2s")
    assert r.status == 503, r.text
    assert r.text.startswith("[+]node ok\n[+]leader not contactable: "), r.text

    c.kill(second.id)
    wait_until(
        lambda: (
            call("GET", first.url, "/readyz", timeout=5.0).text
            == "[+]node ok\n[+]leader does not exist"
        ),
        30.0,
        f"{first.id}, alone, to know no leader",
    )
    for method, path, body in (
        ("POST", "/db/execute", ["CREATE TABLE IF NOT EXISTS t (a)"]),
        ("GET", "/db/query?q=SELECT%201", None),
        ("POST", "/db/request", ["SELECT 1"]),
    ):
        joiner = "&" if "?" in path else "?"
        r = call(method, first.url, f"{path}{joiner}redirect", body)
        assert (r.status, r.text) == (500, "leader not found\n"), (path, r.status, r.text)
        r = call(method, first.url, path, body)
        assert (r.status, r.text) == (503, "leader not found\n"), (path, r.status, r.text)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", ["/db/execute", "/db/request"])
def test_a_returning_write_the_parser_rejects_counts_as_go_sqlite3_steps_it(
    follow, version: str, path: str, table: str
) -> None:
    """``[name]`` quoting is beyond rqlite/sql's parser (every version), so a ``RETURNING``
    write that uses it is not marked ``ForceQuery``: ``db.go`` runs it with
    ``ExecContext`` and go-sqlite3 steps it once (``execSync``). SQLite makes every change
    of a ``RETURNING`` statement in that first step but counts them only when the
    statement ends, so ``rows_affected`` is the previous statement's ``changes()`` and no
    rows come back; once finalized, its own count is what the next one sees."""
    url = follow(version)["leader"]
    body = [
        f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v INT)",
        f"INSERT INTO {table}(v) VALUES (1), (2), (3)",
        f"INSERT INTO {table}(v) VALUES (4)",
        f"UPDATE [{table}] SET v = v + 10 RETURNING id",
        f"UPDATE [{table}] SET v = v + 100 WHERE id < 3 RETURNING id",
    ]
    r = call("POST", url, path, body)
    assert r.status == 200, r.text
    results = r.json["results"]
    assert results[3] == {"last_insert_id": 4, "rows_affected": 1}, results
    assert results[4] == {"last_insert_id": 4, "rows_affected": 4}, results
    rows = call("GET", url, f"/db/query?level=strong&q=SELECT%20v%20FROM%20{table}").json
    assert rows["results"][0]["values"] == [[111], [112], [13], [14]], rows


def _joins(order: str) -> str:
    """``order`` as a FROM clause: digits are tables ``t1``..., ``o`` followed by a digit
    the constraint ``ON n`` of the n-th join (``"12o13o2"``: t1 JOIN t2 ON 1 JOIN t3 ON 2)."""
    parts, pending = [], iter(order)
    for ch in pending:
        if ch == "o":
            parts.append(f" ON {next(pending)}")
        else:
            parts.append(f'"t{ch}"' if ch == "1" else f' JOIN "t{ch}"')
    return "".join(parts)


#: tables -> what each version's rqlite/sql pin prints for t1 JOIN t2 ON 1 JOIN t3 ON 2 ...
#: (v8.36.18: a4122fabb196, right-nested, the first ON printed last; v9.4.5: 264b5170bad2,
#: the same tree, a printer right for up to three joins; v10.2.7: 1b2524a41372, left-nested)
_JOIN_PRINTS = {
    "8.36.18": {2: "12o1", 3: "123o2o1", 4: "123o24o3o1", 5: "123o24o35o4o1"},
    "9.4.5": {2: "12o1", 3: "12o13o2", 4: "12o13o24o3", 5: "123o2o14o35o4", 6: "123o24o3o15o46o5"},
    "10.2.7": {2: "12o1", 3: "12o13o2", 4: "12o13o24o3", 5: "12o13o24o35o4", 6: "12o13o24o35o46o5"},
}


@pytest.mark.parametrize(
    ("version", "tables"), [(v, n) for v, prints in _JOIN_PRINTS.items() for n in prints]
)
def test_a_multi_way_join_is_printed_as_the_versions_parser_prints_it(
    version: str, tables: int
) -> None:
    """A rewritten statement enters the log as rqlite/sql re-prints it; for a chain of
    JOINs each pin puts the ON clauses where its tree and printer do (``parseSource``,
    ``JoinClause.String``). SQLite reads a misplaced ON as the constraint of another join:
    the replicas still agree, but the statement is not the one sent."""
    sent = "".join(f" JOIN t{n} ON {n - 1}" for n in range(2, tables + 1))
    sql = f"SELECT * FROM t1{sent} WHERE julianday('now')"
    out = rqlite_process(sql, CLOCK, 4242424242, version)
    assert out == f"SELECT * FROM {_joins(_JOIN_PRINTS[version][tables])} WHERE julianday({JD})"
