"""rqlite's HTTP API on a threaded ``http.server``.

Responses are written with one ``send`` (status line, headers and body together):
``http.server`` would otherwise write headers and body separately and every request
would wait ~40 ms on delayed ACKs.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from . import RQLITE_COMPAT_VERSION, VERSION
from .clock import OffsetClock
from .config import NodeConfig
from .database import Database, render
from .forward import FORWARDED_HEADER, Forwarder, ForwardError
from .raft import BARRIER, EXECUTE, QUERY, REQUEST, NotApplied, OutcomeUnknown, RaftStore
from .rewrite import RewriteError, mentions_returning, process
from .statements import QueryParams, RequestError, Statement, parse_body

log = logging.getLogger(__name__)

LEADER_NOT_FOUND = "leader not found"
MAX_BODY = 64 * 1024 * 1024


@dataclass
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json; charset=utf-8"
    location: str | None = None


def json_reply(obj: Any, status: int = 200, pretty: bool = False) -> Reply:
    text = json.dumps(
        obj,
        ensure_ascii=False,
        indent=4 if pretty else None,
        separators=None if pretty else (",", ":"),
    )
    return Reply(status, text.encode("utf-8"))


def text_reply(status: int, message: str) -> Reply:
    """Like Go's ``http.Error``: text/plain with a trailing newline."""
    return Reply(status, (message + "\n").encode("utf-8"), "text/plain; charset=utf-8")


