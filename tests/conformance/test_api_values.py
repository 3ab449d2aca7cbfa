"""Values and request bodies as rqlite v8.36.18 answers them (issue 12, section 2).

Every expectation here was first read off a real v8.36.18 node; the tests run unchanged on
the embedded node and on ``RQUEUE_TEST_ENGINE=rqlited``. Never send a statement that is
only ``;`` or a comment to ``/db/query`` on real rqlite: its driver loops on it and the
node eats memory until the kernel kills it.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest

from ._http import call, execute, query, request

pytestmark = pytest.mark.needs_rqlite(
    (8, 36, 0), "the answers pinned here (measured on rqlite v8.36.18)"
)

DATES = "2004-02-14 07:15:00.500000"


def test_date_columns_are_rfc3339(urls: dict, table: str) -> None:
    """DATE/DATETIME/TIMESTAMP: integers are Unix seconds (milliseconds above 1e12), text
    is parsed (unparsable: the zero time), REAL and NULL pass; TEXT columns are untouched."""
    f = urls["followers"][0]
    execute(
        f,
        [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, a DATE, b DATETIME, c TIMESTAMP, e TEXT)"],
    )
    ins = f"INSERT INTO {table}(id, a, b, c, e) VALUES(?, ?, ?, ?, ?)"
    execute(
        f,
        [
            [ins, 1, DATES, 1700000000, "2004-02-14T07:15:00.123456789+02:00", DATES],
            [ins, 2, "garbage", 1000000000001, "2004-02-14 07:15:00,5", "x"],
            [ins, 3, "2004-02-30", -5, "2004-02-14 07:15:00.5+00:00", "x"],
            [ins, 4, 1700000000.5, None, "2004-02-14 07:15", "x"],
            [ins, 5, "2004-02-14", "2004-02-14T07:15:00Z", "07:15:00", "x"],
        ],
    )
    expected = [
        [
            1,
            "2004-02-14T07:15:00.5Z",
            "2023-11-14T22:13:20Z",
            "2004-02-14T07:15:00.123456789+02:00",
            DATES,
        ],
        [2, "0001-01-01T00:00:00Z", "2001-09-09T01:46:40.001Z", "2004-02-14T07:15:00.5Z", "x"],
        [3, "0001-01-01T00:00:00Z", "1969-12-31T23:59:55Z", "2004-02-14T07:15:00.5Z", "x"],
        [4, 1700000000.5, None, "2004-02-14T07:15:00Z", "x"],
        [5, "2004-02-14T00:00:00Z", "2004-02-14T07:15:00Z", "0001-01-01T00:00:00Z", "x"],
    ]
    sel = f"SELECT id, a, b, c, e FROM {table} ORDER BY id"
    out = query(urls["leader"], [sel])["results"][0]
    assert out["types"] == ["integer", "date", "datetime", "timestamp", "text"]
    assert out["values"] == expected
    assert request(f, [sel], "?level=strong")["results"][0]["values"] == expected
    assoc = query(
        urls["leader"], [f"SELECT b FROM {table} WHERE id = 1"], "?level=strong&associative"
    )
    assert assoc["results"][0]["rows"] == [{"b": "2023-11-14T22:13:20Z"}]


def test_associative_rows_list_their_keys_in_order(urls: dict) -> None:
    """Go writes a map's keys sorted: clients that compare text see the same bytes."""
    r = call("POST", urls["leader"], "/db/query?associative", ["SELECT 2 AS b, 1 AS a, 3 AS c"])
    assert '"types":{"a":"integer","b":"integer","c":"integer"}' in r.text
    assert '"rows":[{"a":1,"b":2,"c":3}]' in r.text


def test_a_year_outside_0_to_9999_fails_the_statement(urls: dict, table: str) -> None:
    url = urls["leader"]
    execute(
        url,
        [f"CREATE TABLE {table} (t DATETIME)", [f"INSERT INTO {table} VALUES(?)", 253402300800]],
    )
    res = query(url, [f"SELECT t FROM {table}", "SELECT 1 AS one"])["results"]
    assert res[0] == {"error": "Time.MarshalText: year outside of range [0,9999]"}
    assert res[1]["values"] == [[1]]


def test_boolean_columns_give_json_booleans(urls: dict, table: str) -> None:
    url = urls["leader"]
    execute(url, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, b BOOLEAN)"])
    for i, v in enumerate([1, 0, -1, 2, "true", 1.5]):
        execute(url, [[f"INSERT INTO {table}(id, b) VALUES(?, ?)", i, v]])
    out = query(url, [f"SELECT b FROM {table} ORDER BY id"])["results"][0]
    assert out["types"] == ["boolean"]
    assert out["values"] == [[True], [False], [False], [True], ["true"], [1.5]]


