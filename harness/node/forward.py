"""Forwarding a request from a follower to the leader's HTTP API.

Connections are kept alive per thread and per leader. A failure before the request left
this node is a definite failure (:class:`ForwardError` with ``sent=False``); a failure
after sending leaves the outcome unknown (``sent=True``).

What rqlite's cluster client does (``cluster/client.go`` ``retry``; docs/embedded-node.md,
"Forwarding: the deadline and v10's resend"): every send has one deadline, the request's
``?timeout`` or 30 s (``http/service.go``'s ``defaultTimeout``), for writing the command
and again for reading the answer; v8 and v9 send once (``Retries(0)``); v10 sends once
more, on a new connection, after *any* failure of the exchange (``effectiveRetries :=
max(1, maxRetries)``), with no request id: a command whose answer was lost after the
leader applied it is applied twice. :func:`resends` is that decision.

Two bounds of the node's own keep a follower from hanging on a leader it can no longer
reach (a partition drops packets silently, a paused process never answers):

- connecting gives up after :data:`CONNECT_TIMEOUT` (nothing was sent: definite);
- once sent, the wait for the answer ends as soon as ``still_leader()`` turns false
  (this node's Raft view of the leader moved away from the target), with
  :data:`LEADERSHIP_LOST`, an unknown outcome, instead of waiting out the timeout. That
  end is not a failure of the exchange: v10 does not resend after it (rqlite's resend
  would reach a node that no longer leads, which refuses it).
"""

from __future__ import annotations

import http.client
import select
import socket
import threading
import time
from collections.abc import Callable

FORWARDED_HEADER = "X-Rqueue-Forwarded-By"
#: which statements (their indexes, comma-separated) the receiving node marked as queries
#: (rqlite's ``ForceQuery``: a write with ``RETURNING`` its parser found), so the leader
#: answers them as the receiving node decided; the statements come already processed
FORCE_QUERY_HEADER = "X-Rqueue-Force-Query"
#: likewise the statements it marked ``EXPLAIN`` (rqlite's ``SqlExplain``, v9+)
EXPLAIN_HEADER = "X-Rqueue-Explain"
#: seconds to open a connection to the leader; a reachable node accepts in well under a
#: millisecond (the kernel completes the handshake even for a paused process), so a longer
#: wait means SYNs are being dropped
CONNECT_TIMEOUT = 1.0
#: the deadline of a forwarded request without ``?timeout`` (rqlite's ``defaultTimeout``)
DEFAULT_TIMEOUT = 30.0
#: how often a forward waiting for its answer re-checks who the leader is
POLL_INTERVAL = 0.05
#: the answer when the leader changed while a forwarded request was in flight (rqlite's words)
LEADERSHIP_LOST = "leadership lost while committing log"


class ForwardError(Exception):
    """Forwarding failed; ``sent`` says whether the leader may have received the request,
    ``exchange`` whether the exchange itself failed (connect, write, read, timeout,
    reset), as against the node's own early end when the leader changed."""

    def __init__(self, message: str, sent: bool, exchange: bool = True) -> None:
        super().__init__(message)
        self.sent = sent
        self.exchange = exchange


def resends(version_resends: bool, error: ForwardError) -> bool:
    """Whether rqlite's cluster client sends a command once more, on a new connection,
    after ``error``: v10 (``version_resends``) after any failure of the exchange, whether
    or not the leader got (and applied) the first; v8 and v9 never."""
    return version_resends and error.exchange


def _stale(conn: http.client.HTTPConnection) -> bool:
    """An idle keep-alive socket that is readable has been closed by the peer."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class Forwarder:
    """Sends requests to another node over HTTP/1.1 keep-alive connections."""

    def __init__(
        self, node_id: str, timeout: float, connect_timeout: float = CONNECT_TIMEOUT
    ) -> None:
        self._node_id = node_id
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._local = threading.local()
        #: how many commands were sent a second time (rqlite's ``num_force_new_conn``)
        self.resent = 0

    def _pool(self) -> dict[str, http.client.HTTPConnection]:
        return self._local.__dict__.setdefault("pool", {})

    def _drop(self, addr: str, conn: http.client.HTTPConnection | None) -> None:
        if conn is not None:
            conn.close()
        self._pool().pop(addr, None)

    def _conn(self, addr: str) -> http.client.HTTPConnection:
        pool = self._pool()
        conn = pool.get(addr)
        if conn is not None and _stale(conn):
            conn.close()
            conn = None
        if conn is None:
            host, _, port = addr.rpartition(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=self._connect_timeout)
            try:
                conn.connect()
            except OSError as exc:
                conn.close()
                raise ForwardError(f"leader {addr} unreachable: {exc}", sent=False) from exc
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pool[addr] = conn
        return conn

    def forward(
        self,
        addr: str,
        method: str,
        path: str,
        body: bytes | None,
        timeout: float | None = None,
        still_leader: Callable[[], bool] | None = None,
        extra_headers: dict[str, str] | None = None,
        resend: bool = False,
    ) -> tuple[int, str, bytes]:
        """Send one request to ``addr`` (HOST:PORT); return (status, content type, body).

        ``timeout`` bounds each send's wait for the answer (default: the forwarder's);
        ``still_leader`` is polled while waiting and ends the wait (unknown outcome)
        once it returns False; ``resend`` (rqlite v10) sends once more on a new
        connection when the first exchange failed (:func:`resends`), with a deadline of
        its own, and answers what that second send gets."""
        try:
            return self._send(addr, method, path, body, timeout, still_leader, extra_headers)
        except ForwardError as first:
            if not resends(resend, first):
                raise
            self.resent += 1
            self._drop(addr, self._pool().get(addr))
            try:
                return self._send(addr, method, path, body, timeout, still_leader, extra_headers)
            except ForwardError as second:
                second.sent = second.sent or first.sent
                raise

    def _send(
        self,
        addr: str,
        method: str,
        path: str,
        body: bytes | None,
        timeout: float | None,
        still_leader: Callable[[], bool] | None,
        extra_headers: dict[str, str] | None,
    ) -> tuple[int, str, bytes]:
        """One exchange with ``addr``: the request written and its answer read."""
        conn = self._conn(addr)
        deadline = time.monotonic() + (self._timeout if timeout is None else timeout)
        headers = {FORWARDED_HEADER: self._node_id, **(extra_headers or {})}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
            conn.request(method, path, body=body, headers=headers)
            self._await_answer(conn, addr, deadline, still_leader)
            conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
            resp = conn.getresponse()
            data = resp.read()
        except ForwardError:
            self._drop(addr, conn)
            raise
        except (OSError, http.client.HTTPException) as exc:
            self._drop(addr, conn)
            raise ForwardError(f"forwarding to leader {addr} failed: {exc}", sent=True) from exc
        if resp.will_close:
            self._drop(addr, conn)
        return resp.status, resp.getheader("Content-Type", "application/json"), data

    @staticmethod
    def _await_answer(
        conn: http.client.HTTPConnection,
        addr: str,
        deadline: float,
        still_leader: Callable[[], bool] | None,
    ) -> None:
        """Wait until the answer starts to arrive; give up when the leader changes."""
        sock = conn.sock
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ForwardError(f"forwarding to leader {addr} failed: timed out", sent=True)
            wait = left if still_leader is None else min(POLL_INTERVAL, left)
            readable, _, _ = select.select([sock], [], [], wait)
            if readable:
                return
            if still_leader is not None and not still_leader():
                raise ForwardError(
                    f"{LEADERSHIP_LOST} (forwarded to {addr}, which is no longer the leader)",
                    sent=True,
                    exchange=False,
                )