class NodeService:
    """The request handling logic, independent of the HTTP server plumbing."""

    def __init__(self, cfg: NodeConfig, store: RaftStore, db: Database, clock: OffsetClock):
        self.cfg = cfg
        self.store = store
        self.db = db
        self.clock = clock
        self.forwarder = Forwarder(cfg.node_id, timeout=cfg.apply_timeout + 5.0)
        self.started = time.time()

    # -- leadership -------------------------------------------------------------------------
    def leader(self) -> tuple[str, str, str] | None:
        """(node id, raft addr, http addr) of the leader this node knows, or None."""
        addr = self.store.leader_raft_addr()
        if addr is None:
            return None
        peer = self.cfg.by_raft_addr(addr)
        return (peer.node_id, peer.raft_addr, peer.http_addr) if peer else None

    def _not_leader(
        self,
        method: str,
        path: str,
        query: str,
        params: QueryParams,
        stmts: list[Statement] | None,
        headers: Any,
    ) -> Reply:
        """Answer a request this node cannot serve itself: redirect or forward."""
        lead = self.leader()
        if lead is None or lead[0] == self.cfg.node_id or headers.get(FORWARDED_HEADER):
            return text_reply(503, LEADER_NOT_FOUND)
        target = f"{path}?{query}" if query else path
        if params.flag("redirect"):
            return Reply(301, b"", "text/html; charset=utf-8", f"http://{lead[2]}{target}")
        body = None
        if stmts is not None:
            body = json.dumps([_wire_json(s) for s in stmts]).encode("utf-8")
            # already rewritten here, on the receiving node: the leader must not redo it
            sep = "&" if query else ""
            target = f"{path}?{query}{sep}norwrandom&norwtime"
            method = "POST"
        leader_http = lead[2]

        def still_leader() -> bool:
            now = self.leader()
            return now is not None and now[2] == leader_http

        try:
            # wait a little longer than the leader will wait for the log, but no longer
            # than this node still sees the target as leader (then: unknown outcome)
            wait = max(params.duration("timeout", 0.0), self.cfg.apply_timeout) + 5.0
            status, ctype, data = self.forwarder.forward(
                leader_http, method, target, body, wait, still_leader
            )
        except ForwardError as exc:
            if not exc.sent:
                return text_reply(503, LEADER_NOT_FOUND)
            return json_reply({"results": [], "error": str(exc)})
        return Reply(status, data, ctype)

    # -- /db/* ------------------------------------------------------------------------------
    def _rewrite(self, stmts: list[Statement], params: QueryParams, execute: bool = False) -> None:
        """rqlite's processing on the receiving node; random() only on /db/execute (rqlite
        v8.36.18 rewrites only time functions on /db/request and strong queries)."""
        rw_random = execute and not params.flag("norwrandom")
        rw_time = not params.flag("norwtime")
        for s in stmts:  # raises RewriteError (HTTP 500) before anything is applied
            r = process(
                s.sql,
                rewrite_random=rw_random,
                rewrite_time=rw_time,
                now=self.clock.now,
                positional=None if s.named else len(s.positional),
            )
            s.sql = r.sql
            s.positional.extend(r.bound)
            s.returning = mentions_returning(s.sql) if r.returning is None else r.returning

    def _through_log(
        self,
        kind: str,
        stmts: list[Statement],
        params: QueryParams,
        start: float,
        request: bool = False,
    ) -> Reply:
        try:
            results = self.store.submit(
                kind,
                stmts,
                params.flag("transaction"),
                params.flag("timings"),
                params.duration("timeout", self.cfg.apply_timeout),
            )
        except NotApplied as exc:
            return text_reply(503, str(exc))
        except OutcomeUnknown as exc:
            return json_reply({"results": [], "error": str(exc)})
        return self._results(results or [], params, start, request)

    def _results(
        self, results: list[dict], params: QueryParams, start: float, request: bool = False
    ) -> Reply:
        assoc = params.flag("associative")
        out: dict[str, Any] = {"results": [render(r, assoc, request) for r in results]}
        if params.flag("timings"):
            out["time"] = time.perf_counter() - start
        return json_reply(out, pretty=params.flag("pretty"))

    def execute(self, params: QueryParams, query: str, body: bytes, headers: Any) -> Reply:
        start = time.perf_counter()
        stmts = parse_body(body)
        self._rewrite(stmts, params, execute=True)
        if not self.store.is_leader():
            return self._not_leader("POST", "/db/execute", query, params, stmts, headers)
        return self._through_log(EXECUTE, stmts, params, start)

    def query(
        self, method: str, params: QueryParams, query: str, body: bytes, headers: Any
    ) -> Reply:
        start = time.perf_counter()
        if method == "GET":
            if "q" not in params.raw:
                raise RequestError("query parameter not set")
            stmts = [Statement(params.raw["q"])]
        else:
            stmts = parse_body(body)
        return self._read(stmts, params, query, start, headers, "/db/query", request=False)

    def request(self, params: QueryParams, query: str, body: bytes, headers: Any) -> Reply:
        start = time.perf_counter()
        stmts = parse_body(body)
        self._rewrite(stmts, params)
        writes = any(s.returning or not self.db.is_read_only(s) for s in stmts)
        if not writes:
            return self._read(stmts, params, query, start, headers, "/db/request", request=True)
        if not self.store.is_leader():
            return self._not_leader("POST", "/db/request", query, params, stmts, headers)
        return self._through_log(REQUEST, stmts, params, start, request=True)

    def _read(
        self,
        stmts: list[Statement],
        params: QueryParams,
        query: str,
        start: float,
        headers: Any,
        path: str,
        request: bool,
    ) -> Reply:
        level = params.level
        if level == "none":
            fresh = params.raw.get("freshness")
            if fresh and not self.store.is_leader():
                limit = params.duration("freshness", 0.0)
                if limit > 0 and self.store.seconds_since_leader_contact() > limit:
                    return json_reply({"results": [], "error": "stale read"})
            return self._results(
                self.db.query(stmts, params.flag("timings")), params, start, request
            )
        if level == "strong":  # it goes through the log: rewrite here, on the receiving node
            self._rewrite(stmts, params)
        if not self.store.is_leader():
            return self._not_leader("POST", path, query, params, stmts, headers)
        if level == "strong":
            return self._through_log(QUERY, stmts, params, start, request)
        if level == "linearizable":
            try:
                self.store.submit(
                    BARRIER,
                    [],
                    False,
                    False,
                    params.duration("linearizable_timeout", self.cfg.apply_timeout),
                )
            except NotApplied as exc:
                return text_reply(503, str(exc))
            except OutcomeUnknown as exc:
                return json_reply({"results": [], "error": str(exc)})
        return self._results(self.db.query(stmts, params.flag("timings")), params, start, request)

    # -- status endpoints ---------------------------------------------------------------------
    def readyz(self, params: QueryParams) -> Reply:
        if params.flag("noleader"):
            return Reply(200, b"[+]node ok", "text/plain; charset=utf-8")
        if self.leader() is None:
            return Reply(503, b"[+]node ok\n[+]leader does not exist", "text/plain; charset=utf-8")
        if not self.store.isReady():
            return Reply(
                503, b"[+]node ok\n[+]leader ok\n[+]store not ready", "text/plain; charset=utf-8"
            )
        return Reply(200, b"[+]node ok\n[+]leader ok\n[+]store ok", "text/plain; charset=utf-8")

    def status(self, params: QueryParams) -> Reply:
        st = self.store.raft_stats()
        lead = self.leader()
        now = self.clock.now()
        body = {
            "build": {
                "version": VERSION,
                "compatible_with": RQLITE_COMPAT_VERSION,
                "engine": "rqueue-embedded (PySyncObj Raft + SQLite)",
            },
            "http": {"bind_addr": self.cfg.http_addr, "auth": "disabled"},
            "node": {
                "start_time": self.started,
                "current_time": now,
                "uptime": f"{time.time() - self.started:.3f}s",
                "clock_offset": self.clock.offset,
            },
            "os": {"pid": os.getpid()},
            "store": {
                "node_id": self.cfg.node_id,
                "addr": self.cfg.raft_addr,
                "dir": str(self.cfg.data_dir),
                "ready": bool(self.store.isReady()),
                "leader": {"addr": lead[1] if lead else "", "node_id": lead[0] if lead else ""},
                "apply_timeout": f"{self.cfg.apply_timeout}s",
                "nodes": [{"id": m.node_id, "addr": m.raft_addr} for m in self.cfg.members],
                "raft": {
                    "state": st["state"],
                    "term": str(st["term"]),
                    "commit_index": str(st["commit_index"]),
                    "applied_index": str(st["applied_index"]),
                    "log_size": str(st["log_size"]),
                    "num_peers": str(len(self.cfg.peers)),
                },
            },
        }
        return json_reply(body, pretty=params.flag("pretty"))

    def nodes(self, params: QueryParams) -> Reply:
        lead = self.leader()
        timeout = params.duration("timeout", 1.0)

        def probe(http_addr: str) -> tuple[bool, float, str]:
            t0 = time.perf_counter()
            if http_addr == self.cfg.http_addr:
                return True, 0.0, ""
            conn = None
            try:
                host, _, port = http_addr.rpartition(":")
                conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
                conn.request("GET", "/readyz?noleader")
                conn.getresponse().read()
                return True, time.perf_counter() - t0, ""
            except OSError as exc:
                return False, 0.0, str(exc)
            finally:
                if conn is not None:
                    conn.close()

        members = self.cfg.members
        with ThreadPoolExecutor(max_workers=len(members)) as pool:
            probes = list(pool.map(probe, [m.http_addr for m in members]))
        out: dict[str, Any] = {}
        for m, (ok, took, err) in zip(members, probes, strict=True):
            entry: dict[str, Any] = {
                "api_addr": f"http://{m.http_addr}",
                "addr": m.raft_addr,
                "voter": True,
                "reachable": ok,
                "leader": bool(lead and lead[0] == m.node_id),
            }
            if took:
                entry["time"] = took
            if err:
                entry["error"] = err
            out[m.node_id] = entry
        return json_reply(out, pretty=params.flag("pretty"))

    def leader_info(self) -> Reply:
        lead = self.leader()
        if lead is None:
            return text_reply(503, LEADER_NOT_FOUND)
        return json_reply(
            {"leader": {"node_id": lead[0], "addr": lead[1], "api_addr": f"http://{lead[2]}"}}
        )


