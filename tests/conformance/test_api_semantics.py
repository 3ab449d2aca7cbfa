"""What a request commits, and what its answer looks like, when not everything in it goes
well: read in rqlite's source (``db/db.go``: ``executeWithConn``, ``RequestWithContext``,
``queryWithConn``; ``command/encoding/json.go``; ``http/service.go``; the same in v8.36.18,
v9.4.5 and v10.2.7) and run on the shared cluster of any engine. docs/embedded-node.md
("When a request is not all-or-nothing") tells a client what to make of it."""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

import pytest

from rqueue._version import ONE_REQUEST_CLAIM
from tests.cluster.helpers import wait_until

from ._http import call, execute, query, request

pytestmark = pytest.mark.needs_rqlite(ONE_REQUEST_CLAIM, "/db/request")


def _create(url: str, table: str) -> None:
    execute(url, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v)"])


def _ids(url: str, table: str) -> list[int]:
    rows = query(url, [f"SELECT id FROM {table} ORDER BY id"])["results"][0].get("values", [])
    return [r[0] for r in rows]


def _insert(table: str, i: int) -> list:
    return [f"INSERT INTO {table}(id, v) VALUES(?, ?)", i, f"v{i}"]


@pytest.mark.parametrize(
    "bad",
    ["INSERT INTO no_such_table_{t} VALUES (1)", "INSERT INTO {t} VALUES (1", "SELEKT 1"],
)
def test_request_in_a_transaction_commits_around_a_statement_that_does_not_prepare(
    urls: dict, table: str, bad: str
) -> None:
    """``/db/request?transaction``: a statement SQLite cannot prepare (no such table, a
    syntax error) gets an error entry and the transaction goes on and commits the rest."""
    url = urls["followers"][0]
    _create(url, table)
    res = request(url, [_insert(table, 1), bad.format(t=table), _insert(table, 2)], "?transaction")
    first, failed, third = res["results"]
    assert first == {"last_insert_id": 1, "rows_affected": 1}
    assert set(failed) == {"error"}
    assert third == {"last_insert_id": 2, "rows_affected": 1}
    assert _ids(urls["leader"], table) == [1, 2]


def test_request_in_a_transaction_rolls_back_at_a_statement_that_fails_running(
    urls: dict, table: str
) -> None:
    """A statement that prepares but fails when it runs (a constraint, an overflow) rolls
    the whole transaction back: nothing commits, the statements before it keep the
    answers they had (counts of writes undone), none after it is answered."""
    url = urls["followers"][0]
    _create(url, table)
    dup = [f"INSERT INTO {table}(id, v) VALUES(1, 'again')"]
    res = request(url, [_insert(table, 1), dup, _insert(table, 3)], "?transaction")["results"]
    assert res == [
        {"last_insert_id": 1, "rows_affected": 1},
        {"error": f"UNIQUE constraint failed: {table}.id"},
    ]
    assert _ids(urls["leader"], table) == []
    overflow = ["SELECT abs(-9223372036854775808)"]
    res = request(url, [_insert(table, 1), overflow, _insert(table, 3)], "?transaction")["results"]
    assert res == [{"last_insert_id": 1, "rows_affected": 1}, {"error": "integer overflow"}]
    assert _ids(urls["leader"], table) == []


def test_request_without_a_transaction_runs_every_statement(urls: dict, table: str) -> None:
    url = urls["leader"]
    _create(url, table)
    dup = [f"INSERT INTO {table}(id, v) VALUES(1, 'again')"]
    res = request(url, [_insert(table, 1), dup, _insert(table, 3)])["results"]
    assert res[0] == {"last_insert_id": 1, "rows_affected": 1}
    assert res[1] == {"error": f"UNIQUE constraint failed: {table}.id"}
    assert res[2] == {"last_insert_id": 3, "rows_affected": 1}
    assert _ids(url, table) == [1, 3]


@pytest.mark.parametrize("bad", ["INSERT INTO no_such_table_{t} VALUES (1)", "SELEKT 1"])
def test_execute_in_a_transaction_rolls_back_at_any_failure(
    urls: dict, table: str, bad: str
) -> None:
    """``/db/execute?transaction`` does not tell preparing from running: the first
    failure rolls back, and no result follows it."""
    url = urls["followers"][0]
    _create(url, table)
    res = execute(url, [_insert(table, 1), bad.format(t=table), _insert(table, 2)], "?transaction")
    first, failed = res["results"]
    assert first == {"last_insert_id": 1, "rows_affected": 1} and set(failed) == {"error"}
    assert _ids(urls["leader"], table) == []
    res = execute(url, [_insert(table, 1), bad.format(t=table), _insert(table, 2)])
    assert [set(r) for r in res["results"]] == [
        {"last_insert_id", "rows_affected"},
        {"error"},
        {"last_insert_id", "rows_affected"},
    ]
    assert _ids(urls["leader"], table) == [1, 2]


