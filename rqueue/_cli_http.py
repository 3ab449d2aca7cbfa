"""The admin CLI's transport: the core's operations over a plain socket.

``python -m rqueue stats`` should answer fast as a whole command, and the HTTP clients
cost more to import than everything else the command does (``requests`` ~80 ms,
``http.client`` with the ``email`` package ~35 ms, against ~7 ms for connecting and
asking). The core is sans-IO, so the CLI drives the same operations, the same failover
(:class:`~rqueue._attempts.Attempts`) and the same answer classification over the
simplest HTTP there is: one HTTP/1.0 request per connection (the server closes it after
the answer, so the answer ends at ``Content-Length`` or at the close: no chunking, no
keep-alive), TLS from :mod:`ssl` for https nodes. The CLI makes a handful of calls, one
at a time, so nothing here needs more.
"""

from __future__ import annotations

import base64
import functools
import socket
import time
from typing import Any
from urllib.parse import urlsplit

from . import _poll, _queues, _sync, _validate
from ._attempts import CONNECT_TIMEOUT, Reply, SendError, describe_error, unknown_host
from ._config import Settings, check_lease
from ._exceptions import StatementError
from ._models import Lease
from ._statements import Statements

#: the most an answer may hold (a dead-letter page of 10,000 large events fits)
MAX_ANSWER = 256 * 1024 * 1024


class _Headers(dict):
    """Response headers, looked up without regard to case."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


class SocketSession:
    """A :class:`~rqueue._sync.Session` of one HTTP/1.0 exchange per request."""

    def __init__(self, settings: Settings) -> None:
        self._auth = ""
        if settings.credentials is not None:
            pair = ":".join(settings.credentials.as_tuple()).encode()
            self._auth = f"Authorization: Basic {base64.b64encode(pair).decode()}\r\n"
        self._settings = settings
        self._tls: Any = None

    def _context(self) -> Any:
        if self._tls is None:
            import ssl  # only for https nodes

            s = self._settings
            self._tls = ssl.create_default_context(cafile=s.options.ca_bundle)
            if not s.options.verify:
                self._tls.check_hostname = False
                self._tls.verify_mode = ssl.CERT_NONE
        return self._tls

    def request(
        self, method: str, url: str, path: str, body: bytes | None, timeout: float
    ) -> Reply:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:  # a failure here: certainly nothing was sent
            sock = socket.create_connection((host, port), timeout=min(CONNECT_TIMEOUT, timeout))
            if parts.scheme == "https":
                sock = self._context().wrap_socket(sock, server_hostname=host)
        except OSError as exc:
            unknown = unknown_host(exc)
            raise SendError(describe_error(exc), sent=False, unknown_host=unknown) from exc
        payload = body or b""
        head = (
            f"{method} {path} HTTP/1.0\r\nHost: {parts.netloc.rpartition('@')[2]}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
            f"{self._auth}\r\n"
        )
        try:
            sock.settimeout(timeout)
            sock.sendall(head.encode("latin-1") + payload)
            return _read_answer(sock)
        except (OSError, ValueError) as exc:
            raise SendError(describe_error(exc), sent=True) from exc
        finally:
            sock.close()

    def close(self) -> None:
        """Nothing is kept open between calls."""


def _read_answer(sock: socket.socket) -> Reply:
    """Read one HTTP answer: status line, headers, then the body to its length or EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ValueError("the server closed the connection before answering")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    version, _, status = lines[0].partition(" ")
    if not version.startswith("HTTP/"):
        raise ValueError(f"not an HTTP answer: {lines[0][:80]!r}")
    headers = _Headers()
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise ValueError("the server chunked its answer to an HTTP/1.0 request")
    length = headers.get("content-length")
    want = int(length) if length is not None else MAX_ANSWER
    chunks = [rest]
    got = len(rest)
    while got < want:
        chunk = sock.recv(min(1 << 20, want - got))
        if not chunk:
            if length is not None:
                raise ValueError(f"the answer ended after {got} of {want} bytes")
            break
        chunks.append(chunk)
        got += len(chunk)
    text = b"".join(chunks).decode("utf-8", "replace")
    return Reply(int(status.split()[0]), text, headers)


class CliQueue(_sync.Admin):
    """The operator's API (:class:`~rqueue._sync.Admin`) driven over :class:`SocketSession`,
    each call sent alone.

    Connecting reads ``/status`` (the version decides the protocol) and creates nothing.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = self._settings = settings
        self._session = SocketSession(settings)
        self._endpoints = settings.endpoints()
        try:
            deadline = time.monotonic() + settings.options.timeout
            server = _sync.detect(self._session, self._endpoints, deadline, settings)
            self._core = settings.core(server, Statements)
        except BaseException:
            self._session.close()
            raise

    def publish(
        self,
        group_id: str,
        event: str,
        priority: int = 0,
        dedup_id: str | None = None,
        delay: float = 0.0,
    ) -> int:
        """Append the JSON text ``event`` to ``group_id`` (sent alone), deliverable
        ``delay`` seconds from now; its seq. Where the default queue's tables are missing
        (a new database), opens it as ``from_url`` does (creating or migrating its schema)
        and publishes again: nothing was written by the refused request. A named queue
        must exist (:class:`~rqueue.QueueNotFound`): it is created on purpose."""
        group_id, priority, dedup_id, delay = _validate.publish_args(
            group_id, priority, dedup_id, delay
        )
        event = _validate.event(event)
        publish = functools.partial(self._core.publish, group_id, event, priority, dedup_id, delay)
        try:
            return self._drive(publish())
        except StatementError as exc:
            if "no such table" not in str(exc):
                raise
        self._drive(self._core.open(create=False))
        return self._drive(publish())

    def create(self) -> bool:
        """Create the queue of the settings (``queues create``), or check the schema of
        one that exists, as ``from_url(create=True)`` does; whether it existed before."""
        existed = self._drive(_queues.exists(self._core))
        self._drive(self._core.open(create=True))
        return existed

    def claim(
        self, worker_id: str, visibility: float, min_priority: int = 0, *, wait: float = 0.0
    ) -> Lease | None:
        """Lease the next deliverable message (waiting up to ``wait`` seconds, polling as
        a transport's waiting claim does), or None."""
        worker_id, visibility, min_priority = _validate.claim_args(
            worker_id, visibility, min_priority
        )

        def once() -> Lease | None:
            return self._drive(self._core.claim(worker_id, visibility, min_priority))

        if wait:
            return _poll.Poller().run(once, min_priority, wait)
        return once()

    def ack(self, lease: Lease) -> None:
        """Delete the leased message; :class:`~rqueue.LeaseLost` if no longer held."""
        self._drive(self._core.ack(check_lease(lease, self._core)))

    def nack(self, lease: Lease, delay: float = 0.0, error: str | None = None) -> None:
        """Give the message back now, or parked for ``delay`` seconds, with ``error``."""
        lease = check_lease(lease, self._core)
        delay = _validate.seconds("delay", delay, allow_zero=True)
        self._drive(self._core.nack(lease, delay, _validate.error_text(error)))

    def close(self) -> None:
        self._session.close()
