"""Unit tests of the node's rqlite-conformance helpers (no cluster): time rendering,
statement splitting, argument binding, the SQL dump, Go durations, body parsing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import apsw
import pytest

from harness.node.admin import go_duration
from harness.node.body import parse
from harness.node.database import Database, render
from harness.node.dump import dump_sql
from harness.node.sqlexec import is_empty, split
from harness.node.statements import RequestError, Statement
from harness.node.values import UnrenderableValue, converter, go_float

TIME = converter("datetime")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2004-02-14 07:15:00.500000", "2004-02-14T07:15:00.5Z"),
        ("2004-02-14T07:15:00.123456789123+05:30", "2004-02-14T07:15:00.123456789+05:30"),
        ("2004-02-14 07:15:00-08:00", "2004-02-14T07:15:00-08:00"),
        ("2004-02-14 07:15:00+00:00", "2004-02-14T07:15:00Z"),
        ("2004-02-14T07:15", "2004-02-14T07:15:00Z"),
        ("2004-02-14Z", "2004-02-14T00:00:00Z"),
        ("2004-02-29", "2004-02-29T00:00:00Z"),
        ("2003-02-29", "0001-01-01T00:00:00Z"),
        ("2004-02-14 24:00:00", "0001-01-01T00:00:00Z"),
        ("2004-02-14 07:15:60", "0001-01-01T00:00:00Z"),
        ("2004-2-14", "0001-01-01T00:00:00Z"),
        ("2004-02-14 07:15ZZ", "0001-01-01T00:00:00Z"),
        (0, "1970-01-01T00:00:00Z"),
        (1700000000, "2023-11-14T22:13:20Z"),
        (-62135596801, "0000-12-31T23:59:59Z"),
        (1000000000001, "2001-09-09T01:46:40.001Z"),
        (-1000000000001, "1938-04-24T22:13:19.999Z"),
        (1.5, 1.5),
        (2.0, 2),
        (None, None),
        (b"\x01", b"\x01"),
    ],
)
def test_time_columns(value: object, expected: object) -> None:
    assert TIME(value) == expected


def test_a_time_outside_years_0_to_9999_cannot_be_rendered() -> None:
    with pytest.raises(UnrenderableValue, match="year outside of range"):
        TIME(253402300800)


def test_other_column_types() -> None:
    assert converter("boolean")(3) is True and converter("boolean")(0) is False
    assert converter("text")(b"a\xffb") == "a\ufffdb" and converter("")(b"x") == "x"
    assert converter("blob")(b"\x00") == b"\x00" and converter("integer")(7) == 7
    assert go_float(1e21) == 1e21 and go_float(0.5) == 0.5
    assert go_float(2.0**60) == 1152921504606847000  # Go's shortest digits, read back


def test_split_and_is_empty() -> None:
    assert split("SELECT 1") == ["SELECT 1"]
    assert split("SELECT ';'; SELECT 2") == ["SELECT ';';", " SELECT 2"]
    assert split("SELECT 1; ") == ["SELECT 1;"]
    assert split("SELECT 1; -- c") == ["SELECT 1;", " -- c"]
    trigger = "CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; SELECT 2; END; SELECT 3"
    assert split(trigger) == [trigger[: trigger.index("END;") + 4], " SELECT 3"]
    for sql in ("", " ;; ", "-- c", "/* c */ ;", "/* open"):
        assert is_empty(sql), sql
    assert not is_empty(" -- c\nSELECT 1")


def test_statements_run_as_rqlites_driver_runs_them() -> None:
    db = Database()
    db.execute([Statement("CREATE TABLE t (id INTEGER PRIMARY KEY, v)")], False, False)
    res = db.execute(
        [
            Statement("INSERT INTO t(v) VALUES(?); INSERT INTO t(v) VALUES(?)", [1, 2, 3]),
            Statement("INSERT INTO t(v) VALUES(:a)", [], {"b": 1}),
            Statement("INSERT INTO t(v) VALUES(?)", [], {"_x": 1}),
        ],
        False,
        False,
    )
    assert [render(r) for r in res] == [
        {"last_insert_id": 2, "rows_affected": 1},
        {"last_insert_id": 3, "rows_affected": 1},
        {"error": 'name "_x" does not begin with a letter'},
    ]
    (rows,) = db.query([Statement("SELECT v FROM t ORDER BY id")], False)
    assert rows["values"] == [[1], [2], [None]]


def test_dump_layout(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    with sqlite3.connect(path) as db:
        db.executescript(
            """
            CREATE TABLE "we""ird" (id INTEGER PRIMARY KEY AUTOINCREMENT, t TEXT, r REAL);
            INSERT INTO "we""ird"(t, r) VALUES ('a''b', 1.0), (NULL, 0.5);
            CREATE INDEX ix ON "we""ird"(t);
            CREATE VIEW v AS SELECT t FROM "we""ird";
            ANALYZE;
            """
        )
    db.close()
    text = dump_sql(path.read_bytes()).decode()
    assert text.splitlines() == [
        "PRAGMA foreign_keys=OFF;",
        "BEGIN TRANSACTION;",
        'DELETE FROM "sqlite_sequence";;',
        'INSERT INTO "sqlite_sequence" VALUES(\'we"ird\',2);',
        'ANALYZE "sqlite_master";;',
        "INSERT INTO \"sqlite_stat1\" VALUES('we\"ird','ix','2 1');",
        'CREATE TABLE "we""ird" (id INTEGER PRIMARY KEY AUTOINCREMENT, t TEXT, r REAL);',
        "INSERT INTO \"we\"\"ird\" VALUES(1,'a''b',1.0);",
        'INSERT INTO "we""ird" VALUES(2,NULL,0.5);',
        'CREATE INDEX ix ON "we""ird"(t);',
        'CREATE VIEW v AS SELECT t FROM "we""ird";',
        "COMMIT;",
    ]
    plain = tmp_path / "p.db"
    with sqlite3.connect(plain) as db:
        db.executescript("CREATE TABLE p (a, b BLOB); INSERT INTO p VALUES (1.5, x'00ff');")
    db.close()
    restored = apsw.Connection(":memory:")
    restored.execute(dump_sql(plain.read_bytes()).decode())
    assert restored.execute("SELECT a, b FROM p").fetchall() == [(1.5, b"\x00\xff")]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(2e-7, "200ns"), (1.111e-6, "1.111µs"), (0.0015, "1.5ms"), (2.0, "2s"), (0.25, "250ms")],
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_body_parsing() -> None:
    (s,) = parse(b'[["SELECT ?, ?, ?, :n", 9223372036854775808, [0, 255], true, {"n": 1.5}]]')
    assert s.positional == [9.223372036854776e18, b"\x00\xff", 1] and s.named == {"n": 1.5}
    assert parse(b"SELECT 1; SELECT 2", "text/plain; charset=utf-8", plain_ok=True)[0].sql == (
        "SELECT 1; SELECT 2"
    )
    for body, message in [
        (b"\xff", "invalid JSON body"),
        (b'[["x", -1e400]]', "invalid number -1e400"),
        (b'[["x", [1e400]]]', "unsupported type 1e400"),
        (b'[["x", ' + b"9" * 400 + b"]]", "invalid number " + "9" * 400),
    ]:
        with pytest.raises(RequestError) as err:
            parse(body)
        assert str(err.value) == message
