"""rqlite's HTTP API, checked over HTTP against the shared cluster.

The same tests run against real rqlite with ``RQLITE_URLS=...`` (or
``RQUEUE_TEST_ENGINE=rqlited``): a test that passes only on the embedded node is a defect.
"""

from __future__ import annotations

import http.client
import socket
import time
from urllib.parse import urlsplit

import pytest

from rqueue._version import ONE_REQUEST_CLAIM, TIME_REWRITING
from tests.cluster.helpers import wait_until

from ._http import call, execute, query


def _create(url: str, table: str) -> None:
    execute(url, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT, n REAL)"])


def test_every_response_carries_the_version_header(urls: dict) -> None:
    url = urls["followers"][0]
    for method, path, body in [
        ("GET", "/status", None),
        ("GET", "/readyz", None),
        ("GET", "/nodes", None),
        ("GET", "/db/query?q=SELECT%201", None),
        ("POST", "/db/execute", ["SELECT 1"]),
        ("POST", "/db/execute", None),
    ]:
        r = call(method, url, path, body)
        assert r.headers.get("X-RQLITE-VERSION", "").startswith("v"), (method, path, r.headers)


def test_status_names_the_leader_and_the_raft_state(urls: dict) -> None:
    leaders = set()
    for url in urls["all"]:
        st = call("GET", url, "/status").json
        store = st["store"]
        assert store["node_id"]
        assert set(store["leader"]) >= {"addr", "node_id"}
        leaders.add(store["leader"]["node_id"])
        assert store["raft"]["state"] in ("Leader", "Follower")
        assert st["build"]["version"].startswith("v")
        if url == urls["leader"]:
            assert store["raft"]["state"] == "Leader"
    assert len(leaders) == 1 and "" not in leaders


def test_readyz_and_nodes(urls: dict) -> None:
    for url in urls["all"]:
        r = call("GET", url, "/readyz")
        assert r.status == 200 and "[+]leader ok" in r.text
    nodes = call("GET", urls["followers"][0], "/nodes").json
    assert len(nodes) == len(urls["all"])
    assert {n["api_addr"] for n in nodes.values()} == set(urls["all"])
    assert all(n["reachable"] for n in nodes.values())
    assert [n["api_addr"] for n in nodes.values() if n["leader"]] == [urls["leader"]]


def test_insert_on_a_follower_is_seen_by_a_strong_read_on_another(urls: dict, table: str) -> None:
    f1, f2 = urls["followers"][:2]
    _create(f1, table)
    res = execute(f1, [[f"INSERT INTO {table}(name, n) VALUES(?, ?)", "fiona", 2.5]])
    assert res["results"] == [{"last_insert_id": 1, "rows_affected": 1}]
    out = query(f2, [f"SELECT id, name, n FROM {table}"])["results"][0]
    assert out["columns"] == ["id", "name", "n"]
    assert out["types"] == ["integer", "text", "real"]
    assert out["values"] == [[1, "fiona", 2.5]]


def test_named_parameters_and_simple_statements(urls: dict, table: str) -> None:
    url = urls["leader"]
    _create(url, table)
    execute(url, [[f"INSERT INTO {table}(name) VALUES(:name)", {"name": "bob"}]])
    execute(url, [f"INSERT INTO {table}(name) VALUES('carol')"])
    got = query(url, [f"SELECT name FROM {table} ORDER BY id"])["results"][0]["values"]
    assert got == [["bob"], ["carol"]]


def test_sql_error_is_per_statement_and_later_statements_run(urls: dict, table: str) -> None:
    url = urls["followers"][0]
    _create(url, table)
    res = execute(
        url,
        [
            [f"INSERT INTO {table}(id, name) VALUES(?, ?)", 1, "a"],
            [f"INSERT INTO {table}(id, name) VALUES(?, ?)", 1, "dup"],
            [f"INSERT INTO {table}(id, name) VALUES(?, ?)", 2, "b"],
        ],
    )["results"]
    assert res[0] == {"last_insert_id": 1, "rows_affected": 1}
    assert "UNIQUE constraint failed" in res[1]["error"]
    assert res[2] == {"last_insert_id": 2, "rows_affected": 1}


