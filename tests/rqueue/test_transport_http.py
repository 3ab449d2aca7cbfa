"""Both transports over real HTTP against fake nodes: failover, faults, input, auth.

The fake nodes (tests/rqueue/fakes.py) inject faults that a real cluster produces only
by chance: a write applied and then answered with "leadership lost", a connection
dropped after the write was applied, 503 before applying.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from rqueue import (
    AsyncRqliteTransport,
    Lease,
    LeaseLost,
    RqliteTransport,
    Statements,
    TransportClosed,
    Unavailable,
)
from rqueue._models import Stmt

from .fakes import FakeNode, SqliteExecutor


@pytest.fixture
def two_nodes(executor: SqliteExecutor) -> Iterator[tuple[FakeNode, FakeNode]]:
    a, b = FakeNode(executor), FakeNode(executor)
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def posts(node: FakeNode) -> list[str]:
    return [r["path"] for r in node.requests if r["method"] == "POST"]


def test_round_trip(connect, fake_node: FakeNode) -> None:
    t = connect(fake_node.url)
    seq = t.publish("g", {"x": 1})
    lease = t.claim("w", 30)
    assert lease == Lease(seq, "g", '{"x": 1}', lease.token)
    t.ack(lease)
    assert t.claim("w", 30) is None


BAD_INPUT = [
    (lambda t: t.publish("", "{}"), ValueError, "group_id"),
    (lambda t: t.publish(7, "{}"), TypeError, "group_id"),
    (lambda t: t.publish("g", "not json"), ValueError, "event"),
    (lambda t: t.publish("g", object()), TypeError, "event"),
    (lambda t: t.publish("g", float("nan")), TypeError, "event"),
    (lambda t: t.publish("g", "NaN"), ValueError, "NaN is not JSON"),
    (lambda t: t.publish("g", '{"a": -Infinity}'), ValueError, "-Infinity is not JSON"),
    (lambda t: t.publish("g", "{}", priority=5), ValueError, "priority"),
    (lambda t: t.publish("g", "{}", priority=True), TypeError, "priority"),
    (lambda t: t.publish("g", "{}", dedup_id=""), ValueError, "dedup_id"),
    (lambda t: t.claim("w", 0), ValueError, "visibility"),
    (lambda t: t.claim("w", -1), ValueError, "visibility"),
    (lambda t: t.claim("", 1), ValueError, "worker_id"),
    (lambda t: t.claim("w", 1, min_priority=-1), ValueError, "min_priority"),
    (lambda t: t.nack(Lease(1, "g", "{}", "t"), delay=-1), ValueError, "delay"),
    (lambda t: t.extend(Lease(1, "g", "{}", "t"), float("inf")), ValueError, "visibility"),
    (lambda t: t.ack("not a lease"), TypeError, "lease"),
    (
        lambda t: t.ack(Lease(1, "g", "{}", "t", origin="http://elsewhere:1")),
        ValueError,
        "lease",
    ),
    (lambda t: t.publish_many([("g",)]), TypeError, "items[0]"),
    (lambda t: t.publish_many([("g", "{}", 9)]), ValueError, "items[0].priority"),
]


def test_bad_input_is_refused_before_sending(connect, fake_node) -> None:
    t = connect(fake_node.url)
    before = len(fake_node.requests)
    for call, exc, name in BAD_INPUT:
        with pytest.raises(exc, match=re.escape(name)):
            call(t)
    assert len(fake_node.requests) == before


def test_closed_transport_refuses(connect, fake_node: FakeNode) -> None:
    t = connect(fake_node.url)
    t.close()
    with pytest.raises(TransportClosed):
        t.publish("g", "{}")
    assert "closed" in repr(t)


def test_fails_over_on_refused_connection_and_sticks(connect, two_nodes) -> None:
    a, b = two_nodes
    a.stop()
    t = connect(f"{a.url},{b.url}")
    for i in range(3):
        t.publish("g", str(i))
    assert len(posts(b)) >= 3 + 3  # schema + publishes, all on b


def test_fails_over_on_503(connect, two_nodes) -> None:
    a, b = two_nodes
    t = connect(f"{a.url},{b.url}")
    a.inject("/db/execute", "503")
    n_b = len(posts(b))
    t.publish("g", "{}")
    # b's time zone is checked (a strong read) before its first timed call (rqueue._zone)
    assert posts(b)[n_b:] == ["/db/query", "/db/execute"]
    t.publish("g", "{}")
    assert posts(b)[n_b:] == ["/db/query", "/db/execute", "/db/execute"]  # stuck to b


def test_gives_up_in_time_naming_urls_and_last_failure(connect, fake_node) -> None:
    url = fake_node.url
    fake_node.stop()
    started = time.monotonic()
    with pytest.raises(Unavailable) as info:
        connect(f"http://bob:hunter2@{url[7:]},http://127.0.0.1:9", timeout=1.0)
    assert time.monotonic() - started < 5
    msg = str(info.value)
    assert url in msg and "http://127.0.0.1:9" in msg and "last failure" in msg
    assert "hunter2" not in msg and "bob" not in msg


def test_claim_applied_but_answer_lost_returns_the_lease(connect, fake_node, executor) -> None:
    t = connect(fake_node.url)
    seq = t.publish("g", "{}")
    fake_node.inject("/db/execute", "lost")
    lease = t.claim("w", 30)
    assert lease is not None and lease.seq == seq
    assert executor.sql("SELECT locked_by FROM groups") == [(lease.token,)]
    t.ack(lease)


def test_claim_connection_dropped_after_apply_returns_the_lease(connect, fake_node, executor):
    t = connect(fake_node.url)
    t.publish("g", "{}")
    fake_node.inject("/db/execute", "drop")
    lease = t.claim("w", 30)
    assert lease is not None
    assert executor.sql("SELECT locked_by FROM groups") == [(lease.token,)]


def test_publish_without_dedup_id_survives_unknown_outcomes(connect, fake_node, executor) -> None:
    t = connect(fake_node.url)
    fake_node.inject("/db/execute", "lost", "drop")  # applied, answers lost: keyed
    seq = t.publish("g", "{}")
    assert executor.sql("SELECT seq FROM messages") == [(seq,)]


def test_publish_with_dedup_id_survives_unknown_outcomes(connect, fake_node, executor) -> None:
    t = connect(fake_node.url)
    fake_node.inject("/db/request", "lost", "drop")
    seq = t.publish("g", "{}", dedup_id="m-1")
    assert executor.sql("SELECT seq FROM messages") == [(seq,)]


def test_ack_retried_when_not_applied_and_unknown_when_gone(connect, fake_node) -> None:
    t = connect(fake_node.url)
    t.publish("g", "{}")
    t.publish("g", "{}")
    first = t.claim("w", 30)
    fake_node.inject("/db/execute", "503")
    t.ack(first)  # refused before applying: retried
    second = t.claim("w", 30)
    fake_node.inject("/db/execute", "drop")
    t.ack(second)  # applied, answer lost: the row is gone, but the ack is remembered


def test_stale_ack_is_lease_lost(connect, fake_node) -> None:
    t = connect(fake_node.url)
    t.publish("g", "{}")
    lease = t.claim("w", 30)
    t.nack(lease)
    with pytest.raises(LeaseLost):
        t.ack(lease)  # released by the nack: not acked
    again = t.claim("w", 30)
    t.ack(again)
    t.ack(again)  # a repeated ack of an acked lease is acked (idempotent per lease)
    with pytest.raises(LeaseLost):
        t.nack(again)


def test_basic_auth_is_sent_and_never_shown(connect, fake_node) -> None:
    host = fake_node.url[len("http://") :]
    t = connect(f"http://bob:hunter2@{host}")
    t.publish("g", "{}")
    assert all(
        r["headers"].get("Authorization", "").startswith("Basic ") for r in fake_node.requests
    )
    assert "hunter2" not in repr(t) and "bob" not in repr(t)


def test_version_from_the_header_when_status_is_forbidden(connect, fake_node) -> None:
    fake_node.status_forbidden = True
    t = connect(fake_node.url)
    assert t.server.version == fake_node.version
    t.publish("g", "{}")


def test_old_server_uses_two_requests_and_the_given_clock(connect, fake_node) -> None:
    fake_node.version = "v8.0.0"
    t = connect(fake_node.url, clock=lambda: 5000.0)
    t.publish("g", "{}")
    before = len(fake_node.requests)
    lease = t.claim("w", 30)
    assert posts(fake_node)[-2:] == ["/db/execute", "/db/query"]
    assert len(fake_node.requests) == before + 2
    assert lease.expires_at == 5030.0


def test_server_clock_on_an_old_server_is_refused(connect, fake_node) -> None:
    fake_node.version = "v8.32.0"
    with pytest.raises(ValueError, match="server_clock"):
        connect(fake_node.url, server_clock=True)


def test_linearizable_on_an_old_server_is_refused(connect, fake_node) -> None:
    fake_node.version = "v8.31.0"
    with pytest.raises(ValueError, match="read_consistency"):
        connect(fake_node.url, read_consistency="linearizable", server_clock=False)


_NEWEST = (
    '(SELECT max(seq) FROM messages m WHERE m.group_id = "groups".group_id) AS seq, group_id, '
    '(SELECT event FROM messages m WHERE m.group_id = "groups".group_id ORDER BY seq DESC '
    "LIMIT 1) AS event, lock_expiry"
)


class _FifoReversed(Statements):
    """Leases the group as rqueue does, but hands out its newest message."""

    def claim_returning(self, token, visibility, min_priority):
        lease = self.claim_lease(token, visibility, min_priority)
        return Stmt(f"{lease.sql} RETURNING {_NEWEST}", lease.params)


class _SyncMutant(RqliteTransport):
    statements_class = _FifoReversed


class _AsyncMutant(AsyncRqliteTransport):
    statements_class = _FifoReversed


def test_mutant_hook_replaces_one_builder(connect, fake_node) -> None:
    cls = _SyncMutant if connect.twin == "sync" else _AsyncMutant
    t = connect(fake_node.url, cls=cls)
    t.publish("g", '"a"')
    t.publish("g", '"b"')
    assert t.claim("w", 30).event == '"b"'


@pytest.mark.parametrize(
    ("twin", "other"), [("RqliteTransport", "httpx"), ("AsyncRqliteTransport", "requests")]
)
def test_importing_one_twin_never_imports_the_other_library(twin: str, other: str) -> None:
    code = f"import sys, rqueue; rqueue.{twin}; assert {other!r} not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1: (certfile, keyfile)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    cert, key = str(d / "cert.pem"), str(d / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", key, "-out", cert],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def test_https_verifies_certificates_and_takes_a_ca_bundle(connect, executor, certificate):
    node = FakeNode(executor, tls=certificate)
    try:
        with pytest.raises(Unavailable, match=r"(?i)certificate"):
            connect(node.url, timeout=1.0)
        t = connect(node.url, ca_bundle=certificate[0])
        t.publish("g", "{}")
        assert t.claim("w", 30) is not None
    finally:
        node.stop()


def test_no_leader_until_the_deadline_is_unavailable(connect, fake_node) -> None:
    t = connect(fake_node.url, timeout=0.5)
    fake_node.inject("/db/execute", *["503"] * 10_000)
    with pytest.raises(Unavailable, match="HTTP 503: leader not found"):
        t.publish("g", "{}")


def test_refused_credentials_are_not_retried(connect, fake_node) -> None:
    t = connect(fake_node.url)
    fake_node.inject("/db/execute", "401")
    before = len(fake_node.requests)
    with pytest.raises(Unavailable, match="HTTP 401"):
        t.publish("g", "{}")
    assert len(fake_node.requests) == before + 1
