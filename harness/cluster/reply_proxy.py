"""The harness's own HTTP proxy in front of every node: it loses replies after the write
committed (fault ``reply-loss``) and shortens the forwarding deadline (``forward-reply-loss``).

One :class:`ReplyProxy` listens on loopback per node and relays each request to the node
over a keep-alive connection of its own, then the node's reply back. Outside fault windows
it is transparent. In a window (:meth:`ReplyProxies.set_loss`) it still sends every
``/db/`` request (``/db/execute``, ``/db/request``, ``/db/query``) to the node and reads the
whole reply, so the node applied it; then, for a share ``rate`` of them, the reply is lost
in one of three ways, drawn with the window's weights from a generator seeded by the run:

- ``close``: the connection is closed without a byte of the reply (the client reads EOF);
- ``reset``: the connection is reset (``SO_LINGER`` 0, then close: an RST);
- ``hold``: nothing is sent until the client gives up and closes, or ``hold`` seconds pass.

:meth:`ReplyProxies.set_timeout` makes it add ``timeout=<go duration>`` to every ``/db/``
request's query (replacing one the client gave): rqlite bounds a follower's forwarding of
the request to the leader by that parameter (``qp.Timeout(defaultTimeout)``, 30 s when
absent), so a lost forwarded reply ends within the client's own timeout.

A node that cannot be reached answers ``503`` (nothing was sent: a definite failure, as
connection refused is); a node that fails after the request was sent leaves the client's
connection closed without a reply (the outcome is unknown, as it is). Every wait is
bounded: a connection idle for :data:`IDLE_TIMEOUT` is closed, a request to the node waits
at most :data:`UPSTREAM_TIMEOUT`, and :meth:`ReplyProxies.stop` closes every connection.
The counts of what was lost, per outcome, are in :meth:`ReplyProxies.counts`.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import select
import socket
import struct
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from harness.cluster.base import ClusterError

#: the ways a reply is lost, in the order weights are given
OUTCOMES = ("close", "reset", "hold")
#: the paths whose replies a window may lose and whose ``timeout`` may be set
AFFECTED = ("/db/execute", "/db/request", "/db/query")
#: seconds a client connection may sit idle between requests before the proxy closes it
IDLE_TIMEOUT = 30.0
#: seconds the proxy waits for the node's reply (above any client timeout of the harness)
UPSTREAM_TIMEOUT = 60.0
#: seconds to connect to the node (a live node accepts at once)
CONNECT_TIMEOUT = 1.0
#: how often a held reply checks whether the client left or the proxy stops
HOLD_POLL = 0.05
#: request headers not passed on (hop by hop, or recomputed)
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "upgrade"}


@dataclass(frozen=True)
class Loss:
    """One window's loss: the share ``rate`` of affected replies lost, the weights of
    :data:`OUTCOMES`, and the most seconds a held reply waits (``hold``)."""

    rate: float
    weights: tuple[float, float, float] = (1.0, 1.0, 1.0)
    hold: float = 10.0

    def __post_init__(self) -> None:
        if not 0 < self.rate <= 1:
            raise ValueError(f"a reply-loss rate is a probability in (0, 1], got {self.rate!r}")
        if len(self.weights) != len(OUTCOMES) or any(w < 0 for w in self.weights):
            raise ValueError(
                f"weights: three numbers >= 0 (close, reset, hold), got {self.weights}"
            )
        if sum(self.weights) <= 0:
            raise ValueError("weights: at least one of close, reset, hold above 0")
        if not self.hold > 0:
            raise ValueError(f"hold: seconds above 0, got {self.hold!r}")


def with_timeout(path: str, timeout: str | None) -> str:
    """``path`` with its query's ``timeout`` set to ``timeout`` (None: unchanged), for an
    affected path only."""
    split = urlsplit(path)
    if timeout is None or split.path not in AFFECTED:
        return path
    query = [(k, v) for k, v in parse_qsl(split.query, keep_blank_values=True) if k != "timeout"]
    query.append(("timeout", timeout))
    return urlunsplit(("", "", split.path, urlencode(query), ""))


@dataclass
class _State:
    """What every proxy of one set shares: the window's loss, the timeout, the draws and
    the counts; guarded by ``lock``."""

    rng: random.Random
    loss: Loss | None = None
    timeout: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: {o: 0 for o in OUTCOMES})
    window: dict[str, int] = field(default_factory=lambda: {o: 0 for o in OUTCOMES})
    relayed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)

    def draw(self, path: str) -> tuple[str | None, float, str | None]:
        """(the outcome for a request to ``path``: None to relay its reply; the hold's
        seconds; the timeout to set)."""
        with self.lock:
            loss, timeout = self.loss, self.timeout
            if loss is None or urlsplit(path).path not in AFFECTED:
                return None, 0.0, timeout
            if self.rng.random() >= loss.rate:
                return None, 0.0, timeout
            outcome = self.rng.choices(OUTCOMES, weights=loss.weights)[0]
            self.counts[outcome] += 1
            self.window[outcome] += 1
            return outcome, loss.hold, timeout


class _Handler(BaseHTTPRequestHandler):
    """One client connection: its requests relayed one at a time to the node."""

    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        return

    def setup(self) -> None:
        super().setup()
        self._upstream: http.client.HTTPConnection | None = None
        self.server.track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            if self._upstream is not None:
                self._upstream.close()
            self.server.track(self.connection, False)

    def do_GET(self) -> None:
        self._relay()

    do_POST = do_PUT = do_DELETE = do_HEAD = do_OPTIONS = do_PATCH = do_GET

    def _relay(self) -> None:
        state = self.server.state
        outcome, hold, timeout = state.draw(self.path)
        body = self._body()
        if body is None:
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers.pop("Content-Length", None)
        headers.pop("Host", None)
        if body or self.command in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(body))
        try:
            conn = self._connection()
        except OSError as exc:
            self._answer(503, f"reply proxy: node {self.server.target} unreachable: {exc}".encode())
            return
        try:
            conn.request(self.command, with_timeout(self.path, timeout), body or None, headers)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException):
            # sent, no answer: the client learns as much (unknown outcome)
            self._drop_upstream()
            self.close_connection = True
            return
        if resp.will_close:
            self._drop_upstream()
        if outcome is None:
            with state.lock:
                state.relayed += 1
            self._reply(resp, data)
        else:
            self._lose(outcome, hold)

    def _body(self) -> bytes | None:
        """The request's body (None: refused, answered and the connection closed)."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self._answer(501, b"reply proxy: chunked request bodies are not relayed")
            self.close_connection = True
            return None
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self._answer(400, b"reply proxy: bad Content-Length")
            self.close_connection = True
            return None
        return self.rfile.read(length) if length > 0 else b""

    def _connection(self) -> http.client.HTTPConnection:
        conn = self._upstream
        if conn is not None and _stale(conn):
            self._drop_upstream()
            conn = None
        if conn is None:
            host, port = self.server.target
            conn = http.client.HTTPConnection(host, port, timeout=CONNECT_TIMEOUT)
            try:
                conn.connect()
            except OSError:
                conn.close()
                raise
            conn.sock.settimeout(UPSTREAM_TIMEOUT)
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._upstream = conn
        return conn

    def _drop_upstream(self) -> None:
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None

    def _answer(self, status: int, text: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def _reply(self, resp: http.client.HTTPResponse, data: bytes) -> None:
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _lose(self, outcome: str, hold: float) -> None:
        """Lose the reply the node gave: close, reset, or hold then close."""
        self.close_connection = True
        sock = self.connection
        if outcome == "hold":
            deadline = time.monotonic() + hold
            while not self.server.state.stopping.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    readable, _, _ = select.select([sock], [], [], min(HOLD_POLL, left))
                    if readable:
                        break  # the client gave up and closed (or, out of turn, wrote)
                except OSError:
                    break
        elif outcome == "reset":
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.wfile.close()
            self.rfile.close()
            sock.close()


def _stale(conn: http.client.HTTPConnection) -> bool:
    """An idle keep-alive connection that is readable was closed by the node."""
    if conn.sock is None:
        return True
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: object, client_address: object) -> None:
        return  # a client that reset or left mid-request: nothing to report

    def __init__(self, target: tuple[str, int], state: _State) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.target, self.state = target, state
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def track(self, sock: socket.socket, alive: bool) -> None:
        with self._open_lock:
            (self._open.add if alive else self._open.discard)(sock)

    def close_all(self) -> None:
        """Shut every client connection (their threads then end)."""
        with self._open_lock:
            socks = list(self._open)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class ReplyProxy:
    """One listener on loopback that relays to the node at ``url``."""

    def __init__(self, node_id: str, url: str, state: _State) -> None:
        split = urlsplit(url)
        if split.scheme != "http" or not split.hostname or not split.port:
            raise ClusterError(
                f"reply proxy: node {node_id}'s URL must be http://HOST:PORT, got {url!r}"
            )
        self.node_id, self.target_url = node_id, url
        self._server = _Server((split.hostname, split.port), state)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"reply-proxy-{node_id}",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self._server.shutdown()
        self._server.close_all()
        self._server.server_close()
        self._thread.join(timeout)