def test_transaction_stops_at_the_first_error_and_rolls_back(urls: dict, table: str) -> None:
    url = urls["leader"]
    _create(url, table)
    res = execute(
        url,
        [
            [f"INSERT INTO {table}(id, name) VALUES(?, ?)", 1, "a"],
            [f"INSERT INTO no_such_table_{table} VALUES(1)"],
            [f"INSERT INTO {table}(id, name) VALUES(?, ?)", 2, "b"],
        ],
        "?transaction",
    )["results"]
    assert len(res) == 2 and "no such table" in res[1]["error"]
    rows = query(url, [f"SELECT COUNT(*) FROM {table}"])["results"][0]["values"]
    assert rows == [[0]]


def test_query_shapes(urls: dict, table: str, server_version) -> None:
    url = urls["leader"]
    _create(url, table)
    empty = query(url, [f"SELECT id, name FROM {table}"])["results"][0]
    assert empty["columns"] == ["id", "name"] and "values" not in empty
    execute(url, [[f"INSERT INTO {table}(id, name) VALUES(?, ?)", 7, "x"]])
    r = call("GET", urls["followers"][0], f"/db/query?level=weak&q=SELECT%20name%20FROM%20{table}")
    assert r.status == 200 and r.json["results"][0]["values"] == [["x"]]
    counted = query(url, [f"SELECT COUNT(*) AS n FROM {table}"])["results"][0]
    # a column with no declared type: v8 names its value's type, v6 (6.10.2) leaves it ""
    typed = server_version is None or server_version >= (8, 0, 0)
    assert counted == {"columns": ["n"], "types": ["integer" if typed else ""], "values": [[1]]}


#: v6.10.2 answers ?associative like a plain query, v8.36.18 with rows (the first version
#: that has them is not pinned here)
@pytest.mark.needs_rqlite((8, 0, 0), "?associative (rows as objects)")
def test_associative_query_shape(urls: dict, table: str) -> None:
    url = urls["leader"]
    _create(url, table)
    execute(url, [[f"INSERT INTO {table}(id, name) VALUES(?, ?)", 7, "x"]])
    assoc = query(url, [f"SELECT id, name FROM {table}"], "?level=strong&associative")
    assert assoc["results"][0]["rows"] == [{"id": 7, "name": "x"}]
    assert assoc["results"][0]["types"] == {"id": "integer", "name": "text"}


def test_a_write_sent_to_query_is_refused(urls: dict, table: str) -> None:
    url = urls["leader"]
    _create(url, table)
    for level in ("weak", "strong"):
        res = query(url, [f"INSERT INTO {table}(name) VALUES('no')"], f"?level={level}")
        assert res["results"][0]["error"] == "attempt to change database via query operation"
    assert query(url, [f"SELECT COUNT(*) FROM {table}"])["results"][0]["values"] == [[0]]


@pytest.mark.parametrize("level", ["none", "weak", "strong", "linearizable"])
def test_read_levels(urls: dict, table: str, level: str) -> None:
    _create(urls["leader"], table)
    execute(urls["leader"], [[f"INSERT INTO {table}(name) VALUES(?)", level]])
    for url in urls["all"]:

        def seen(url: str = url) -> bool:
            res = query(url, [f"SELECT name FROM {table}"], f"?level={level}")
            return res["results"][0].get("values") == [[level]]

        # "none" reads are local: a follower may lag a moment behind the leader
        wait_until(seen, 5.0, f"a {level} read on {url} to see the row")


def test_redirect_gives_301_to_the_leader(urls: dict) -> None:
    r = call("POST", urls["followers"][0], "/db/execute?redirect", ["SELECT 1"])
    assert r.status == 301
    assert r.headers["Location"].startswith(urls["leader"] + "/db/execute")


@pytest.mark.parametrize(
    ("raw", "message"), [(b"not json", "invalid JSON body"), (b"[]", "no statements")]
)
def test_bad_bodies_get_400(urls: dict, raw: bytes, message: str, server_version) -> None:
    paths = ["/db/execute", "/db/query"]
    if server_version is None or server_version >= ONE_REQUEST_CLAIM:
        paths.append("/db/request")  # v6 has none
    for path in paths:
        r = call("POST", urls["leader"], path, raw=raw)
        assert r.status == 400, (path, r.status, r.text)
        assert r.text.strip() == message
        assert r.headers["Content-Type"].startswith("text/plain")


def test_timings(urls: dict, table: str) -> None:
    _create(urls["leader"], table)
    res = execute(urls["followers"][0], [f"INSERT INTO {table}(name) VALUES('t')"], "?timings")
    assert res["time"] > 0 and res["results"][0]["time"] > 0


