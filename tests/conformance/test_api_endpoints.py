"""rqlite's endpoints beyond ``/db/execute|query|request`` as v8.36.18 answers them (issue 12,
section 3); the tests run unchanged on the embedded node and on ``rqlited``."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.cluster.helpers import wait_until

from ._http import call, execute, query, request

pytestmark = pytest.mark.needs_rqlite(
    (8, 36, 0), "the answers pinned here (measured on rqlite v8.36.18)"
)


def test_status_raft_numbers_are_integers_and_the_node_a_voter(urls: dict) -> None:
    for url in urls["all"]:
        raft = call("GET", url, "/status").json["store"]["raft"]
        for key in ("term", "commit_index", "applied_index", "num_peers"):
            assert type(raft[key]) is int, (url, key, raft[key])
        assert raft["num_peers"] == len(urls["all"]) - 1
        assert raft["voter"] is True


def test_nodes_version_2_lists_every_node_with_id_version_and_time(urls: dict) -> None:
    url = urls["followers"][0]
    listed = call("GET", url, "/nodes?ver=2").json["nodes"]
    assert [n["api_addr"] for n in listed if n["leader"]] == [urls["leader"]]
    assert {n["api_addr"] for n in listed} == set(urls["all"])
    assert [n["id"] for n in listed] == sorted(n["id"] for n in listed)
    version = call("GET", url, "/status").json["build"]["version"]
    for n in listed:
        assert n["version"] == version and n["voter"] is True and n["reachable"] is True
        assert isinstance(n["time"], float) and n["time"] >= 0 and n["time_s"]
    keyed = call("GET", url, "/nodes").json
    assert {k: v["id"] for k, v in keyed.items()} == {n["id"]: n["id"] for n in listed}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/db/execute"),
        ("GET", "/db/request"),
        ("PUT", "/db/query"),
        ("DELETE", "/db/query"),
        ("PATCH", "/db/execute"),
        ("PUT", "/status"),
        ("DELETE", "/nodes"),
        ("PUT", "/readyz"),
        ("POST", "/db/backup"),
        ("GET", "/db/load"),
        ("GET", "/remove"),
        ("POST", "/remove"),
    ],
)
def test_a_wrong_method_is_405(urls: dict, method: str, path: str) -> None:
    assert call(method, urls["leader"], path).status == 405


def test_answers_carry_rqlites_headers(urls: dict, server_version) -> None:
    """CORS headers on every answer (no credentials configured: ``Content-Type`` only); a
    follower's forwarded answer names the leader's Raft address. From v9 on (``proxy``) an
    answer a node gave itself names that node's HTTP address; v8 names only the leader of a
    forwarded one."""
    lead_raft = call("GET", urls["leader"], "/status").json["store"]["addr"]
    proxy = server_version is None or server_version >= (9, 0, 0)
    for method, path, body, served in [
        ("GET", "/status", None, False),
        ("POST", "/db/execute", ["SELECT 1"], proxy),
        ("POST", "/db/query", ["SELECT 1"], proxy),
        ("PUT", "/db/query", None, False),
    ]:
        direct = call(method, urls["leader"], path, body)
        assert direct.headers["Access-Control-Allow-Methods"] == "OPTIONS, GET, POST"
        assert direct.headers["Access-Control-Allow-Headers"] == "Content-Type"
        assert "Access-Control-Allow-Credentials" not in direct.headers
        own = urlsplit(urls["leader"]).netloc
        assert direct.headers.get("X-Rqlite-Served-By") == (own if served else None), path
    forwarded = call("POST", urls["followers"][0], "/db/execute", ["SELECT 1"])
    assert forwarded.headers["X-Rqlite-Served-By"] == lead_raft
    local = call("GET", urls["followers"][0], "/db/query?level=none&q=SELECT%201")
    own = urlsplit(urls["followers"][0]).netloc
    assert local.headers.get("X-Rqlite-Served-By") == (own if proxy else None)


def test_get_query_without_q_runs_nothing(urls: dict) -> None:
    r = call("GET", urls["followers"][0], "/db/query")
    assert (r.status, r.json) == (200, {"results": []})
    empty = call("GET", urls["followers"][0], "/db/query?q=")
    assert (empty.status, empty.text.strip()) == (400, "query parameter not set")
    bad = call("POST", urls["leader"], "/db/query?db_timeout=soon", ["SELECT 1"])
    assert (bad.status, bad.text.strip()) == (400, "db_timeout is not a valid duration")


SLOW_READ = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 50000000) "
    "SELECT count(*) FROM c"
)


def _slow_write(table: str) -> str:
    return (
        f"INSERT INTO {table} WITH RECURSIVE c(x) AS "
        "(SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 5000000) SELECT x FROM c"
    )


@pytest.mark.parametrize("level", ["none", "weak", "strong"])
def test_db_timeout_interrupts_a_long_read(urls: dict, level: str) -> None:
    """Statements not finished when the request's db_timeout passes get ``query timeout``."""
    url = urls["leader"]
    res = query(url, ["SELECT 1 AS one", SLOW_READ, "SELECT 2"], f"?level={level}&db_timeout=50ms")
    assert res["results"][0]["values"] == [[1]]
    assert res["results"][1:] == [{"error": "query timeout"}, {"error": "query timeout"}]
    quick = query(url, ["SELECT 1 AS one"], f"?level={level}&db_timeout=10s")
    assert quick["results"][0]["values"] == [[1]]


