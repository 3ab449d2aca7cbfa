"""Test doubles for the pure and HTTP-level unit tests (never for integration tests).

- :class:`SqliteExecutor` answers rqlite calls from one in-memory SQLite database, as a
  single rqlite node would (a transaction per request, results in rqlite's JSON; a
  string shaped ``x'hex'`` or an array of bytes binds as a BLOB, as since rqlite 8.31).
- :func:`drive` runs a core operation generator against an executor, through the real
  response classifier: the core's SQL and decisions, with no network.
- :class:`FakeNode` is a real HTTP server on 127.0.0.1 speaking rqlite's API over an
  executor, with faults injected on demand (503, "leadership lost" after applying,
  connection dropped after applying). Several fake nodes may share one executor.
"""

from __future__ import annotations

import json
import sqlite3
import ssl
import threading
from collections.abc import Generator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from harness.node.body import blob_literal
from rqueue._exceptions import OutcomeUnknown, RqueueError, StatementError, Unavailable
from rqueue._models import HttpCall
from rqueue._wire import Outcome, classify_response


class SqliteExecutor:
    """rqlite's statement semantics over one SQLite database, thread-safe."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.lock = threading.Lock()
        self.calls: list[tuple[str, list[Any]]] = []

    def run(self, path: str, query: dict[str, Any], body: list[Any]) -> dict[str, Any]:
        with self.lock:
            self.calls.append((path, body))
            tx = "transaction" in query
            results: list[dict[str, Any]] = []
            if tx:
                self.conn.execute("BEGIN")
            failed = False
            for stmt in body:
                sql, params = (stmt, []) if isinstance(stmt, str) else (stmt[0], stmt[1:])
                params = [_bind(p) for p in params]
                try:
                    cur = self.conn.execute(sql, params)
                    rows = cur.fetchall()
                except sqlite3.Error as exc:
                    results.append({"error": str(exc)})
                    failed = True
                    if tx:
                        break
                    continue
                if cur.description:
                    res: dict[str, Any] = {"columns": [d[0] for d in cur.description]}
                    if rows:
                        res["values"] = [[_read(v) for v in r] for r in rows]
                    if path != "/db/query":
                        res["rows_affected"] = max(cur.rowcount, 0)
                    results.append(res)
                else:
                    results.append(
                        {"last_insert_id": cur.lastrowid, "rows_affected": max(cur.rowcount, 0)}
                    )
            if tx:
                self.conn.execute("ROLLBACK" if failed else "COMMIT")
            return {"results": results}

    def sql(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()


def _bind(param: Any) -> Any:
    """A JSON parameter as rqlite >= 8.31 binds it: an array of byte values, or a string
    shaped like a blob literal (``x'41'``), as a BLOB."""
    if isinstance(param, list):
        return bytes(param)
    if isinstance(param, str):
        blob = blob_literal(param)
        return param if blob is None else blob
    return param


def _read(value: Any) -> Any:
    """A value as rqlite renders it from a text column: a BLOB as text (U+FFFD for
    invalid UTF-8; rqueue reads no other BLOBs)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def drive(op: Generator[HttpCall, Any, Any], executor: SqliteExecutor) -> Any:
    """Run a core operation against ``executor``, as a transport would (no failover)."""
    try:
        call = next(op)
        while True:
            answer = executor.run(call.path, dict(call.query), call.body())
            verdict = classify_response(call, 200, json.dumps(answer))
            if verdict.outcome is Outcome.OK:
                call = op.send(call.for_caller(verdict.results))
                continue
            exc: RqueueError
            if verdict.outcome is Outcome.FAILED:
                exc = StatementError(verdict.reason)
            elif verdict.outcome is Outcome.UNKNOWN:
                exc = OutcomeUnknown(verdict.reason)
            else:
                exc = Unavailable(verdict.reason)
            call = op.throw(exc)
    except StopIteration as stop:
        return stop.value


class FakeNode:
    """A real HTTP server speaking rqlite's API over an executor, with injected faults.

    ``faults`` maps a path (``"/db/request"``) to a list of modes consumed one per
    request: ``"503"`` (not applied), ``"401"`` (refused), ``"lost"`` (applied, then HTTP 200 with a
    top-level error), ``"drop"`` (applied, then the connection closes unanswered).
    """

    def __init__(
        self,
        executor: SqliteExecutor,
        version: str = "v8.36.0-fake",
        tls: tuple[str, str] | None = None,
    ) -> None:
        self.executor = executor
        self.version = version
        self.faults: dict[str, list[str]] = {}
        self.status_forbidden = False
        self.requests: list[dict[str, Any]] = []
        node = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, status: int, body: Any, ctype: str = "application/json") -> None:
                data = (json.dumps(body) if ctype == "application/json" else body).encode()
                head = (
                    f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n"
                    f"Content-Length: {len(data)}\r\nX-RQLITE-VERSION: {node.version}\r\n\r\n"
                )
                self.wfile.write(head.encode() + data)

            def do_GET(self) -> None:
                node.requests.append({"method": "GET", "path": self.path, "headers": self.headers})
                if urlsplit(self.path).path == "/status" and node.status_forbidden:
                    self._reply(401, "unauthorized", "text/plain")
                elif urlsplit(self.path).path == "/status":
                    self._reply(200, {"build": {"version": node.version}})
                else:
                    self._reply(404, "not found", "text/plain")

            def do_POST(self) -> None:
                split = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw)
                node.requests.append(
                    {"method": "POST", "path": split.path, "body": body, "headers": self.headers}
                )
                pending = node.faults.get(split.path) or []
                mode = pending.pop(0) if pending else None
                if mode in ("503", "401"):
                    text = "leader not found" if mode == "503" else "unauthorized"
                    self._reply(int(mode), text, "text/plain")
                    return
                answer = node.executor.run(split.path, parse_qs(split.query), body)
                if mode == "lost":
                    lost = "leadership lost while committing log"
                    self._reply(200, {"results": [], "error": lost})
                elif mode == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                else:
                    self._reply(200, answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls is not None:  # (certfile, keyfile)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    def inject(self, path: str, *modes: str) -> None:
        self.faults.setdefault(path, []).extend(modes)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)