@pytest.mark.needs_rqlite(ONE_REQUEST_CLAIM, "/db/request with RETURNING")
def test_request_returning_changes_and_reads_in_one_round_trip(urls: dict, table: str) -> None:
    url = urls["followers"][0]
    _create(url, table)
    execute(url, [f"INSERT INTO {table}(id, name) VALUES(1, 'a')"])
    r = call(
        "POST",
        url,
        "/db/request",
        [
            [f"UPDATE {table} SET name = ? WHERE id = 1 RETURNING id, name", "b"],
            [f"INSERT INTO {table}(id, name) VALUES(?, ?)", 2, "c"],
            [f"SELECT name FROM {table} ORDER BY id"],
        ],
    )
    assert r.status == 200, r.text
    ret, ins, sel = r.json["results"]
    assert ret["columns"] == ["id", "name"] and ret["values"] == [[1, "b"]]
    assert ins == {"last_insert_id": 2, "rows_affected": 1}
    assert sel["values"] == [["b"], ["c"]]
    ro = call("POST", urls["leader"], "/db/request?level=strong", [f"SELECT COUNT(*) FROM {table}"])
    assert ro.json["results"][0]["values"] == [[2]]


@pytest.mark.needs_rqlite(ONE_REQUEST_CLAIM, "/db/request")
def test_request_statement_that_does_not_prepare_fails_alone_even_in_a_transaction(
    urls: dict, table: str
) -> None:
    """rqlite's /db/request asks SQLite whether each statement only reads before running it;
    one that does not even prepare gets its error and the others still run and commit."""
    url = urls["leader"]
    _create(url, table)
    r = call(
        "POST",
        url,
        "/db/request?transaction",
        [
            [f"INSERT INTO {table}(id, name) VALUES(?, ?)", 1, "a"],
            [f"SELECT * FROM no_such_table_{table}"],
            [f"SELECT name FROM {table}"],
        ],
    )
    assert r.status == 200, r.text
    ins, bad, sel = r.json["results"]
    assert ins == {"last_insert_id": 1, "rows_affected": 1}
    assert "no such table" in bad["error"]
    assert sel["values"] == [["a"]]
    rows = query(url, [f"SELECT COUNT(*) FROM {table}"])["results"][0]["values"]
    assert rows == [[1]]


@pytest.mark.needs_rqlite(TIME_REWRITING, "rewriting random() and 'now' to literals")
def test_random_and_now_are_rewritten_so_replicas_agree(urls: dict, table: str) -> None:
    url = urls["followers"][0]
    execute(url, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, r INT, b BLOB, t REAL)"])
    before = time.time()
    execute(
        url,
        [
            f"INSERT INTO {table}(r, b, t) VALUES(random(), randomblob(8), "
            "(julianday('now') - 2440587.5) * 86400.0)"
        ],
    )
    after = time.time()
    lead_row = query(urls["leader"], [f"SELECT r, b, t FROM {table}"])["results"][0]["values"][0]
    assert before - 1.0 <= lead_row[2] <= after + 1.0
    for other in urls["all"]:

        def same(other: str = other) -> bool:
            res = query(other, [f"SELECT r, b, t FROM {table}"], "?level=none")
            return res["results"][0].get("values") == [lead_row]

        wait_until(same, 5.0, f"{other} to hold the same random values as the leader")


def test_freshness_on_a_healthy_follower_reads_locally(urls: dict, table: str) -> None:
    _create(urls["leader"], table)
    execute(urls["leader"], [f"INSERT INTO {table}(name) VALUES('f')"])
    url = urls["followers"][0]

    def fresh() -> bool:
        res = query(url, [f"SELECT name FROM {table}"], "?level=none&freshness=5s")
        return res["results"][0].get("values") == [["f"]]

    wait_until(fresh, 5.0, f"a fresh level=none read on {url}")
    bad = call("POST", url, "/db/query?level=none&freshness=soon", [f"SELECT 1 FROM {table}"])
    assert bad.status == 400


def test_unknown_paths_and_methods(urls: dict) -> None:
    url = urls["leader"]
    assert call("GET", url, "/no/such/endpoint").status == 404
    assert call("GET", url, "/db/execute").status == 405


def test_bodies_are_consumed_and_a_bad_content_length_is_400(urls: dict) -> None:
    parts = urlsplit(urls["leader"])
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:  # a GET with a body: the next request on the connection must still parse
        for _ in range(2):
            conn.request("GET", "/status", body=b'["SELECT 1"]')
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 200
    finally:
        conn.close()
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as s:
        s.sendall(b"POST /db/execute HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 400")
