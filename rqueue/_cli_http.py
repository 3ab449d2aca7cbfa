"""The admin CLI's transport: the core's operations over the standard library's HTTP.

``python -m rqueue stats`` should answer fast as a whole command, and importing
``requests`` costs more than everything else the command does (about 80 ms of a
~110 ms start here, against ~7 ms for connecting and asking). The core is sans-IO, so the
CLI drives the same operations, the same failover (:class:`~rqueue._attempts.Attempts`)
and the same answer classification with ``http.client``: one keep-alive connection per
node, sending each call alone (the CLI has no concurrent calls to merge).
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

from . import _batch
from ._admin import Admin
from ._attempts import CONNECT_TIMEOUT, Attempts, Reply, SendError, describe_error
from ._config import STATUS_CALL, Settings
from ._core import Op, QueueCore
from ._exceptions import RqueueError
from ._models import Call, Result
from ._statements import Statements
from ._version import ServerInfo


class StdlibSession:
    """``request(method, url, path, body, timeout) -> Reply`` over ``http.client``."""

    def __init__(self, settings: Settings) -> None:
        self._headers = {"Content-Type": "application/json"}
        if settings.credentials is not None:
            pair = ":".join(settings.credentials.as_tuple()).encode()
            self._headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        self._tls: ssl.SSLContext | None = None
        if any(u.startswith("https:") for u in settings.urls):
            self._tls = ssl.create_default_context(cafile=settings.ca_bundle)
            if not settings.verify:
                self._tls.check_hostname = False
                self._tls.verify_mode = ssl.CERT_NONE
        self._conns: dict[str, http.client.HTTPConnection] = {}

    def _conn(self, url: str, timeout: float) -> http.client.HTTPConnection:
        conn = self._conns.get(url)
        if conn is None:
            parts = urlsplit(url)
            host, port = parts.hostname or "", parts.port
            if parts.scheme == "https":
                conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=self._tls)
            else:
                conn = http.client.HTTPConnection(host, port, timeout=timeout)
            self._conns[url] = conn
        return conn

    def request(
        self, method: str, url: str, path: str, body: bytes | None, timeout: float
    ) -> Reply:
        conn = self._conn(url, timeout)
        if conn.sock is None:
            try:
                conn.timeout = min(CONNECT_TIMEOUT, timeout)
                conn.connect()  # a failure here: certainly nothing was sent
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise SendError(describe_error(exc), sent=False) from exc
        try:
            conn.sock.settimeout(timeout)
            conn.request(method, path, body=body, headers=self._headers)
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise SendError(describe_error(exc), sent=True) from exc
        return Reply(response.status, text, dict(response.getheaders()))

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()


class CliQueue(Admin):
    """The operator's API (:class:`~rqueue._admin.Admin`) driven over :class:`StdlibSession`.

    Connecting reads ``/status`` (the version decides the protocol) and creates nothing.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._session = StdlibSession(settings)
        self._endpoints = settings.endpoints()
        try:
            server = self._detect(time.monotonic() + settings.timeout)
            self._core = settings.core(server, Statements)
        except BaseException:
            self._session.close()
            raise

    def _open(self) -> QueueCore:
        return self._core

    def close(self) -> None:
        self._session.close()

    def _detect(self, deadline: float) -> ServerInfo:
        s = self.settings
        limit = s.timeout
        attempts = Attempts(STATUS_CALL, self._endpoints, deadline, s.request_timeout, limit=limit)
        while True:
            url, timeout = attempts.next()
            try:
                reply = self._session.request("GET", url, "/status", None, timeout)
                body = json.loads(reply.text) if reply.status == 200 else None
            except SendError as exc:
                attempts.not_sent(url, str(exc))
            except ValueError as exc:
                attempts.not_sent(url, describe_error(exc))
            else:
                server = attempts.status_answered(url, reply.status, reply.headers, body)
                if server is not None:
                    return server
            time.sleep(attempts.pause())

    def _drive(self, op: Op[Any]) -> Any:
        deadline = time.monotonic() + self.settings.timeout
        try:
            call = next(op)
            while True:
                try:
                    results = self._send(call, deadline)
                except RqueueError as exc:
                    call = op.throw(exc)
                else:
                    call = op.send(call.for_caller(results))
        except StopIteration as stop:
            return stop.value

    def _send(self, call: Call, deadline: float) -> tuple[Result, ...]:
        s = self.settings
        attempts = Attempts(call, self._endpoints, deadline, s.request_timeout, limit=s.timeout)
        path, body = _batch.request_target(call)
        while True:
            url, timeout = attempts.next()
            try:
                reply = self._session.request("POST", url, path, body, timeout)
            except SendError as exc:
                if exc.sent:
                    attempts.maybe_sent(url, str(exc))
                else:
                    attempts.not_sent(url, str(exc))
            else:
                results = attempts.answered(url, reply.status, reply.text)
                if results is not None:
                    return results
            time.sleep(attempts.pause())
