"""What rqlite's HTTP API does differently in v8.36.18, v9.4.5 and v10.2.7, read in each
version's source (``http/service.go``, ``store/store.go``, ``db/db.go``,
``proxy/proxy.go``): every case runs on embedded nodes told to follow that version, and on
real rqlite of that major version (``RQUEUE_TEST_ENGINE=rqlited``; the other versions'
cases then skip). The table in docs/embedded-node.md ("The HTTP API, version by version")
points here."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest

from rqueue._version import ONE_REQUEST_CLAIM

from ._http import call, execute, query
from ._versioned import VERSIONS

pytestmark = pytest.mark.needs_rqlite(ONE_REQUEST_CLAIM, "/db/request and RETURNING")

#: a rewritten random() is printed as a number, and a result column is named after its text
_NUMBER = re.compile(r"-?\d+")


def _major(version: str) -> int:
    return int(version.split(".")[0])


def _column(url: str, path: str, sql: str) -> str:
    r = call("POST", url, path, [sql])
    assert r.status == 200, (path, r.status, r.text)
    return r.json["results"][0]["columns"][0]


def _rewritten(name: str) -> bool:
    return _NUMBER.fullmatch(name) is not None


@pytest.mark.parametrize("version", VERSIONS)
def test_where_random_is_rewritten(follow, version: str) -> None:
    """``sql.Process(stmts, rwrand, rwtime)`` per handler: ``/db/execute`` rewrites
    random() unless ``norwrandom``; ``/db/request`` and a strong ``/db/query`` pass
    ``norwrandom`` un-negated in v8 and v9 (rewritten only *with* it) and negated in v10;
    other reads are not rewritten; ``noparse`` turns the processing off."""
    url = follow(version)["leader"]
    v10 = _major(version) >= 10
    assert _rewritten(_column(url, "/db/request", "SELECT random()")) is v10
    assert _rewritten(_column(url, "/db/request?norwrandom", "SELECT random()")) is not v10
    assert _rewritten(_column(url, "/db/query?level=strong", "SELECT random()")) is v10
    strong_off = "/db/query?level=strong&norwrandom"
    assert _rewritten(_column(url, strong_off, "SELECT random()")) is not v10
    for path in ("/db/query", "/db/query?level=none", "/db/request?noparse"):
        assert _column(url, path, "SELECT random()") == "random()", path
    table = f"t_rw_{version.replace('.', '_')}"
    execute(url, [f"CREATE TABLE IF NOT EXISTS {table} (a)"])
    returning = f"INSERT INTO {table}(a) VALUES (1) RETURNING random()"
    assert _rewritten(_column(url, "/db/execute", returning))
    assert _column(url, "/db/execute?norwrandom", returning) == "random()"


@pytest.mark.parametrize("version", VERSIONS)
def test_only_a_statement_naming_a_call_is_processed(follow, version: str) -> None:
    """rqlite parses a statement only when its lower-cased text holds ``julianday(``,
    ``random(``, ``returning `` (with that space) ... (``command/sql/processor.go``): a call
    written with a space before its parenthesis is left alone, and a ``RETURNING`` followed
    by a tab does not make the write answer rows."""
    url = follow(version)["leader"]
    assert _column(url, "/db/request", "SELECT julianday ('now')") == "julianday ('now')"
    assert _column(url, "/db/request", "SELECT julianday('now')") != "julianday('now')"
    table = f"t_ret_{version.replace('.', '_')}"
    execute(url, [f"CREATE TABLE IF NOT EXISTS {table} (a)"])
    tab = execute(url, [f"INSERT INTO {table}(a) VALUES (1) RETURNING\ta"])["results"][0]
    assert "columns" not in tab and "error" not in tab, tab
    space = execute(url, [f"INSERT INTO {table}(a) VALUES (1) RETURNING a"])["results"][0]
    assert space["columns"] == ["a"], space


@pytest.mark.parametrize("version", VERSIONS)
def test_returning_counts_only_when_the_parser_reads_it(follow, version: str) -> None:
    """A write's ``RETURNING`` rows come back only when rqlite's parser accepts the
    statement (``ForceQuery``); ``groups``, a keyword to that parser, makes ``UPDATE
    groups ... RETURNING`` an ordinary write answering counts, on ``/db/execute`` and on
    ``/db/request`` alike; so does ``noparse``. On a cluster of its own: rqueue's tests
    keep their ``groups`` table on the shared one."""
    url = follow(version, own=True)["leader"]
    shape = query(url, ["SELECT sql FROM sqlite_master WHERE name = 'groups'"])["results"][0]
    if shape.get("values") and "v)" not in shape["values"][0][0]:  # rqlited: one cluster
        pytest.skip("this shared cluster already has another table named groups (rqueue's)")
    execute(url, ['CREATE TABLE IF NOT EXISTS "groups" (id INTEGER PRIMARY KEY, v)'])
    execute(url, ['INSERT OR REPLACE INTO "groups"(id, v) VALUES (1, 0)'])
    for path in ("/db/execute", "/db/request"):
        r = call("POST", url, path, ["UPDATE groups SET v = v + 1 WHERE id = 1 RETURNING v"])
        assert r.status == 200 and "columns" not in r.json["results"][0], (path, r.text)
        quoted = 'UPDATE "groups" SET v = v + 1 WHERE id = 1 RETURNING v'
        assert call("POST", url, path, [quoted]).json["results"][0]["columns"] == ["v"]
        plain = call("POST", url, f"{path}?noparse", [quoted]).json["results"][0]
        assert "columns" not in plain and "error" not in plain, (path, plain)


@pytest.mark.parametrize("version", VERSIONS)
def test_where_a_read_of_db_request_is_served(follow, version: str) -> None:
    """``store.Request`` with reads only: ``weak`` at the leader (a follower forwards),
    ``none`` and ``auto`` locally on any node (``auto`` is never turned into ``weak``
    there, unlike on ``/db/query``), ``linearizable`` at the leader from v9 on but locally,
    unchecked, in v8. Seen in ``X-RQLITE-SERVED-BY``: the leader's Raft address when
    forwarded; this node's HTTP address (v9+) or nothing (v8) when served here."""
    urls = follow(version)
    follower = urls["followers"][0]
    lead_raft = call("GET", urls["leader"], "/status").json["store"]["addr"]
    here = urlsplit(follower).netloc if _major(version) >= 9 else None
    cases = [
        ("/db/request?level=weak", lead_raft),
        ("/db/request?level=none", here),
        ("/db/request?level=auto", here),
        ("/db/request?level=linearizable", lead_raft if _major(version) >= 9 else here),
        ("/db/query?level=auto", lead_raft),
        ("/db/query?level=linearizable", lead_raft),
    ]
    for path, served_by in cases:
        r = call("POST", follower, path, ["SELECT 1"])
        assert r.status == 200 and r.json["results"][0]["values"] == [[1]], (path, r.text)
        assert r.headers.get("X-Rqlite-Served-By") == served_by, path


@pytest.mark.parametrize("version", VERSIONS)
def test_explain_of_a_write(follow, version: str) -> None:
    """``EXPLAIN`` of a write: v8 takes it for a write (refused as a read, a write on
    ``/db/request``); v9 marks it when it processes the statement (``SqlExplain``: a strong
    read or ``/db/request``) and lets it read; v10 reads on a ``query_only`` connection,
    where it writes nothing, so every read level answers its rows."""
    url = follow(version)["leader"]
    table = f"t_ex_{version.replace('.', '_')}"
    execute(url, [f"CREATE TABLE IF NOT EXISTS {table} (a)"])
    sql = f"EXPLAIN QUERY PLAN INSERT INTO {table} SELECT a FROM {table}"
    major = _major(version)
    weak = call("POST", url, "/db/query", [sql]).json["results"][0]
    strong = call("POST", url, "/db/query?level=strong", [sql]).json["results"][0]
    mixed = call("POST", url, "/db/request", [sql]).json["results"][0]
    refused = {"error": "attempt to change database via query operation"}
    assert (weak == refused) is (major < 10), weak
    assert (strong == refused) is (major < 9), strong
    assert ("columns" in mixed) is (major >= 9), mixed


@pytest.mark.parametrize("version", VERSIONS)
def test_raft_index_and_qualified_columns(follow, version: str) -> None:
    """``?raft_index`` (v9+): a write's and a strong read's log index in the answer, nothing
    for a local read; ``?qualify_columns`` (v10): ``table.column`` names."""
    url = follow(version)["leader"]
    table = f"t_ri_{version.replace('.', '_')}"
    first = execute(url, [f"CREATE TABLE IF NOT EXISTS {table} (a)"], "?raft_index")
    second = execute(url, [f"INSERT INTO {table}(a) VALUES (1)"], "?raft_index")
    strong = call("POST", url, "/db/query?level=strong&raft_index", [f"SELECT a FROM {table}"])
    weak = call("POST", url, "/db/query?raft_index", [f"SELECT a FROM {table}"])
    if _major(version) >= 9:
        assert second["raft_index"] > first["raft_index"] > 0
        assert strong.json["raft_index"] > second["raft_index"]
    else:
        assert "raft_index" not in first and "raft_index" not in strong.json
    assert "raft_index" not in weak.json
    r = call("POST", url, "/db/query?qualify_columns", [f"SELECT a, 1 AS k FROM {table}"])
    qualified = [f"{table}.a", "k"] if _major(version) >= 10 else ["a", "k"]
    assert r.json["results"][0]["columns"] == qualified


@pytest.mark.parametrize("version", VERSIONS)
def test_associative_execute(follow, version: str) -> None:
    """``/db/execute?associative`` (and ``blob_array``): v9+ answer counts with ``"rows":
    null`` and RETURNING rows as objects (BLOBs as arrays of bytes), as ``/db/request``
    does; v8's execute ignores both flags."""
    url = follow(version)["leader"]
    table = f"t_as_{version.replace('.', '_')}"
    execute(url, [f"CREATE TABLE IF NOT EXISTS {table} (a)"])
    ins, ret = execute(
        url,
        [f"DELETE FROM {table}", f"INSERT INTO {table}(a) VALUES (7) RETURNING a"],
        "?associative",
    )["results"]
    if _major(version) >= 9:
        assert ret == {"types": {"a": "integer"}, "rows": [{"a": 7}]}
        assert ins.get("rows", "absent") is None
    else:
        assert ret["columns"] == ["a"] and ret["values"] == [[7]]
        assert "rows" not in ins
    blobs = f"{table}_b"
    execute(url, [f"CREATE TABLE IF NOT EXISTS {blobs} (b BLOB)"])
    (got,) = execute(url, [f"INSERT INTO {blobs}(b) VALUES (x'0102') RETURNING b"], "?blob_array")[
        "results"
    ]
    assert got["values"] == ([[[1, 2]]] if _major(version) >= 9 else [["AQI="]])


@pytest.mark.parametrize("version", VERSIONS)
def test_counters_by_version(follow, version: str) -> None:
    """``/debug/vars``: ``authOK`` until v8.36, ``auth_ok`` from v8.37 (so v9); the
    forwarding counters under ``proxy`` from v9 on."""
    url = follow(version)["leader"]
    page = call("GET", url, "/debug/vars").json
    major = _major(version)
    assert ("auth_ok" in page["http"]) is (major >= 9)
    assert ("authOK" in page["http"]) is (major < 9)
    assert ("remote_executions" in page["http"]) is (major < 9)
    assert ("remote_executions" in page.get("proxy", {})) is (major >= 9)


@pytest.mark.parametrize("version", VERSIONS)
def test_readyz_and_leader_by_version(follow, version: str) -> None:
    """``/readyz``: v10 ends with ``[+]db ok`` (a ``SELECT 1``); ``sync`` waits for this
    node's commit index to reach the leader's (every version). ``GET /leader`` (v9+) answers
    the leader as ``/nodes`` describes a node; v8 has no such endpoint."""
    urls = follow(version)
    follower = urls["followers"][0]
    major = _major(version)
    tail = "\n[+]db ok" if major >= 10 else ""
    r = call("GET", follower, "/readyz")
    assert (r.status, r.text) == (200, "[+]node ok\n[+]leader ok\n[+]store ok" + tail)
    r = call("GET", follower, "/readyz?sync")
    assert (r.status, r.text) == (200, "[+]node ok\n[+]leader ok\n[+]store ok\n[+]sync ok" + tail)
    r = call("GET", follower, "/leader")
    if major >= 9:
        assert r.status == 200 and r.json["api_addr"] == urls["leader"] and r.json["leader"]
    else:
        assert r.status == 404


@pytest.mark.parametrize("version", VERSIONS)
def test_a_pragma_rqlite_depends_on_refuses_the_request(follow, version: str) -> None:
    """``PRAGMA journal_mode=...`` (and ``wal_checkpoint``, ``synchronous=``,
    ``wal_autocheckpoint=``; v10 also ``query_only=``) anywhere in a request: nothing of it
    runs, the answer is ``{"results": [], "error": "disallowed pragma"}``. Asking a PRAGMA's
    value is fine."""
    url = follow(version)["leader"]
    table = f"t_pr_{version.replace('.', '_')}"
    execute(url, [f"CREATE TABLE IF NOT EXISTS {table} (a)", f"DELETE FROM {table}"])
    body = [f"INSERT INTO {table}(a) VALUES (1)", "  pragma JOURNAL_MODE = wal"]
    for path in ("/db/execute", "/db/request"):
        r = call("POST", url, path, body)
        assert (r.status, r.json) == (200, {"results": [], "error": "disallowed pragma"}), path
    asked = call("POST", url, "/db/request", ["PRAGMA journal_mode"])  # no "=": not refused
    assert asked.status == 200 and "error" not in asked.json, asked.text
    if _major(version) >= 10:  # never sent to v8/v9: it would make their connection read-only
        r = call("POST", url, "/db/execute", ["PRAGMA query_only = 1"])
        assert r.json == {"results": [], "error": "disallowed pragma"}
    count = call("POST", url, "/db/query?level=strong", [f"SELECT COUNT(*) FROM {table}"])
    assert count.json["results"][0]["values"] == [[0]]