def test_byte_arrays_bind_as_blobs_and_blob_array_reads_them_back(urls: dict, table: str) -> None:
    f = urls["followers"][0]  # forwarded: the follower must pass the bytes on as bytes
    execute(f, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, g BLOB, e TEXT)"])
    execute(f, [[f"INSERT INTO {table}(id, g, e) VALUES(?, ?, ?)", 1, [1, 2, 255], [104, 105]]])
    execute(f, [[f"INSERT INTO {table}(id, g) VALUES(?, ?)", 2, []]])
    sel = [f"SELECT g, e, typeof(g), typeof(e) FROM {table} ORDER BY id"]
    assert query(f, sel)["results"][0]["values"] == [
        ["AQL/", "hi", "blob", "blob"],
        ["", None, "blob", "null"],
    ]
    arrays = query(f, sel, "?level=strong&blob_array")["results"][0]["values"]
    assert arrays == [[[1, 2, 255], "hi", "blob", "blob"], [[], None, "blob", "null"]]


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("[1, 256]", "unsupported type 256"),
        ("[-1]", "unsupported type -1"),
        ("[1.0]", "unsupported type 1.0"),
        ("[1e2]", "unsupported type 1e2"),
        ('[1, "a"]', "unsupported type string"),
        ("[true]", "unsupported type bool"),
        ("[null]", "unsupported type <nil>"),
        ("[[1]]", "unsupported type []interface {}"),
        ("[{}]", "unsupported type map[string]interface {}"),
        ('{"a": {"b": 1}}', "unsupported type map[string]interface {}"),
        ("1e400", "invalid number 1e400"),
        ("NaN", "invalid JSON body"),
        ("Infinity", "invalid JSON body"),
    ],
)
def test_unusable_arguments_are_400(urls: dict, arg: str, message: str) -> None:
    body = f'[["SELECT ?", {arg}]]'.encode()
    r = call("POST", urls["leader"], "/db/execute", raw=body)
    assert (r.status, r.text.strip()) == (400, message)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "invalid JSON body"),
        (b"  ", "invalid JSON body"),
        (b'["SELECT 1",]', "invalid JSON body"),
        (b'["SELECT 1"', "invalid JSON body"),
        (b"{}", "invalid request"),
        (b'"SELECT 1"', "invalid request"),
        (b"1", "invalid request"),
        (b"[1]", "invalid request"),
        (b"[null]", "invalid request"),
        (b"[{}]", "invalid request"),
        (b"[[]]", "invalid request"),
        (b"[[1]]", "invalid request"),
        (b"[]", "no statements"),
        # read element by element: a mistyped element before the broken spot counts first
        (b'["SELECT 1", 1, garbage', "invalid request"),
        (b'["SELECT 1", {', "invalid request"),
        (b'[["SELECT ?", [1.5]], garbage', "unsupported type 1.5"),
    ],
)
def test_bodies_rqlite_refuses(urls: dict, raw: bytes, message: str) -> None:
    for path in ("/db/execute", "/db/query", "/db/request"):
        r = call("POST", urls["leader"], path, raw=raw)
        assert (r.status, r.text.strip()) == (400, message), path
        assert r.headers["Content-Type"].startswith("text/plain")


def test_a_body_may_mix_plain_and_parameterized_statements(urls: dict) -> None:
    r = call(
        "POST", urls["followers"][0], "/db/query", raw=b'[["SELECT ? AS a", 1], "SELECT 2 AS b"] x'
    )
    assert r.status == 200, r.text
    assert [res["values"] for res in r.json["results"]] == [[[1]], [[2]]]


