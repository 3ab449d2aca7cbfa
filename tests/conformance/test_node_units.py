"""Unit tests of the embedded node's pure parts: request parsing, the clock, the SQLite
state machine (rewriting: ``test_rewrite.py``). (No cluster needed.)"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from harness.node.body import parse as parse_body
from harness.node.clock import OffsetClock, OffsetClockError
from harness.node.config import parse_args
from harness.node.database import READ_ONLY_VIOLATION, Database, render
from harness.node.statements import QueryParams, RequestError, Statement, parse_duration

EPOCH = 1_700_000_000.0


def test_parse_body_forms() -> None:
    """The node's request body parser (its errors: ``test_api_units.py``)."""
    stmts = parse_body(json.dumps(["SELECT 1", "SELECT 2"]).encode())
    assert [s.sql for s in stmts] == ["SELECT 1", "SELECT 2"]
    (p,) = parse_body(json.dumps([["INSERT INTO t VALUES(?, ?, ?)", 1, 2.5, True]]).encode())
    assert p.positional == [1, 2.5, 1]
    (n,) = parse_body(json.dumps([["SELECT :a", {"a": "x"}]]).encode())
    assert n.named == {"a": "x"} and n.bindings() == {"a": "x"}
    for body, message in [(b"[]", "no statements"), (b"{", "invalid request")]:
        with pytest.raises(RequestError, match=message):
            parse_body(body)


def test_query_params() -> None:
    qp = QueryParams.parse("level=STRONG&timings&freshness=1.5s")
    assert qp.level == "strong" and qp.flag("timings") and qp.duration("freshness", 0) == 1.5
    assert QueryParams.parse("level=bogus").level == "weak"
    assert parse_duration("1m30s") == 90.0 and parse_duration("250ms") == 0.25
    for bad, message in [
        ("timeout=soon", "timeout is not a valid duration"),
        ("freshness_strict", "freshness_strict requires freshness"),
        ("q=", "query parameter not set"),
    ]:
        with pytest.raises(RequestError, match=message):
            QueryParams.parse(bad)


def test_clock_offset_file(tmp_path: Path) -> None:
    path = tmp_path / "offset"
    clock = OffsetClock(str(path))
    assert clock.offset == 0.0
    path.write_text("12.5\n")
    assert clock.offset == 12.5 and abs(clock.now() - time.time() - 12.5) < 1.0
    path.write_text("not a number")
    os.utime(path, ns=(1, 1))
    assert clock.offset == 12.5  # a bad rewrite keeps the last good offset
    path.unlink()
    assert clock.offset == 0.0
    path.write_text("soon")
    with pytest.raises(OffsetClockError, match="must hold a number of seconds"):
        OffsetClock(str(path))


def test_clock_offset_file_replaced_within_one_file_clock_tick(tmp_path: Path) -> None:
    path = tmp_path / "offset"
    path.write_text("0.2\n")
    clock = OffsetClock(str(path))
    assert clock.offset == 0.2
    st = path.stat()
    tmp = tmp_path / "offset.tmp"
    tmp.write_text("0.0\n")  # same size, and (as within one tick) the same mtime
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)
    assert clock.offset == 0.0


