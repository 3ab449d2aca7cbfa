"""The HTTP plumbing: a threaded ``http.server`` routing rqlite's paths to the service.

Responses are written with one ``send`` (status line, headers and body together):
``http.server`` would otherwise write headers and body separately and every request
would wait ~40 ms on delayed ACKs. Request bodies are read in full, with a
``Content-Length`` or chunked, whatever the method, so a keep-alive connection stays in
step and a pipelined request after a chunked body is read as the next request. There is
no size limit, as rqlite has none (``http/service.go`` reads every body with
``io.ReadAll``, no ``http.MaxBytesReader``, in v8.36.18, v9.4.5 and v10.2.7).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from .api import NodeService
from .forward import FORWARDED_HEADER
from .replies import Reply, text_reply
from .sql.rewrite import RewriteError
from .statements import QueryParams, RequestError

log = logging.getLogger(__name__)

#: rqlite sends these on every answer (``addAllowHeaders``, with no credentials configured:
#: the node has none; with them rqlite adds ``Authorization`` and ``-Credentials: true``)
_CORS = (
    "Access-Control-Allow-Methods: OPTIONS, GET, POST\r\nAccess-Control-Allow-Headers: Content-Type"
)

Route = Callable[["Handler", str, QueryParams, str, bytes], Reply]

#: path prefix -> (methods, handler); order matters (first prefix that matches)
_ROUTES: list[tuple[str, tuple[str, ...], Route]] = [
    (
        "/db/execute",
        ("POST",),
        lambda h, m, p, q, b: h.service.execute(p, q, b, h.headers, h.headers["Content-Type"]),
    ),
    (
        "/db/query",
        ("GET", "POST"),
        lambda h, m, p, q, b: h.service.query(m, p, q, b, h.headers, h.headers["Content-Type"]),
    ),
    (
        "/db/request",
        ("POST",),
        lambda h, m, p, q, b: h.service.request(p, q, b, h.headers, h.headers["Content-Type"]),
    ),
    ("/db/backup", ("GET",), lambda h, m, p, q, b: h.service.backup(p, q, h.headers)),
    ("/db/load", ("POST",), lambda h, m, p, q, b: h.service.load(p, q, b, h.headers)),
    ("/remove", ("DELETE",), lambda h, m, p, q, b: h.service.remove(p, q, b, h.headers)),
    ("/join", ("POST",), lambda h, m, p, q, b: h.service.join_request(p, b)),
    ("/status", ("GET",), lambda h, m, p, q, b: h.service.status(p)),
    ("/nodes", ("GET",), lambda h, m, p, q, b: h.service.nodes(p)),
    ("/readyz", ("GET",), lambda h, m, p, q, b: h.service.readyz(p)),
]
#: exact paths, any method (rqlite serves its expvar page so)
_EXACT: dict[str, Route] = {"/debug/vars": lambda h, m, p, q, b: h.service.debug_vars(p)}


class Handler(BaseHTTPRequestHandler):
    """Routes requests to :class:`NodeService`; every reply carries ``X-RQLITE-VERSION``."""

    protocol_version = "HTTP/1.1"
    server_version = "rqueue-embedded"
    service: NodeService  # set on the subclass made by make_server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """``http.server``'s own errors (malformed requests), with our headers."""
        self.close_connection = True
        self._send(text_reply(code, message or HTTPStatus(code).phrase))

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_OPTIONS(self) -> None:
        self._send(Reply(200, b"", "text/plain; charset=utf-8"))

    def _body(self) -> bytes:
        """The request body (read whatever the method, so keep-alive stays in step)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._chunked_body()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True  # the body is left unread: the stream is lost
            raise RequestError("invalid Content-Length")
        return self.rfile.read(length) if length else b""

    def _chunked_body(self) -> bytes:
        """A ``Transfer-Encoding: chunked`` body: sized chunks up to a zero-sized one, then
        optional trailer lines up to an empty line."""
        parts: list[bytes] = []
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                self.close_connection = True
                raise RequestError("invalid chunked body: bad chunk size line") from None
            if size == 0:
                break
            chunk = self.rfile.read(size)
            if len(chunk) != size or self.rfile.read(2) != b"\r\n":
                self.close_connection = True
                raise RequestError("invalid chunked body: chunk shorter than its size")
            parts.append(chunk)
        while True:  # trailers
            line = self.rfile.readline(8192)
            if line in (b"\r\n", b"\n", b""):
                break
        return b"".join(parts)

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        path, query = parts.path, parts.query
        try:
            body = self._body()
            reply = self._route(method, path, query, body)
        except RequestError as exc:
            reply = text_reply(400, str(exc))
        except RewriteError as exc:  # rqlite: 500 "SQL rewrite: ...", nothing applied
            reply = text_reply(500, str(exc))
        except Exception as exc:  # never kill the connection thread without an answer
            log.exception("handling %s %s", method, self.path)
            reply = text_reply(500, f"internal error: {exc}")
        self._send(reply)

    def _route(self, method: str, path: str, query: str, body: bytes) -> Reply:
        """The handler's reply; a query string rqlite cannot parse is a 400 before anything
        is counted, then the request is counted (:mod:`.stats`), then its method checked."""
        for prefix, methods, handle in _ROUTES:
            if path.startswith(prefix):
                params = self._counted(path, query)
                if method not in methods:
                    return Reply(405, b"", "text/plain; charset=utf-8")
                return handle(self, method, params, query, body)
        if path in _EXACT:
            return _EXACT[path](self, method, self._counted(path, query), query, body)
        if path == "/leader" and self.service.api.leader_endpoint:  # v9+ (v8: 404)
            params = self._counted(path, query)
            if method != "GET":  # POST (a stepdown) is not something the node can do
                return Reply(405, b"", "text/plain; charset=utf-8")
            return self.service.leader_info(params)
        if path in ("", "/"):
            return Reply(302, b"", "text/html; charset=utf-8", "/status")
        return Reply(404, b"", "text/plain; charset=utf-8")

    def _counted(self, path: str, query: str) -> QueryParams:
        params = QueryParams.parse(query)
        if not self.headers.get(FORWARDED_HEADER):  # rqlite's leader: cluster protocol
            self.service.stats.count_request(path)
        return params

    def _send(self, reply: Reply) -> None:
        try:
            reason = HTTPStatus(reply.status).phrase
        except ValueError:
            reason = ""
        lines = [
            f"HTTP/1.1 {reply.status} {reason}",
            f"Content-Type: {reply.content_type}",
            f"Content-Length: {len(reply.body)}",
            f"X-RQLITE-VERSION: {self.service.build_version}",
            f"Date: {formatdate(usegmt=True)}",
            _CORS,
        ]
        if reply.served_by:
            lines.append(f"X-Rqlite-Served-By: {reply.served_by}")
        if reply.content_type.startswith("text/plain"):
            lines.append("X-Content-Type-Options: nosniff")
        if reply.location:
            lines.append(f"Location: {reply.location}")
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head if self.command == "HEAD" else head + reply.body)


class NodeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class NodeHTTPServer6(NodeHTTPServer):
    """The same server on an IPv6 address (``[::1]:4001``)."""

    address_family = socket.AF_INET6


def make_server(service: NodeService) -> NodeHTTPServer:
    """An HTTP server bound to the node's HTTP address, not yet serving."""
    handler = type("BoundHandler", (Handler,), {"service": service})
    host, _, port = service.cfg.http_addr.rpartition(":")
    host = host.strip("[]")
    server = NodeHTTPServer6 if ":" in host else NodeHTTPServer
    return server((host, int(port)), handler)
