"""A real HTTP proxy in front of one rqlite node that applies writes twice or loses
their replies, for rqueue's tests of double application and lost replies.

Modes (for ``POST /db/execute`` and ``POST /db/request``; everything else is forwarded
once, as it is):

- ``"twice"``: the write is forwarded, then forwarded again, and the client gets the
  second answer, as rqlite v10 does when it resends a forwarded command whose first
  answer it lost (both applied, the second one's result returned);
- ``"lose"``: every second write is forwarded and applied, then the client's connection
  is closed without an answer;
- ``"reset"``: as ``"lose"``, but the connection is reset (RST) instead.
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

MODES = ("twice", "lose", "reset")
WRITES = ("/db/execute", "/db/request")
#: how long the proxy waits for the node's answer to one forwarded request
UPSTREAM_TIMEOUT = 30.0


class ReplyProxy:
    """The proxy on 127.0.0.1 (``url``), forwarding to ``upstream`` in ``mode``."""

    def __init__(self, upstream: str, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode: one of {MODES}, got {mode!r}")
        parts = urlsplit(upstream)
        if parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream: http://host:port expected, got {upstream!r}")
        self.target = (parts.hostname, parts.port)
        self.mode = mode
        self.lock = threading.Lock()
        self.writes = 0  # writes received
        self.applied = 0  # writes forwarded to the node (each answered 200 or not)
        self.lost = 0  # answers the client never got
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy.handle(self, b"")

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                proxy.handle(self, self.rfile.read(n))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def forward(self, h: BaseHTTPRequestHandler, body: bytes) -> tuple[int, str, bytes]:
        """Send the request to the node; its status, content type and body."""
        conn = http.client.HTTPConnection(*self.target, timeout=UPSTREAM_TIMEOUT)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() in _KEPT}
            conn.request(h.command, h.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, resp.getheader("Content-Type") or "application/json", data
        finally:
            conn.close()

    def handle(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        write = h.command == "POST" and urlsplit(h.path).path in WRITES
        lose = False
        if write:
            with self.lock:
                self.writes += 1
                lose = self.mode in ("lose", "reset") and self.writes % 2 == 0
        answer = self.forward(h, body)
        if write and self.mode == "twice":
            answer = self.forward(h, body)  # applied again: the client gets this answer
            with self.lock:
                self.applied += 1
        if write:
            with self.lock:
                self.applied += 1
        if lose:
            with self.lock:
                self.lost += 1
            if self.mode == "reset":
                h.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
            h.close_connection = True
            h.connection.close()
            return
        status, ctype, data = answer
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


_KEPT = ("content-type", "authorization", "accept")
