"""Forwarding a request from a follower to the leader's HTTP API.

Connections are kept alive per thread and per leader. A failure before the request left
this node is a definite failure (:class:`ForwardError` with ``sent=False``); a failure
after sending leaves the outcome unknown (``sent=True``).
"""

from __future__ import annotations

import http.client
import select
import socket
import threading

FORWARDED_HEADER = "X-Rqueue-Forwarded-By"


class ForwardError(Exception):
    """Forwarding failed; ``sent`` says whether the leader may have received the request."""

    def __init__(self, message: str, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


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

    def __init__(self, node_id: str, timeout: float) -> None:
        self._node_id = node_id
        self._timeout = timeout
        self._local = threading.local()

    def _conn(self, addr: str) -> http.client.HTTPConnection:
        pool: dict[str, http.client.HTTPConnection] = self._local.__dict__.setdefault("pool", {})
        conn = pool.get(addr)
        if conn is not None and _stale(conn):
            conn.close()
            conn = None
        if conn is None:
            host, _, port = addr.rpartition(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=self._timeout)
            try:
                conn.connect()
            except OSError as exc:
                raise ForwardError(f"leader {addr} unreachable: {exc}", sent=False) from exc
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pool[addr] = conn
        return conn

    def forward(
        self, addr: str, method: str, path: str, body: bytes | None, timeout: float | None = None
    ) -> tuple[int, str, bytes]:
        """Send one request to ``addr`` (HOST:PORT); return (status, content type, body).
        ``timeout`` bounds the wait for the answer (default: the forwarder's)."""
        conn = self._conn(addr)
        if conn.sock is not None:
            conn.sock.settimeout(timeout or self._timeout)
        headers = {FORWARDED_HEADER: self._node_id}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            self._local.pool.pop(addr, None)
            raise ForwardError(f"forwarding to leader {addr} failed: {exc}", sent=True) from exc
        if resp.will_close:
            conn.close()
            self._local.pool.pop(addr, None)
        return resp.status, resp.getheader("Content-Type", "application/json"), data
