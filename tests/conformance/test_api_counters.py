"""``/debug/vars``: rqlite's HTTP counters, counted as rqlite counts them, so a tool can count a
client's requests on the server side; and the rqlite version a node follows
(``--rqlite-version``): its version in ``/status``, its counter names, its rewriting.

The counting tests run on the shared cluster (any engine: on rqlited the counters are
rqlite's own); the version tests start single embedded nodes of their own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness
from harness.cluster.local.processes import MARKER_ENV
from harness.cluster.ports import free_ports
from harness.node import versions
from harness.node.config import parse_args
from tests.cluster.helpers import wait_until

from ._http import call, execute

pytestmark = pytest.mark.needs_rqlite((8, 36, 0), "rqlite v8's HTTP counters")


def _version(url: str) -> tuple[int, ...]:
    text = call("GET", url, "/status").json["build"]["version"]
    return tuple(int(p) for p in text.lstrip("v").split("-")[0].split(".")[:3])


def _names(url: str) -> tuple[str, str]:
    """What the node at ``url`` calls its auth counters: snake case from v8.37 on
    (``http/service.go``)."""
    return ("auth_ok", "auth_fail") if _version(url) >= (8, 37, 0) else ("authOK", "authFail")


def _http(url: str) -> dict[str, int]:
    """The ``http`` counters, with v9's ``proxy`` counters (the forwarding ones, which v8
    keeps under ``http``) merged in."""
    r = call("GET", url, "/debug/vars")
    assert r.status == 200 and r.headers["Content-Type"].startswith("application/json"), r
    return {**r.json["http"], **r.json.get("proxy", {})}


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def test_a_follower_counts_each_request_and_hands_it_on(urls: dict, table: str) -> None:
    """Each /db/execute, /db/query and /db/request a client sends is counted once on the
    node it sent it to, with its statements; what that node hands to the leader is counted
    as remote there, and not at all by the leader's HTTP counters."""
    follower, leader = urls["followers"][0], urls["leader"]
    auth_ok, _ = _names(follower)
    before_f, before_l = _http(follower), _http(leader)
    execute(follower, [f"CREATE TABLE {table} (a)", f"INSERT INTO {table} VALUES (1)"])
    assert call("POST", follower, "/db/query?level=strong", ["SELECT 1", "SELECT 2"]).status == 200
    assert call("GET", follower, "/db/query?q=SELECT%201").status == 200
    assert call("POST", follower, "/db/request", [f"SELECT * FROM {table}"]).status == 200
    moved = _delta(_http(follower), before_f)
    assert {k: v for k, v in moved.items() if k not in ("num_status",)} == {
        "executions": 1,
        "execute_stmts_rx": 2,
        "queries": 2,
        "query_stmts_rx": 3,
        "requests": 1,
        "request_stmts_rx": 1,
        "remote_executions": 1,
        "remote_queries": 2,
        "remote_requests": 1,
        auth_ok: 5,  # the four requests and this /debug/vars
    }
    on_leader = _delta(_http(leader), before_l)
    assert on_leader == {auth_ok: 1}, on_leader  # only its own /debug/vars


def test_every_request_is_counted_before_its_method_but_after_its_query_string(
    urls: dict,
) -> None:
    leader = urls["leader"]
    auth_ok, auth_fail = _names(leader)
    before = _http(leader)
    assert call("GET", leader, "/db/execute").status == 405
    assert call("PUT", leader, "/status").status == 405
    assert call("POST", leader, "/db/query?timeout=soon", ["SELECT 1"]).status == 400
    assert call("GET", leader, "/readyz").status == 200
    moved = _delta(_http(leader), before)
    assert moved == {"executions": 1, "num_status": 1, "num_readyz": 1, auth_ok: 4}
    assert _http(leader)[auth_fail] == 0  # no credentials configured: every check passes


def test_debug_vars_keeps_one_key_when_asked(node_factory) -> None:
    """``?key=http`` answers only that variable (the page's shape, as rqlite writes it)."""
    with node_factory("10.2.7") as url:
        r = call("GET", url, "/debug/vars?key=http")
        assert r.text.startswith('{\n"http": {') and r.text.endswith("}\n}\n")
        assert list(r.json) == ["http"]
        assert list(call("GET", url, "/debug/vars").json) == ["cmdline", "http", "proxy"]


