"""The reply proxy (harness.cluster.reply_proxy) in front of a real HTTP server: it
relays transparently outside windows; in a window the server still gets (and applies)
every request while the client loses the reply by close, reset or hold; it sets
``?timeout``; it answers 503 for a node it cannot reach; it stops within its bounds."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from harness.cluster.base import ClusterError
from harness.cluster.reply_proxy import Loss, ReplyProxies, with_timeout

pytestmark = pytest.mark.timeout(60)


class Node(ThreadingHTTPServer):
    """A stand-in node: counts the writes it applied, echoes the path it was asked."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _NodeHandler)
        self.applied: list[str] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _NodeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Node

    def log_message(self, *args: object) -> None:
        return

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.applied.append(self.path)
        data = json.dumps({"path": self.path, "echo": body.decode()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if self.path.startswith("/chunked"):  # as Go's server answers a long reply
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (data[:5], data[5:]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST


@pytest.fixture
def node() -> Iterator[Node]:
    n = Node()
    t = threading.Thread(target=n.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield n
    n.shutdown()
    n.server_close()
    t.join(5)


@pytest.fixture
def proxies(node: Node) -> Iterator[ReplyProxies]:
    p = ReplyProxies({"n1": node.url}, seed=3).start()
    yield p
    p.stop()


def connect(p: ReplyProxies, timeout: float = 5.0) -> http.client.HTTPConnection:
    host, _, port = p.urls[0].removeprefix("http://").rpartition(":")
    return http.client.HTTPConnection(host, int(port), timeout=timeout)


def post(conn: http.client.HTTPConnection, path: str, body: bytes = b"[]") -> dict:
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    return json.loads(resp.read())


def test_outside_a_window_it_relays_every_request_on_one_connection(node, proxies) -> None:
    conn = connect(proxies)
    for i in range(5):
        got = post(conn, f"/db/execute?i={i}", b'["x"]')
        assert got == {"path": f"/db/execute?i={i}", "echo": '["x"]'}
    assert post(conn, "/chunked/status")["path"] == "/chunked/status"  # de-chunked, relayed
    conn.close()
    assert len(node.applied) == 6
    assert proxies.counts() == {"close": 0, "reset": 0, "hold": 0, "relayed": 6}


@pytest.mark.parametrize(
    ("weights", "error"),
    [
        ((1, 0, 0), http.client.RemoteDisconnected),
        ((0, 1, 0), ConnectionResetError),
        ((0, 0, 1), TimeoutError),
    ],
)
def test_in_a_window_the_node_applies_and_the_client_loses_the_reply(
    node, proxies, weights, error
) -> None:
    proxies.set_loss(Loss(1.0, weights, hold=5.0))
    conn = connect(proxies, timeout=0.5)
    t = time.monotonic()
    with pytest.raises(error):
        post(conn, "/db/execute", b'["INSERT"]')
    assert time.monotonic() - t < 3.0
    conn.close()
    assert node.applied == ["/db/execute"]  # applied, though the reply was lost
    outcome = ("close", "reset", "hold")[weights.index(1)]
    lost = proxies.clear_loss()
    assert lost == {o: int(o == outcome) for o in ("close", "reset", "hold")}
    conn = connect(proxies)
    assert post(conn, "/db/execute")["path"] == "/db/execute"  # the window is over
    conn.close()


def test_a_held_reply_ends_when_the_client_leaves(node, proxies) -> None:
    """The proxy's thread sees the client's close and stops holding at once."""
    proxies.set_loss(Loss(1.0, (0, 0, 1), hold=30.0))
    s = socket.create_connection(("127.0.0.1", int(proxies.urls[0].rpartition(":")[2])))
    s.sendall(b"POST /db/execute HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n[]")
    deadline = time.monotonic() + 5
    while not node.applied and time.monotonic() < deadline:
        time.sleep(0.01)
    assert node.applied
    s.close()
    t = time.monotonic()
    proxies.stop(timeout=5)  # nothing still held: stops at once
    assert time.monotonic() - t < 2.0


def test_only_db_requests_lose_replies_and_the_draws_follow_the_seed(node) -> None:
    def outcomes(seed: int) -> list[str]:
        with ReplyProxies({"n1": node.url}, seed=seed) as p:
            p.set_loss(Loss(0.5, (1, 1, 0)))
            got = []
            for _ in range(12):
                conn = connect(p)
                try:
                    post(conn, "/db/query")
                    got.append("ok")
                except (http.client.RemoteDisconnected, ConnectionResetError) as exc:
                    got.append(type(exc).__name__)
                conn.close()
            conn = connect(p)
            assert post(conn, "/status")["path"] == "/status"  # never lost
            conn.close()
            return got

    first = outcomes(5)
    assert first == outcomes(5)
    assert "ok" in first and len(set(first)) == 3, first


def test_it_sets_the_forwarding_timeout_on_db_requests_only(node, proxies) -> None:
    proxies.set_timeout("1s")
    conn = connect(proxies)
    assert post(conn, "/db/execute?timeout=30s&redirect")["path"] == (
        "/db/execute?redirect=&timeout=1s"
    )
    assert post(conn, "/db/request")["path"] == "/db/request?timeout=1s"
    assert post(conn, "/status?timeout=9s")["path"] == "/status?timeout=9s"
    proxies.set_timeout(None)
    assert post(conn, "/db/execute?timeout=30s")["path"] == "/db/execute?timeout=30s"
    conn.close()
    assert with_timeout("/db/query", None) == "/db/query"


def test_a_node_it_cannot_reach_answers_503(node) -> None:
    gone = node.url
    node.shutdown()
    node.server_close()
    with ReplyProxies({"n1": gone}) as p:
        conn = connect(p)
        conn.request("POST", "/db/execute", b"[]")
        resp = conn.getresponse()
        assert resp.status == 503 and b"unreachable" in resp.read()
        conn.close()


def test_stop_closes_a_held_connection_and_bad_input_is_named(node) -> None:
    p = ReplyProxies({"n1": node.url}).start()
    p.set_loss(Loss(1.0, (0, 0, 1), hold=60.0))
    conn = connect(p, timeout=10)
    seen: list[BaseException] = []

    def held() -> None:
        try:
            post(conn, "/db/execute")
        except (http.client.HTTPException, OSError) as exc:
            seen.append(exc)

    holder = threading.Thread(target=held)
    holder.start()
    deadline = time.monotonic() + 5
    while not node.applied and time.monotonic() < deadline:
        time.sleep(0.01)
    t = time.monotonic()
    p.stop(timeout=5)
    holder.join(5)
    assert not holder.is_alive() and time.monotonic() - t < 3.0
    assert seen, "the held client got a reply"
    with pytest.raises(ValueError, match="rate"):
        Loss(0)
    with pytest.raises(ValueError, match="at least one"):
        Loss(0.5, (0, 0, 0))
    with pytest.raises(ClusterError, match="http://HOST:PORT"):
        ReplyProxies({"n1": "node:4001"})