def test_associative_errors_of_reads_and_writes(urls: dict, table: str) -> None:
    """In associative form a failed read is ``{"rows": [], "error"}`` (``AssociativeRows``),
    a failed write or a statement that did not prepare ``{"error"}``, a write
    ``{..., "rows": null}``."""
    url = urls["leader"]
    _create(url, table)
    read = query(url, [f"SELECT * FROM no_such_{table}"], "?associative")["results"]
    assert read == [{"rows": [], "error": f"no such table: no_such_{table}"}]
    res = request(
        url,
        [
            _insert(table, 1),
            [f"INSERT INTO {table}(id, v) VALUES(1, 'again')"],
            ["SELECT abs(-9223372036854775808)"],
            [f"SELECT * FROM no_such_{table}"],
        ],
        "?associative",
    )["results"]
    assert res == [
        {"last_insert_id": 1, "rows_affected": 1, "rows": None},
        {"error": f"UNIQUE constraint failed: {table}.id"},
        {"rows": [], "error": "integer overflow"},
        {"error": f"no such table: no_such_{table}"},
    ]


def test_a_failed_statement_has_no_time(urls: dict, table: str) -> None:
    url = urls["leader"]
    _create(url, table)
    res = execute(url, [_insert(table, 1), f"INSERT INTO no_such_{table} VALUES (1)"], "?timings")
    ok, failed = res["results"]
    assert ok["time"] > 0 and set(failed) == {"error"}
    res = query(url, [f"SELECT id FROM {table}", f"SELECT * FROM no_such_{table}"], "?timings")
    assert res["results"][0]["time"] > 0 and set(res["results"][1]) == {"error"}


@pytest.mark.parametrize(
    ("sql", "near"),
    [
        ("DELETE FROM {t} WHERE id > 0 LIMIT 1", "LIMIT"),
        ("DELETE FROM {t} WHERE v < julianday('now') ORDER BY id LIMIT 1", "ORDER"),
        ("UPDATE {t} SET v = 1 LIMIT 1", "LIMIT"),
    ],
)
def test_delete_or_update_with_limit_is_a_syntax_error(
    urls: dict, table: str, sql: str, near: str
) -> None:
    """rqlite's SQLite is built with ``SQLITE_ENABLE_UPDATE_DELETE_LIMIT`` (its go-sqlite3
    fork's ``sqlite3.go``) from the stock amalgamation, whose parser was generated without
    it: SQLite refuses ``ORDER BY``/``LIMIT`` there (rqlite's own parser reads ``DELETE ...
    LIMIT``, so a time function in it is rewritten first)."""
    url = urls["leader"]
    _create(url, table)
    res = execute(url, [sql.format(t=table)])["results"]
    assert res == [{"error": f'near "{near}": syntax error'}]


def test_text_that_is_not_unicode_reaches_sqlite_as_u_fffd(urls: dict) -> None:
    """Go's JSON decoder turns bytes that are not UTF-8 inside a string into U+FFFD, one per
    byte, and so a ``\\u`` escape of a lone surrogate; Python's would keep them."""
    url = urls["leader"]
    for raw, expected in [
        (b'[["SELECT ?", "a\\ud800b"]]', "a\ufffdb"),
        (b'[["SELECT ?", "\\udc00\\ud83d\\ude00"]]', "\ufffd\U0001f600"),
        (b'[["SELECT ?", "x\xe2\x82y"]]', "x\ufffd\ufffdy"),
        (b"[\"SELECT '\xff'\"]", "\ufffd"),
    ]:
        r = call("POST", url, "/db/query", raw=raw)
        assert r.status == 200, (raw, r.text)
        assert r.json["results"][0]["values"] == [[expected]], raw


@pytest.mark.parametrize(
    ("qs", "message"),
    [
        ("q=SELECT%201;", "invalid semicolon separator in query"),
        ("level=weak;x", "invalid semicolon separator in query"),
        ("q=SELECT%zz", 'invalid URL escape "%zz"'),
        ("retries=two", "retries is not a valid integer"),
        ("trailing_logs=1.5", "trailing_logs is not a valid integer"),
        ("freshness_strict", "freshness_strict requires freshness"),
    ],
)
def test_query_strings_go_refuses(urls: dict, qs: str, message: str) -> None:
    """Go's ``url.ParseQuery`` and rqlite's ``NewQueryParams``: a 400 before anything (sent
    as written: an HTTP library would re-encode a bad escape)."""
    parts = urlsplit(urls["leader"])
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.request("GET", f"/db/query?{qs}")
        resp = conn.getresponse()
        answer = (resp.status, resp.read().decode().strip())
    finally:
        conn.close()
    assert answer == (400, message)