def test_one_string_with_several_statements(urls: dict, table: str, server_version) -> None:
    """Reads answer the last statement's rows; arguments are consumed statement by
    statement; writes run every statement and answer the last one's counts. A write after
    the first statement of a read fails on rqlite's read-only connection; v10 (``db/db.go``,
    ``queryWithConn``) words that error as it words a write sent as a read."""
    url = urls["leader"]
    refused = (
        "attempt to change database via query operation"
        if server_version is None or server_version >= (10, 0, 0)
        else "attempt to write a readonly database"
    )
    execute(url, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v)"])
    res = query(url, ["SELECT 1 AS a; SELECT 2 AS b, 3 AS c;"])["results"]
    assert res == [{"columns": ["b", "c"], "types": ["integer", "integer"], "values": [[2, 3]]}]
    assert query(url, [["SELECT ? AS a; SELECT ? AS b", 1, 2]])["results"][0]["values"] == [[2]]
    short = query(url, [["SELECT ?; SELECT ?, ?", 1, 2], ["SELECT :a; SELECT :a", {"a": 5}]])
    assert short["results"] == [
        {"error": "not enough args to execute query: want 2 got 1"},
        {"error": "not enough args to execute query: want 1 got 0"},
    ]
    both = execute(
        url, [[f"INSERT INTO {table}(v) VALUES(?); INSERT INTO {table}(v) VALUES(?)", 41, 42]]
    )
    assert both["results"] == [{"last_insert_id": 2, "rows_affected": 1}]
    few = execute(url, [[f"INSERT INTO {table}(v) VALUES(?)"]])["results"]
    assert few == [{"error": "not enough args to execute query: want 1 got 0"}]
    assert query(url, [f"SELECT v FROM {table} ORDER BY id"])["results"][0]["values"] == [
        [41],
        [42],
    ]
    later = query(url, [f"SELECT 1; SELECT * FROM no_such_{table}"])["results"][0]["error"]
    assert later == f"no such table: no_such_{table}"
    first = query(url, [f"INSERT INTO {table}(v) VALUES(3); SELECT 1"])["results"][0]
    assert first == {"error": "attempt to change database via query operation"}
    second = query(url, [f"SELECT 1; INSERT INTO {table}(v) VALUES(3)"])["results"][0]
    assert second == {"error": refused}
    # /db/request decides read or write by the first statement
    read = request(url, [f"SELECT 2 AS b; INSERT INTO {table}(v) VALUES(4)"])["results"]
    assert read == [{"error": refused}]
    write = request(url, [f"INSERT INTO {table}(v) VALUES(5); SELECT 2 AS b"])["results"]
    assert write == [{"last_insert_id": 3, "rows_affected": 1}]
    assert query(url, [f"SELECT v FROM {table} ORDER BY id"])["results"][0]["values"] == [
        [41],
        [42],
        [5],
    ]


def test_empty_and_comment_only_statements(urls: dict, table: str) -> None:
    url = urls["leader"]
    execute(url, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v)"])
    for path in ("/db/execute", "/db/query", "/db/request"):
        r = call("POST", url, path, [""])
        assert (r.status, r.json) == (200, {"results": []}), path
        timed = call("POST", url, f"{path}?timings", [""]).json
        assert timed["results"] == [] and timed["time"] >= 0, path
    for sql in (";", "-- only a comment", "/* c */", "   "):
        assert execute(url, [sql])["results"] == [{}], sql
    ins = f"INSERT INTO {table}(v) VALUES(1)"
    assert execute(url, [ins, ""])["results"] == [{"last_insert_id": 1, "rows_affected": 1}]
    assert execute(url, [ins, ";"])["results"] == [{"last_insert_id": 2, "rows_affected": 1}, {}]
    assert execute(url, [f"{ins}; -- trailing comment"])["results"] == [{}]
    assert execute(url, [f"{ins}; "])["results"] == [{"last_insert_id": 4, "rows_affected": 1}]


def test_parameter_edge_cases(urls: dict, table: str) -> None:
    url = urls["followers"][0]
    execute(url, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v)"])
    ins = f"INSERT INTO {table}(v) VALUES"

    def ret(*stmt: object) -> dict:
        return request(url, [list(stmt)])["results"][0]

    assert ret(f"{ins}(:v) RETURNING v", {"w": 1})["values"] == [[None]]  # missing: NULL
    assert ret(f"{ins}(?) RETURNING v", 1, 2)["values"] == [[1]]  # extra: ignored
    assert ret(f"{ins}(?) RETURNING v, ?", 1) == {
        "error": "not enough args to execute query: want 2 got 1"
    }
    assert ret(f"{ins}(?) RETURNING v, :x", 1, {"x": 2})["values"] == [[1, 2]]
    assert ret(f"{ins}(:v) RETURNING v", {":v": 5}) == {
        "error": 'name ":v" does not begin with a letter'
    }
    assert ret(f"{ins}(:v) RETURNING v", {"": 5})["values"] == [[5]]  # no name: positional
    assert ret(f"{ins}($v) RETURNING v", {"v": 6})["values"] == [[6]]
    assert ret(f"{ins}(:v) RETURNING v", 7)["values"] == [[7]]  # positional binds by index
    big = ret(f"{ins}(?) RETURNING v, typeof(v)", 9223372036854775807)
    assert (big["types"], big["values"]) == (
        ["integer", "text"],
        [[9223372036854775807, "integer"]],
    )
    above = ret(f"{ins}(?) RETURNING v, typeof(v)", 9223372036854775808)
    # a REAL: Go writes it with its shortest digits and no fraction
    assert above["types"] == ["real", "text"]
    assert above["values"] == [[9223372036854776000, "real"]]
    assert ret(f"{ins}(?) RETURNING typeof(v)", 1.0)["values"] == [["real"]]
    assert ret(f"{ins}(?) RETURNING typeof(v)", True)["values"] == [["integer"]]
    # arguments are numbered in request order, named ones included
    assert ret("SELECT :a, :a, ?", {"a": 1}, 2)["values"] == [[1, 1, 2]]
    assert ret("SELECT ?, :a, ?", 1, {"a": 2}, 3)["values"] == [[1, 2, 3]]
    assert ret("SELECT @a, $a", {"a": 1}) == {
        "error": "not enough args to execute query: want 2 got 1"
    }
    assert ret("SELECT :a, :b", {"a": 1, "c": 3})["values"] == [[1, None]]