def _wire_json(stmt: Statement) -> list[Any]:
    item: list[Any] = [stmt.sql, *stmt.positional]
    if stmt.named:
        item.append(stmt.named)
    return item


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

    def do_OPTIONS(self) -> None:
        self._send(Reply(200, b"", "text/plain; charset=utf-8"))

    def _body(self) -> bytes:
        """The request body (read whatever the method, so keep-alive stays in step)."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True  # the body is left unread: the stream is lost
            if length < 0:
                raise RequestError("invalid Content-Length")
            raise RequestError(f"request body larger than {MAX_BODY} bytes")
        return self.rfile.read(length) if length else b""

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        path, query = parts.path, parts.query
        svc = self.service
        try:
            body = self._body()
            params = QueryParams.parse(query)
            if path.startswith("/db/execute"):
                reply = (
                    svc.execute(params, query, body, self.headers)
                    if method == "POST"
                    else Reply(405, b"")
                )
            elif path.startswith("/db/query"):
                reply = (
                    svc.query(method, params, query, body, self.headers)
                    if method in ("GET", "POST")
                    else Reply(405, b"")
                )
            elif path.startswith("/db/request"):
                reply = (
                    svc.request(params, query, body, self.headers)
                    if method == "POST"
                    else Reply(405, b"")
                )
            elif path.startswith("/status"):
                reply = svc.status(params)
            elif path.startswith("/nodes"):
                reply = svc.nodes(params)
            elif path.startswith("/readyz"):
                reply = svc.readyz(params)
            elif path.startswith("/leader"):
                reply = svc.leader_info()
            elif path in ("", "/"):
                reply = Reply(302, b"", "text/html; charset=utf-8", "/status")
            else:
                reply = Reply(404, b"", "text/plain; charset=utf-8")
        except RequestError as exc:
            reply = text_reply(400, str(exc))
        except RewriteError as exc:  # rqlite: 500 "SQL rewrite: ...", nothing applied
            reply = text_reply(500, str(exc))
        except Exception as exc:  # never kill the connection thread without an answer
            log.exception("handling %s %s", method, self.path)
            reply = text_reply(500, f"internal error: {exc}")
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        try:
            reason = HTTPStatus(reply.status).phrase
        except ValueError:
            reason = ""
        lines = [
            f"HTTP/1.1 {reply.status} {reason}",
            f"Content-Type: {reply.content_type}",
            f"Content-Length: {len(reply.body)}",
            f"X-RQLITE-VERSION: {VERSION}",
            f"Date: {formatdate(usegmt=True)}",
        ]
        if reply.content_type.startswith("text/plain"):
            lines.append("X-Content-Type-Options: nosniff")
        if reply.location:
            lines.append(f"Location: {reply.location}")
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head + reply.body)


class NodeHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def make_server(service: NodeService) -> NodeHTTPServer:
    """An HTTP server bound to the node's HTTP address, not yet serving."""
    handler = type("BoundHandler", (Handler,), {"service": service})
    host, _, port = service.cfg.http_addr.rpartition(":")
    return NodeHTTPServer((host.strip("[]"), int(port)), handler)