def test_config_validation(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = parse_args(
        [
            "--node-id",
            "n1",
            "--http-addr",
            "127.0.0.1:1",
            "--raft-addr",
            "127.0.0.1:2",
            "--peer",
            "n2,127.0.0.1:3,127.0.0.1:4",
            "--data-dir",
            "d",
        ]
    )
    assert [m.node_id for m in cfg.members] == ["n1", "n2"]
    assert cfg.by_raft_addr("127.0.0.1:3").http_addr == "127.0.0.1:4"
    with pytest.raises(SystemExit):
        parse_args(
            [
                "--node-id",
                "n1",
                "--http-addr",
                "nohost",
                "--raft-addr",
                "127.0.0.1:2",
                "--data-dir",
                "d",
            ]
        )
    assert "--http-addr must be HOST:PORT" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(
            [
                "--node-id",
                "n1",
                "--http-addr",
                "127.0.0.1:1",
                "--raft-addr",
                "127.0.0.1:2",
                "--peer",
                "n2,127.0.0.1:3",
                "--data-dir",
                "d",
            ]
        )
    assert "--peer must be ID,RAFT_ADDR,HTTP_ADDR" in capsys.readouterr().err
    base = ["--node-id", "n1", "--http-addr", "127.0.0.1:1", "--raft-addr", "127.0.0.1:2"]
    for bad in ("nan", "inf", "0", "-1"):
        with pytest.raises(SystemExit):
            parse_args([*base, "--data-dir", "d", "--apply-timeout", bad])
        assert "--apply-timeout must be a positive number of seconds" in capsys.readouterr().err


def test_database_shapes_and_snapshot() -> None:
    db = Database()
    res = db.execute(
        [
            Statement("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB)"),
            Statement("INSERT INTO t(b) VALUES(?)", ["x"]),
            Statement("INSERT INTO nope VALUES(1)"),
        ],
        tx=False,
        timings=False,
    )
    assert [render(r) for r in res] == [
        {},
        {"last_insert_id": 1, "rows_affected": 1},
        {"error": "no such table: nope"},
    ]
    db.execute([Statement("UPDATE t SET b = x'0102'")], tx=False, timings=False)
    (rows,) = db.query([Statement("SELECT b FROM t")], False)
    # BLOBs stay bytes until JSON encoding (base64, or arrays with ?blob_array)
    assert render(rows) == {"columns": ["b"], "types": ["blob"], "values": [[b"\x01\x02"]]}
    (bad,) = db.query([Statement("DELETE FROM t")], False)
    assert render(bad) == {"error": READ_ONLY_VIOLATION}
    other = Database()
    other.restore(db.serialize())
    assert render(other.query([Statement("SELECT COUNT(*) FROM t")], False)[0])["values"] == [[1]]


def test_foreign_keys_are_enforced_only_with_fk_and_after_a_restore() -> None:
    """rqlited's ``-fk`` opens every connection with foreign keys on (``_fk``); without it
    SQLite's default leaves them unenforced. The embedded node's ``--fk`` and rqlited's
    ``-fk`` reach the database."""
    schema = [
        Statement("CREATE TABLE p (id INTEGER PRIMARY KEY)"),
        Statement("CREATE TABLE c (p INTEGER REFERENCES p(id))"),
    ]
    orphan = [Statement("INSERT INTO c VALUES (7)")]
    loose = Database()
    loose.execute(schema, tx=False, timings=False)
    assert render(loose.execute(orphan, tx=False, timings=False)[0]) == {
        "last_insert_id": 1, "rows_affected": 1,
    }  # fmt: skip
    strict = Database(foreign_keys=True)
    strict.execute(schema, tx=False, timings=False)
    assert render(strict.execute(orphan, tx=False, timings=False)[0]) == {
        "error": "FOREIGN KEY constraint failed"
    }
    strict.restore(loose.serialize())
    assert "error" in render(strict.execute(orphan, tx=False, timings=False)[0])
    base = ["--node-id", "n1", "--http-addr", "127.0.0.1:1", "--raft-addr", "127.0.0.1:2"]
    assert parse_args([*base, "--data-dir", "d", "--fk"]).foreign_keys
    assert not parse_args([*base, "--data-dir", "d"]).foreign_keys


def test_sqlite_clock_is_the_node_clock() -> None:
    db = Database(now=lambda: EPOCH)
    (res,) = db.query([Statement("SELECT unixepoch('now'), CURRENT_TIMESTAMP")], False)
    assert res["values"] == [[int(EPOCH), "2023-11-14 22:13:20"]]
    db.restore(b"")
    (res,) = db.query([Statement("SELECT unixepoch()")], False)
    assert res["values"] == [[int(EPOCH)]]
