"""Connecting fails at once where retrying cannot help, and keeps trying where it can.

A host name the resolver says does not exist, and an HTTP server that is not rqlite
(``GET /status`` answered 404), are not asked again: when every node is so, ``from_url``
(both twins) and the CLI raise :class:`~rqueue.Unavailable` after one try each, instead
of retrying for the whole timeout. A node that refuses, or whose name stops resolving
after the transport connected (a container restarting), is still retried.
"""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from rqueue import Unavailable, _cli
from rqueue._attempts import Attempts, SendError, unknown_host
from rqueue._cli_http import CliQueue
from rqueue._config import STATUS_CALL, Settings
from rqueue._endpoints import Endpoints

MISSPELT = "rqlite-nodee1.invalid"  # .invalid: a name no resolver may know (RFC 6761)


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The host names resolved from now on (every twin resolves through getaddrinfo)."""
    seen: list[str] = []
    real = socket.getaddrinfo

    def counting(host: Any, *args: Any, **kw: Any) -> Any:
        seen.append(host.decode() if isinstance(host, bytes) else str(host))
        return real(host, *args, **kw)

    try:
        real(MISSPELT, 4001)
    except socket.gaierror as exc:
        if not unknown_host(exc):
            pytest.skip(f"this resolver gives no definite answer for {MISSPELT}: {exc}")
    monkeypatch.setattr(socket, "getaddrinfo", counting)
    return seen


class _NotRqlite(BaseHTTPRequestHandler):
    """Any web server: 404 for every path, or a page of HTML for every path."""

    status = 404

    def do_GET(self) -> None:
        self.server.requests += 1  # type: ignore[attr-defined]
        body = b"<html><body>It works!</body></html>"
        self.send_response(self.status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(params=[404, 200])
def web_server(request: pytest.FixtureRequest) -> Iterator[ThreadingHTTPServer]:
    handler = type("Handler", (_NotRqlite,), {"status": request.param})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.requests = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


# -- the decisions, without I/O ----------------------------------------------------------------
def test_every_node_hopeless_fails_at_once() -> None:
    a, b = "http://a:4001", "http://b:4001"
    tries = Attempts(STATUS_CALL, Endpoints([a, b]), deadline=float("inf"), request_timeout=1)
    assert tries.next()[0] == a
    tries.not_rqlite(a, "HTTP 404")
    assert tries.next()[0] == b
    with pytest.raises(Unavailable) as caught:
        tries.unresolved(b, SendError("gaierror: no such name", sent=False, unknown_host=True))
    said = str(caught.value)
    assert said.startswith("connect: no node can answer, retrying cannot help: ")
    assert f"{a}: not an rqlite node: GET /status answered HTTP 404" in said
    assert f"{b}: the host name 'b' does not resolve (misspelt?)" in said


def test_a_hopeless_node_is_skipped_while_the_others_are_retried() -> None:
    now = [0.0]
    e = Endpoints(["a", "http://b:4001", "c"])
    tries = Attempts(STATUS_CALL, e, deadline=5.0, request_timeout=1, monotonic=lambda: now[0])
    tries.next()
    tries.not_sent("a", "connection refused")
    tries.unresolved("http://b:4001", SendError("gaierror", sent=False, unknown_host=True))
    tried = []
    for _ in range(6):
        url, _ = tries.next()
        tried.append(url)
        tries.not_sent(url, "connection refused")
    assert "http://b:4001" not in tried and set(tried) == {"a", "c"}
    now[0] = 6.0
    with pytest.raises(Unavailable, match="gave up after the time limit") as caught:
        tries.next()
    assert "http://b:4001 never can: the host name 'b' does not resolve" in str(caught.value)


def test_only_a_definite_no_such_name_is_hopeless() -> None:
    def chained(errno: int) -> BaseException:
        try:
            try:
                raise socket.gaierror(errno, "resolver")
            except socket.gaierror as inner:
                raise ConnectionError("wrapped by a client library") from inner
        except ConnectionError as outer:
            return outer

    assert unknown_host(chained(socket.EAI_NONAME))
    assert not unknown_host(chained(socket.EAI_AGAIN))  # the resolver could not be asked
    assert not unknown_host(ConnectionRefusedError(111, "refused"))


# -- real sockets: the twins and the CLI -----------------------------------------------------
def test_a_misspelt_host_name_fails_at_once(connect: Any, lookups: list[str]) -> None:
    with pytest.raises(Unavailable) as caught:
        connect(f"http://{MISSPELT}:4001", timeout=5)
    said = str(caught.value)
    assert "retrying cannot help" in said and f"the host name '{MISSPELT}' does not resolve" in said
    assert lookups.count(MISSPELT) == 1


def test_a_server_that_is_not_rqlite_fails_at_once(connect: Any, web_server: Any) -> None:
    url = f"http://127.0.0.1:{web_server.server_port}"
    with pytest.raises(Unavailable, match="not an rqlite node: GET /status answered HTTP") as c:
        connect(url, timeout=5)
    assert "HTTP 404" in str(c.value) or "HTTP 200 without JSON" in str(c.value)
    assert web_server.requests == 1


def test_the_cli_fails_at_once_too(web_server: Any, lookups: list[str], capsys) -> None:
    url = f"http://{MISSPELT}:4001,http://127.0.0.1:{web_server.server_port}"
    assert _cli.run(["--url", url, "--timeout", "5", "stats"], out=io.StringIO()) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: connect: no node can answer, retrying cannot help: ")
    assert (lookups.count(MISSPELT), web_server.requests) == (1, 1)


def test_a_node_that_is_down_is_still_retried(connect: Any, lookups: list[str]) -> None:
    """Beside a misspelt name, a node that refuses may come up: tried until the deadline."""
    with pytest.raises(Unavailable, match="gave up after the time limit of 1 s") as caught:
        connect(f"http://{MISSPELT}:4001,http://127.0.0.1:9", timeout=1)
    assert f"never can: the host name '{MISSPELT}' does not resolve" in str(caught.value)
    assert lookups.count(MISSPELT) == 1


def test_a_misspelt_node_beside_live_ones_is_left_out(connect: Any, queue_urls: list[str]) -> None:
    t = connect([f"http://{MISSPELT}:4001", *queue_urls], timeout=10)
    t.publish("g", {"n": 1})
    assert t.claim("w", 30) is not None


def test_a_name_that_stops_resolving_after_connecting_is_retried(
    queue_urls: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node's container restarting leaves its name out of the DNS for a while: a
    transport that connected through that name keeps trying it within its timeout."""
    port = queue_urls[0].rpartition(":")[2]
    t = CliQueue(Settings.build(f"http://localhost:{port}", timeout=10))
    try:
        real, refusals = socket.getaddrinfo, [3]

        def restarting(host: Any, *args: Any, **kw: Any) -> Any:
            if host == "localhost" and refusals[0] > 0:
                refusals[0] -= 1
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return real(host, *args, **kw)

        monkeypatch.setattr(socket, "getaddrinfo", restarting)
        assert t.stats().ready == 0
        assert refusals == [0]  # each refused lookup was retried
    finally:
        t.close()


def test_a_ca_file_that_is_not_there_is_refused_before_anything_is_sent(connect: Any) -> None:
    with pytest.raises(ValueError, match=r"ca_bundle: no such file: '/no/such/ca\.pem'"):
        connect("https://127.0.0.1:9", ca_bundle="/no/such/ca.pem", timeout=5)
