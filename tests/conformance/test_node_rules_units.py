"""Unit tests of the node's version rules (``harness.node.rules``), its write queue, its
query-string and body decoding: the decisions behind ``test_api_versions.py`` and
``test_api_semantics.py``, each against the rqlite source it follows. (No cluster.)"""

from __future__ import annotations

import threading

import pytest

from harness.node import versions
from harness.node.body import parse as parse_body
from harness.node.rules import (
    LEADER,
    LINEARIZABLE,
    LOCAL,
    LOG,
    NONE,
    breaking_pragma,
    is_stale_read,
    marks_explain,
    read_path,
    rewrite_flags,
)
from harness.node.statements import RequestError, Statement, go_parse_query
from harness.node.write_queue import WriteQueue

V8, V9, V10 = (versions.get(v) for v in ("8.36.18", "9.4.5", "10.2.7"))


@pytest.mark.parametrize(
    ("endpoint", "level", "flags", "v8", "v10"),
    [
        # (random, time) per http/service.go's sql.Process(stmts, rwrand, rwtime) calls
        ("execute", "", {}, (True, True), (True, True)),
        ("execute", "", {"norwrandom": ""}, (False, True), (False, True)),
        ("execute", "", {"noparse": ""}, None, None),
        ("queue", "", {"noparse": "", "norwtime": ""}, (True, False), (True, False)),
        ("request", "weak", {}, (False, True), (True, True)),
        ("request", "weak", {"norwrandom": ""}, (True, True), (False, True)),
        ("request", "none", {"norwtime": ""}, (False, False), (True, False)),
        ("query", "strong", {}, (False, True), (True, True)),
        ("query", "strong", {"norwrandom": ""}, (True, True), (False, True)),
        ("query", "weak", {}, None, None),
        ("query", "strong", {"noparse": ""}, None, None),
    ],
)
def test_rewrite_flags_by_version(endpoint, level, flags, v8, v10) -> None:
    assert rewrite_flags(V8.api, endpoint, level, flags) == v8
    assert rewrite_flags(V9.api, endpoint, level, flags) == v8  # v9 keeps v8's inversion
    assert rewrite_flags(V10.api, endpoint, level, flags) == v10


def test_read_paths_by_version() -> None:
    for api in (V8.api, V9.api, V10.api):
        assert read_path(api, "query", "none") == read_path(api, "request", "none") == NONE
        assert read_path(api, "query", "auto") == read_path(api, "query", "weak") == LEADER
        assert read_path(api, "request", "auto") == LOCAL
        assert read_path(api, "request", "strong") == LOG
        assert read_path(api, "query", "linearizable") == LINEARIZABLE
    assert read_path(V8.api, "request", "linearizable") == LOCAL
    assert read_path(V9.api, "request", "linearizable") == LINEARIZABLE


@pytest.mark.parametrize(
    ("sql", "v8", "v10"),
    [
        ("PRAGMA journal_mode=WAL", True, True),
        (" \t\npragma main.JOURNAL_MODE = delete", True, True),
        ("PRAGMA journal_mode", False, False),
        ("PRAGMA wal_checkpoint(TRUNCATE)", True, True),
        ("PRAGMA main.wal_autocheckpoint=0", False, False),  # no schema in rqlite's pattern
        ("PRAGMA synchronous=OFF", True, True),
        ("PRAGMA query_only=1", False, True),
        ("\vPRAGMA synchronous=0", False, False),  # Go's \\s has no vertical tab
        ("SELECT 1; PRAGMA synchronous=0", False, False),  # matched at the start only
    ],
)
def test_breaking_pragmas(sql: str, v8: bool, v10: bool) -> None:
    assert breaking_pragma(V8.api, [sql]) is v8
    assert breaking_pragma(V10.api, ["SELECT 1", sql]) is v10


def test_explain_is_marked_from_v9_on() -> None:
    sql = "EXPLAIN QUERY PLAN INSERT INTO t VALUES (1)"
    assert not marks_explain(sql, V8)
    assert marks_explain(sql, V9) and marks_explain(sql, V10)
    assert not marks_explain("EXPLAIN\tINSERT INTO t VALUES (1)", V10)  # "explain " only
    assert not marks_explain("SELECT 'explain ' FROM t", V10)


@pytest.mark.parametrize(
    ("kw", "stale"),
    [
        ({"freshness": 0.0, "since_contact": 99.0}, False),  # no freshness: never stale
        ({"leader": True, "since_contact": 99.0}, False),
        ({"since_contact": 1.5}, True),
        ({"freshness": -1.0}, True),  # Go: time.Since(...) > a negative duration
        ({"strict": True}, False),  # caught up
        ({"strict": True, "applied_index": 9}, True),  # behind, last apply 2 s after append
        ({"strict": False, "applied_index": 9}, False),
        ({"strict": True, "applied_index": 9, "fsm_update_time": 100.5}, False),
        ({"strict": True, "applied_index": 9, "appended_at": None}, False),
    ],
)
def test_is_stale_read(kw: dict, stale: bool) -> None:
    args = {
        "leader": False,
        "since_contact": 0.1,
        "freshness": 1.0,
        "strict": False,
        "applied_index": 10,
        "commit_index": 10,
        "fsm_update_time": 102.0,
        "appended_at": 100.0,
        **kw,
    }
    assert is_stale_read(**args) is stale