def test_whole_reals_are_written_without_a_fraction(urls: dict) -> None:
    out = query(urls["leader"], ["SELECT 1.0 AS x, 2.5 AS y, 1e300 AS z"])["results"][0]
    assert out["types"] == ["real", "real", "real"]
    assert out["values"] == [[1, 2.5, 1e300]] and type(out["values"][0][0]) is int


def test_an_infinite_value_is_500(urls: dict) -> None:
    for sql, sign in (("SELECT 1e308*10", "+Inf"), ("SELECT -1e308*10 AS x", "-Inf")):
        for path in ("/db/query", "/db/request"):
            r = call("POST", urls["leader"], path, [sql, "SELECT 1"])
            assert r.status == 500, (path, r.text)
            assert r.text.strip().endswith(f"json: unsupported value: {sign}")
            assert r.headers["Content-Type"].startswith("text/plain")


def test_text_that_is_not_utf8_reads_with_replacement_characters(urls: dict, table: str) -> None:
    """(Read on the leader: a real follower fails to forward such a read to its leader.)"""
    url = urls["leader"]
    execute(
        url,
        [
            f"CREATE TABLE {table} (t TEXT, b BLOB)",
            f"INSERT INTO {table} VALUES(CAST(X'61ff62' AS TEXT), X'61ff62')",
        ],
    )
    out = query(
        url, [f"SELECT t, b, CAST(X'ff' AS TEXT) AS u, typeof(t) FROM {table}"], "?level=weak"
    )
    assert out["results"][0]["values"] == [["a\ufffdb", "Yf9i", "\ufffd", "text"]]


def test_text_plain_bodies_are_one_sql_string(urls: dict, table: str) -> None:
    url = urls["leader"]
    r = call(
        "POST", url, "/db/query", raw=b"SELECT 1 AS a; SELECT 2 AS b", content_type="text/plain"
    )
    assert r.status == 200 and r.json["results"][0]["values"] == [[2]]
    execute(url, [f"CREATE TABLE {table} (v)"])
    w = call(
        "POST",
        url,
        "/db/execute",
        raw=f"INSERT INTO {table} VALUES(7)".encode(),
        content_type="text/plain",
    )
    assert w.status == 200 and w.json["results"] == [{"last_insert_id": 1, "rows_affected": 1}]
    empty = call("POST", url, "/db/execute", raw=b"", content_type="text/plain")
    assert (empty.status, empty.json) == (200, {"results": []})
    req = call("POST", url, "/db/request", raw=b"SELECT 3", content_type="text/plain")
    assert (req.status, req.text.strip()) == (400, "invalid JSON body")


def _read_responses(sock: socket.socket, count: int) -> list[bytes]:
    """``count`` HTTP responses (each with a Content-Length) read off ``sock``."""
    data = b""
    out: list[bytes] = []
    while len(out) < count:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            if len(rest) >= length:
                out.append(head + sep + rest[:length])
                data = rest[length:]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {len(out)} of {count} responses"
        data += chunk
    return out


def test_a_chunked_body_is_read_whole_and_a_pipelined_request_after_it_survives(urls: dict) -> None:
    parts = urlsplit(urls["leader"])
    body = b'["SELECT 1 AS a"]'
    chunked = (
        b"POST /db/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        + b"5\r\n"
        + body[:5]
        + b"\r\n"
        + f"{len(body) - 5:x}\r\n".encode()
        + body[5:]
        + b"\r\n0\r\n\r\n"
    )
    pipelined = b"GET /db/query?q=SELECT%202%20AS%20b HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as s:
        s.sendall(chunked + pipelined)
        first, second = _read_responses(s, 2)
    assert first.startswith(b"HTTP/1.1 200") and first.endswith(b'"values":[[1]]}]}')
    assert second.startswith(b"HTTP/1.1 200") and second.endswith(b'"values":[[2]]}]}')