def test_db_timeout_interrupts_a_long_write(urls: dict, table: str) -> None:
    """A write running when db_timeout passes fails with ``execute timeout`` (and changes
    nothing); in a /db/request a read after it fails with ``query timeout``."""
    url = urls["followers"][0]
    execute(url, [f"CREATE TABLE {table} (x)"])
    res = execute(url, [_slow_write(table), f"INSERT INTO {table} VALUES(-1)"], "?db_timeout=50ms")
    assert res["results"] == [
        {"error": "execute timeout"},
        {"last_insert_id": 1, "rows_affected": 1},
    ]
    mixed = request(url, [_slow_write(table), "SELECT 1"], "?db_timeout=50ms")
    assert mixed["results"] == [{"error": "execute timeout"}, {"error": "query timeout"}]
    assert query(url, [f"SELECT count(*) FROM {table}"])["results"][0]["values"] == [[1]]


def test_backup_is_the_sqlite_file_or_a_sql_dump(urls: dict, table: str, tmp_path: Path) -> None:
    url = urls["followers"][0]  # the follower has the leader serve it
    execute(url, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, t TEXT, b BLOB, r REAL, n)"])
    execute(url, [[f"INSERT INTO {table} VALUES(?, ?, ?, ?, ?)", 1, "it's", [1, 2], 2.5, None]])
    r = call("GET", url, "/db/backup")
    assert r.status == 200 and r.headers["Content-Type"] == "application/octet-stream"
    assert r.content.startswith(b"SQLite format 3\x00")
    path = tmp_path / "backup.db"
    path.write_bytes(r.content)
    with sqlite3.connect(path) as db:
        assert db.execute(f"SELECT * FROM {table}").fetchall() == [
            (1, "it's", b"\x01\x02", 2.5, None)
        ]
    d = call("GET", url, "/db/backup?fmt=sql")
    assert d.status == 200 and d.headers["Content-Type"] == "application/sql"
    lines = d.text.splitlines()
    assert (
        lines[:2] == ["PRAGMA foreign_keys=OFF;", "BEGIN TRANSACTION;"] and lines[-1] == "COMMIT;"
    )
    create = lines.index(
        f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, t TEXT, b BLOB, r REAL, n);"
    )
    assert lines[create + 1] == f"INSERT INTO \"{table}\" VALUES(1,'it''s',X'0102',2.5,NULL);"


def test_remove_refuses_a_bad_body_and_ignores_an_unknown_node(urls: dict) -> None:
    for body in (b"", b"x", b"{}", b'{"id": 5}', b'["n1"]'):
        assert call("DELETE", urls["leader"], "/remove", raw=body).status == 400, body
    for url in (urls["leader"], urls["followers"][0]):
        assert call("DELETE", url, "/remove", raw=b'{"id": "no-such-node"}').status == 200


def _sqlite_file(path: Path) -> bytes:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE loaded (id INTEGER PRIMARY KEY, v TEXT)")
        db.execute("INSERT INTO loaded(v) VALUES ('from a file')")
    db.close()
    return path.read_bytes()


def test_load_replaces_the_database_or_runs_a_dump(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster()
    lead = cluster.wait_for_leader(30.0).url
    everyone = [n.url for n in cluster.nodes()]
    follower = next(u for u in everyone if u != lead)
    execute(lead, ["CREATE TABLE old (x)", "INSERT INTO old VALUES(1)"])
    r = call(
        "POST",
        follower,
        "/db/load",
        raw=_sqlite_file(tmp_path / "src.db"),
        content_type="application/octet-stream",
    )
    assert (r.status, r.json) == (200, {"results": []}), r.text
    assert r.headers["Content-Type"].startswith("text/plain")
    names = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    for url in everyone:

        def loaded(url: str = url) -> bool:
            res = query(url, [names, "SELECT v FROM loaded"], "?level=none")["results"]
            return res[0].get("values") == [["loaded"]] and res[1].get("values") == [
                ["from a file"]
            ]

        wait_until(loaded, 10.0, f"{url} to hold exactly the loaded database")
    dump = b"CREATE TABLE dumped (a INT);\nINSERT INTO dumped VALUES(5);\n"
    s = call("POST", lead, "/db/load", raw=dump, content_type="text/plain")
    assert (s.status, s.json) == (200, {"results": [{"last_insert_id": 1, "rows_affected": 1}]})
    assert query(lead, ["SELECT a FROM dumped"])["results"][0]["values"] == [[5]]