def test_remove_takes_exactly_an_id(urls: dict) -> None:
    for body in ({"id": "nobody", "other": "x"}, {}, {"id": 5}, ["nobody"]):
        assert call("DELETE", urls["leader"], "/remove", body).status == 400, body


def test_a_queued_write_answers_a_sequence_number_before_it_runs(urls: dict, table: str) -> None:
    """``/db/execute?queue``: ``{"results": [], "sequence_number": N}`` at once, numbers
    counting up on each node; the statements run later in a batch (``wait``: answered once
    written); ``no statements`` is refused only without ``wait``, and a body that is not
    JSON queues nothing, still answered with a number."""
    url = urls["followers"][0]
    _create(urls["leader"], table)
    first = call("POST", url, "/db/execute?queue", [_insert(table, 1)])
    second = call("POST", url, "/db/execute?queue", [_insert(table, 2)])
    assert first.status == second.status == 200, (first.text, second.text)
    assert set(first.json) == {"results", "sequence_number"} and first.json["results"] == []
    assert second.json["sequence_number"] > first.json["sequence_number"] > 0
    wait_until(lambda: _ids(urls["leader"], table) == [1, 2], 10.0, "the queued writes")
    waited = call("POST", url, "/db/execute?queue&wait", [_insert(table, 3)])
    assert waited.status == 200 and waited.json["sequence_number"] > 0
    assert _ids(urls["leader"], table) == [1, 2, 3]
    empty = call("POST", url, "/db/execute?queue", [])
    assert (empty.status, empty.text.strip()) == (400, "no statements")
    marker = call("POST", url, "/db/execute?queue&wait", [])
    assert marker.status == 200 and "sequence_number" in marker.json
    junk = call("POST", url, "/db/execute?queue", raw=b"not json")
    assert junk.status == 200 and "sequence_number" in junk.json


def test_a_none_read_on_a_follower_cut_from_its_leader_is_stale(make_cluster) -> None:
    """``level=none&freshness=D`` on a follower that has not heard from a leader for longer
    than ``D`` answers ``{"results": [], "error": "stale read"}`` (``IsStaleRead``); the
    leader never does."""
    c = make_cluster(nodes=3)
    lead = c.wait_for_leader(30.0)
    follower = next(n for n in c.nodes() if n.id != lead.id)
    path = "/db/query?level=none&freshness=200ms"
    assert call("POST", lead.url, path, ["SELECT 1"]).json["results"][0]["values"] == [[1]]
    c.pause(lead.id)
    try:

        def stale() -> bool:
            return call("POST", follower.url, path, ["SELECT 1"]).json == {
                "results": [],
                "error": "stale read",
            }

        wait_until(stale, 5.0, f"a none read on {follower.id} to be stale")
    finally:
        c.resume(lead.id)


def test_a_forward_the_leader_does_not_answer_is_a_200_error(make_cluster, server_version) -> None:
    """A follower that cannot get an answer from its leader (paused here) answers HTTP 200
    ``{"results": [], "error": ...}`` (rqlite's cluster client failed), v8 saying ``node
    failed to process Execute on remote node at ADDR: ...`` and naming the leader in
    ``X-RQLITE-SERVED-BY``, v9+ giving the error as it came, with no such header."""
    c = make_cluster(nodes=3)
    lead = c.wait_for_leader(30.0)
    follower = next(n for n in c.nodes() if n.id != lead.id)
    lead_raft = call("GET", lead.url, "/status").json["store"]["addr"]
    c.pause(lead.id)
    try:
        r = call("POST", follower.url, "/db/execute?timeout=1s", ["SELECT 1"], timeout=30.0)
    finally:
        c.resume(lead.id)
    assert r.status == 200 and r.json["results"] == [] and r.json["error"], r.text
    if server_version is not None and server_version < (9, 0, 0):
        prefix = f"node failed to process Execute on remote node at {lead_raft}: "
        assert r.json["error"].startswith(prefix), r.json
        assert r.headers["X-Rqlite-Served-By"] == lead_raft
    else:
        assert "X-Rqlite-Served-By" not in r.headers, r.headers
