"""The forwarder's bounds: a leader that stops answering must not hold a follower's request."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from harness.node.forward import LEADERSHIP_LOST, Forwarder, ForwardError


@pytest.fixture
def silent_server() -> Iterator[str]:
    """HOST:PORT of a server that accepts connections and reads, but never answers."""
    srv = socket.create_server(("127.0.0.1", 0))
    conns: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conns.append(conn)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        t.join(5)
        for c in conns:
            c.close()
        srv.close()


def test_leader_change_ends_the_wait_with_an_unknown_outcome(silent_server: str) -> None:
    fwd = Forwarder("n2", timeout=30.0)
    changed_at = time.monotonic() + 0.3
    t0 = time.monotonic()
    with pytest.raises(ForwardError) as err:
        fwd.forward(
            silent_server,
            "POST",
            "/db/execute",
            b"[]",
            timeout=30.0,
            still_leader=lambda: time.monotonic() < changed_at,
        )
    took = time.monotonic() - t0
    assert err.value.sent, "the request was sent: its outcome is unknown, not a failure"
    assert str(err.value).startswith(LEADERSHIP_LOST)
    assert 0.25 < took < 2.0, f"the forward ended {took:.2f}s after the leader changed"


def test_without_a_leader_check_the_timeout_still_bounds_the_wait(silent_server: str) -> None:
    fwd = Forwarder("n2", timeout=30.0)
    t0 = time.monotonic()
    with pytest.raises(ForwardError, match="timed out") as err:
        fwd.forward(silent_server, "POST", "/db/execute", b"[]", timeout=0.3)
    assert err.value.sent
    assert time.monotonic() - t0 < 2.0


def test_refused_connection_is_not_sent() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        with pytest.raises(ForwardError) as err:
            Forwarder("n2", timeout=5.0).forward(addr, "POST", "/db/execute", b"[]")
    assert not err.value.sent