class ReplyProxies:
    """A :class:`ReplyProxy` per node (``nodes``: id -> URL), sharing one window and one
    seeded generator; :attr:`urls` in the nodes' order."""

    def __init__(self, nodes: Mapping[str, str], seed: int | str = 0) -> None:
        if not nodes:
            raise ClusterError("reply proxy: no node to put a proxy in front of")
        self._state = _State(random.Random(f"{seed}-reply-loss"))
        self.proxies = [ReplyProxy(n, u, self._state) for n, u in nodes.items()]
        self._started = False

    @property
    def urls(self) -> list[str]:
        return [p.url for p in self.proxies]

    def by_node(self) -> dict[str, str]:
        """Each node's id -> the proxy's URL in front of it."""
        return {p.node_id: p.url for p in self.proxies}

    def start(self) -> ReplyProxies:
        for p in self.proxies:
            p.start()
        self._started = True
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening and close every connection, holds included (bounded by
        ``timeout`` per proxy)."""
        self._state.stopping.set()
        if self._started:
            for p in self.proxies:
                p.stop(timeout)
            self._started = False

    def __enter__(self) -> ReplyProxies:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def set_loss(self, loss: Loss) -> None:
        """Start a window: lose replies as ``loss`` says (its counts start at 0)."""
        with self._state.lock:
            self._state.loss = loss
            self._state.window = {o: 0 for o in OUTCOMES}

    def clear_loss(self) -> dict[str, int]:
        """End the window: relay every reply again; return what the window lost."""
        with self._state.lock:
            self._state.loss = None
            return dict(self._state.window)

    def set_timeout(self, timeout: str | None) -> None:
        """Set ``timeout`` (a Go duration, e.g. ``"1s"``; None: leave the client's) on every
        affected request's query."""
        with self._state.lock:
            self._state.timeout = timeout

    def counts(self) -> dict[str, int]:
        """Replies lost per outcome since the start, and ``relayed``: those passed on."""
        with self._state.lock:
            return {**self._state.counts, "relayed": self._state.relayed}


def start_proxies(nodes: Sequence[tuple[str, str]], seed: int | str) -> ReplyProxies:
    """:class:`ReplyProxies` in front of ``nodes`` ((id, URL) pairs), started."""
    return ReplyProxies(dict(nodes), seed).start()