def test_go_query_strings() -> None:
    assert go_parse_query("a=1&a=2&b=%41+c&&d") == {"a": "1", "b": "A c", "d": ""}
    for qs, message in [
        ("a=1;b=2", "invalid semicolon separator in query"),
        ("a=%zz&b=%", 'invalid URL escape "%zz"'),
        ("a=%4", 'invalid URL escape "%4"'),
    ]:
        with pytest.raises(RequestError, match=message):
            go_parse_query(qs)


def test_bodies_decode_text_as_go_does() -> None:
    (s,) = parse_body(b'[["SELECT ?", "\\ud800\\ud83d\\ude00\\udc00", {"k\\udfff": 1}]]')
    assert s.positional[0] == "\ufffd\U0001f600\ufffd" and s.named == {"k\ufffd": 1}
    (s,) = parse_body(b"[\"SELECT '\xf0\x9f\x98'\"]")  # a truncated 4-byte sequence
    assert s.sql == "SELECT '\ufffd\ufffd\ufffd'"
    (s,) = parse_body(b'[["SELECT ?", 1e400]]'.replace(b"1e400", b"12345678901234567890"))
    assert s.positional == [1.2345678901234567e19]  # beyond int64: a REAL, as before
    with pytest.raises(RequestError, match="invalid JSON body"):
        parse_body(b'\xff["SELECT 1"]')


class _Recorder:
    def __init__(self, failures: int = 0) -> None:
        self.batches: list[list[str]] = []
        self.failures = failures
        self.counted: dict[str, int] = {}
        self.lock = threading.Lock()

    def run(self, stmts: list[Statement]) -> str | None:
        with self.lock:
            if self.failures:
                self.failures -= 1
                return "leader not found"
            self.batches.append([s.sql for s in stmts])
            return None

    def count(self, name: str, n: int) -> None:
        with self.lock:
            self.counted[name] = self.counted.get(name, 0) + n


def test_write_queue_batches_numbers_and_retries() -> None:
    """Requests queued within the batch timeout run as one batch; numbers count up from the
    first; a batch that fails is tried again until it is written; waiters are let go."""
    rec = _Recorder(failures=2)
    q = WriteQueue(rec.run, rec.count, 1000, batch_timeout=0.5, retry_delay=0.01)
    try:
        done = threading.Event()
        n1 = q.write([Statement("A")], None)
        n2 = q.write(None, None)  # a marker: nothing to run
        n3 = q.write([Statement("B"), Statement("C")], done)
        assert (n1, n2, n3) == (1001, 1002, 1003)
        assert done.wait(5.0), "the batch was never written"
        assert rec.batches == [["A", "B", "C"]]
        assert rec.counted["queued_executions_failed"] == 2
        assert rec.counted["queued_executions_no_leader"] == 2
        assert rec.counted["queued_executions_num_stmts_rx"] == 3
    finally:
        q.close()


def test_write_queue_of_markers_only_runs_nothing() -> None:
    rec = _Recorder()
    q = WriteQueue(rec.run, rec.count, 0, batch_timeout=0.01)
    try:
        done = threading.Event()
        q.write(None, done)
        assert done.wait(5.0) and rec.batches == []
    finally:
        q.close()


def test_write_queue_cuts_a_batch_at_its_size() -> None:
    rec = _Recorder()
    q = WriteQueue(rec.run, rec.count, 0, batch_size=2, batch_timeout=5.0)
    try:
        done = threading.Event()
        q.write([Statement("A")], None)
        q.write([Statement("B")], done)  # the second fills the batch: no 5 s wait
        assert done.wait(2.0) and rec.batches == [["A", "B"]]
    finally:
        q.close()


@pytest.mark.parametrize(("version", "v8"), [(V8, True), (V10, False)])
def test_a_failed_forward_is_answered_as_the_version_does(version, v8: bool) -> None:
    """v8 prefixes the error and names the leader, counting the try and the failure under
    ``http``; v9+ pass the error on and count the failure only, under ``proxy``."""
    from harness.node.config import Peer
    from harness.node.relay import LeaderRelay
    from harness.node.stats import HttpStats

    relay = LeaderRelay()
    relay.api, relay.stats = version.api, HttpStats(version)
    lead = Peer("n2", "127.0.0.1:4012", "127.0.0.1:4011")
    reply = relay._relay_failed("/db/request", lead, "not leader")
    counts = {**relay.stats.snapshot(), **(relay.stats.proxy_snapshot() or {})}
    assert reply.status == 200 and counts["remote_requests_failed"] == 1
    if v8:
        text = b"node failed to process Request on remote node at 127.0.0.1:4012: not leader"
        assert text in reply.body and reply.served_by == "127.0.0.1:4012"
        assert counts["remote_requests"] == 1
    else:
        assert reply.body == b'{"results":[],"error":"not leader"}' and reply.served_by is None
        assert counts["remote_requests"] == 0