def test_a_queued_write_and_a_load_are_counted_as_rqlite_counts_them(node_factory) -> None:
    """``?queue`` counts a queued execution and, once its batch is written, the batch's
    statements (``runQueue``), not received statements; a SQL dump sent to ``/db/load``
    counts a load only."""
    with node_factory("10.2.7") as url:
        before = _http(url)
        assert call("POST", url, "/db/execute?queue&wait", ["CREATE TABLE q (a)"]).status == 200
        dump = b"CREATE TABLE d (a); INSERT INTO d VALUES (1);"
        assert call("POST", url, "/db/load", raw=dump, content_type="text/plain").status == 200
        expected = {
            "executions": 1,
            "queued_executions": 1,
            "queued_executions_wait": 1,
            "queued_executions_num_stmts_rx": 1,
            "queued_executions_num_stmts_tx": 1,
            "queued_executions_ok": 1,
            "loads": 1,
        }

        def moved() -> dict[str, int]:  # each look counts its own auth_ok
            return {k: v for k, v in _delta(_http(url), before).items() if k != "auth_ok"}

        # rqlite too counts a written batch only after it let its waiters go
        wait_until(lambda: moved() == expected, 5.0, "the queued batch to be counted")
        assert moved() == expected


# -- the version a node follows --------------------------------------------------------------
def test_the_node_flag_names_the_version_or_refuses() -> None:
    base = ["--node-id", "n1", "--http-addr", "127.0.0.1:1", "--raft-addr", "127.0.0.1:2"]
    base += ["--data-dir", "/d"]
    assert parse_args(base).rqlite_version == versions.DEFAULT == "10.2.7"
    assert parse_args([*base, "--rqlite-version", "8.36.18"]).rqlite_version == "8.36.18"
    with pytest.raises(SystemExit):
        parse_args([*base, "--rqlite-version", "7.0.0"])


@pytest.fixture
def node_factory(tmp_path: Path) -> Iterator:
    yield lambda version: _node(version, tmp_path / f"v{version}")


class _node:
    """One embedded node following ``version``, started and stopped around a ``with``."""

    def __init__(self, version: str, directory: Path) -> None:
        self.version = version
        self.directory = directory
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> str:
        http, raft = free_ports(2)
        self.directory.mkdir(parents=True, exist_ok=True)
        root = str(Path(harness.__file__).resolve().parent.parent)
        env = dict(os.environ, PYTHONPATH=root, **{MARKER_ENV: str(self.directory)})
        argv = [sys.executable, "-m", "harness.node", "--node-id", "n1"]
        argv += ["--http-addr", f"127.0.0.1:{http}", "--raft-addr", f"127.0.0.1:{raft}"]
        argv += ["--data-dir", str(self.directory / "data"), "--rqlite-version", self.version]
        log = open(self.directory / "node.log", "ab")  # closed in __exit__
        self.log = log
        self.proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
        url = f"http://127.0.0.1:{http}"

        def ready() -> bool:
            assert self.proc is not None and self.proc.poll() is None, (
                self.directory / "node.log"
            ).read_text()[-2000:]
            try:
                return call("GET", url, "/readyz", timeout=1.0).status == 200
            except OSError:
                return False

        try:
            wait_until(ready, 30.0, f"the v{self.version} node to be ready")
        except BaseException:
            self.__exit__()
            raise
        return url

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10.0)
        self.log.close()


@pytest.mark.parametrize(
    ("version", "auth_ok", "reprinted"),
    [
        ("10.2.7", "auth_ok", ["1 NOT NULL", "2 IS NULL", "julianday(JD)"]),
        ("9.4.5", "auth_ok", ["1 IS NOT NULL", "2 IS NULL", "julianday(JD)"]),
        ("8.36.18", "authOK", ["1 IS NOT NULL", "2 ISNULL", "julianday('now')"]),
    ],
)
def test_a_node_follows_the_version_it_is_told(
    node_factory, version: str, auth_ok: str, reprinted: list[str]
) -> None:
    """``/status``, ``X-RQLITE-VERSION``, the counter names and the rewriting of the
    version named: a result column is named after the statement's text as rewritten (v10
    re-prints IS NOT NULL as NOT NULL; v8 does not parse the postfix ISNULL, so the whole
    statement, time function included, is left as sent)."""
    with node_factory(version) as url:
        r = call("GET", url, "/status")
        assert r.json["build"]["version"] == f"v{version}-rqueue-embedded"
        assert r.json["build"]["compatible_with"] == f"v{version}"
        assert r.headers["X-RQLITE-VERSION"] == f"v{version}-rqueue-embedded"
        assert _http(url)[auth_ok] >= 1
        sql = "SELECT 1 IS NOT NULL, 2 ISNULL, julianday('now')"
        got = call("POST", url, "/db/request", [sql]).json["results"][0]["columns"]
        assert [re.sub(r"\d+\.\d+", "JD", c) for c in got] == reprinted
