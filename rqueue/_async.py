"""``AsyncRqliteTransport``: the queue over ``httpx.AsyncClient`` (only sends and receives)."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlencode

import httpx

from . import _validate
from ._attempts import CONNECT_TIMEOUT, Attempts, Reply, SendError, describe_error
from ._config import STATUS_CALL, Settings, check_lease, publish_items
from ._core import DEFAULT_DEDUP_TTL, Op, QueueCore
from ._endpoints import Endpoints
from ._exceptions import RqueueError, TransportClosed
from ._models import Call, Lease, Result
from ._statements import DEFAULT_CLOCK_TOLERANCE, Statements
from ._version import ServerInfo

#: httpx errors raised before the request could reach a server (a failed TLS
#: handshake is a ``ConnectError`` too)
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_JSON = {"Content-Type": "application/json"}


class _Client:
    """One ``httpx.AsyncClient`` (a keep-alive pool per node) behind the small interface
    both twins' I/O layers share: ``request(...) -> Reply``, raising :class:`SendError`."""

    def __init__(self, settings: Settings) -> None:
        verify: bool | ssl.SSLContext = settings.verify
        if settings.ca_bundle:
            verify = ssl.create_default_context(cafile=settings.ca_bundle)
        self._client = httpx.AsyncClient(
            auth=settings.credentials.as_tuple() if settings.credentials else None,
            verify=verify,
            trust_env=False,  # no proxies or .netrc from the environment
            follow_redirects=False,
            headers=_JSON,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )

    async def request(
        self,
        method: str,
        url: str,
        path: str,
        body: bytes | None,
        timeout: float,
        connect_timeout: float,
    ) -> Reply:
        try:
            response = await self._client.request(
                method,
                url + path,
                content=body,
                timeout=httpx.Timeout(timeout, connect=connect_timeout),
            )
        except httpx.HTTPError as exc:
            raise SendError(describe_error(exc), sent=not isinstance(exc, _NOT_SENT)) from exc
        return Reply(response.status_code, response.text, response.headers)

    async def aclose(self) -> None:
        await self._client.aclose()


class AsyncRqliteTransport:
    """The asyncio twin of :class:`~rqueue.RqliteTransport`: same methods, awaited.

    Create it with ``await AsyncRqliteTransport.from_url(...)``. ``statements_class``
    is the hook for mutant subjects (see :mod:`rqueue._statements`).
    """

    statements_class: type[Statements] = Statements

    def __init__(self, settings: Settings, client: _Client, core: QueueCore) -> None:
        self._settings = settings
        self._client = client
        self._endpoints = settings.endpoints()
        self._core = core
        self._closed = False

    @classmethod
    async def from_url(
        cls,
        url: str | Iterable[str],
        *,
        timeout: float = 30.0,
        request_timeout: float = 10.0,
        auth: tuple[str, str] | None = None,
        verify: bool = True,
        ca_bundle: str | None = None,
        read_consistency: str = "strong",
        clock: Callable[[], float] | None = None,
        server_clock: bool | None = None,
        clock_tolerance: float = DEFAULT_CLOCK_TOLERANCE,
        assume_version: str | None = None,
        dedup_ttl: float = DEFAULT_DEDUP_TTL,
    ) -> AsyncRqliteTransport:
        """Connect, create the schema, return; see :meth:`RqliteTransport.from_url`."""
        settings = Settings.build(
            url,
            timeout=timeout,
            request_timeout=request_timeout,
            auth=auth,
            verify=verify,
            ca_bundle=ca_bundle,
            read_consistency=read_consistency,
            clock=clock,
            server_clock=server_clock,
            clock_tolerance=clock_tolerance,
            assume_version=assume_version,
            dedup_ttl=dedup_ttl,
        )
        client = _Client(settings)
        try:
            endpoints = settings.endpoints()
            deadline = time.monotonic() + settings.timeout
            server = await _detect(
                client, endpoints, deadline, settings.request_timeout, settings.timeout
            )
            core = settings.core(server, cls.statements_class)
            self = cls(settings, client, core)
            self._endpoints = endpoints
            await self._drive(core.open(), deadline)
        except BaseException:
            await client.aclose()
            raise
        return self

    # -- the queue ----------------------------------------------------------------------
    async def publish(
        self, group_id: str, event: Any, priority: int = 0, dedup_id: str | None = None
    ) -> int:
        """Append ``event`` to ``group_id``; return its seq. ``dedup_id``: at most once."""
        core = self._open()
        group_id = _validate.text("group_id", group_id)
        text = _validate.event(event)
        priority = _validate.priority("priority", priority)
        dedup_id = _validate.optional_text("dedup_id", dedup_id)
        return await self._drive(core.publish(group_id, text, priority, dedup_id))

    async def publish_many(self, items: Iterable[tuple[Any, ...]]) -> list[int]:
        """Publish ``(group_id, event[, priority])`` items atomically in one request."""
        core = self._open()
        return await self._drive(core.publish_many(publish_items(items)))

    async def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> Lease | None:
        """Lease the next deliverable message for ``visibility`` seconds, or None."""
        core = self._open()
        worker_id = _validate.text("worker_id", worker_id)
        visibility = _validate.seconds("visibility", visibility, allow_zero=False)
        min_priority = _validate.priority("min_priority", min_priority)
        return await self._drive(core.claim(worker_id, visibility, min_priority))

    async def ack(self, lease: Lease) -> None:
        """Delete the leased message; :class:`~rqueue.LeaseLost` if no longer held."""
        core = self._open()
        await self._drive(core.ack(check_lease(lease, core)))

    async def nack(self, lease: Lease, delay: float = 0) -> None:
        """Give the message back now (``delay == 0``) or park it for ``delay`` seconds."""
        core = self._open()
        lease = check_lease(lease, core)
        delay = _validate.seconds("delay", delay, allow_zero=True)
        await self._drive(core.nack(lease, delay))

    async def extend(self, lease: Lease, visibility: float) -> None:
        """Keep the lease for ``visibility`` more seconds from now (a heartbeat)."""
        core = self._open()
        lease = check_lease(lease, core)
        visibility = _validate.seconds("visibility", visibility, allow_zero=False)
        await self._drive(core.extend(lease, visibility))

    async def close(self) -> None:
        """Close the HTTP connections; later calls raise :class:`~rqueue.TransportClosed`."""
        if not self._closed:
            self._closed = True
            await self._client.aclose()

    @property
    def server(self) -> ServerInfo:
        """The server's version and the features in use."""
        return self._core.server

    async def __aenter__(self) -> AsyncRqliteTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"{type(self).__name__}(urls={list(self._settings.urls)!r}, "
            f"server={self._core.server.version!r}, {state})"
        )

    # -- driving the core ---------------------------------------------------------------
    def _open(self) -> QueueCore:
        if self._closed:
            raise TransportClosed(f"{type(self).__name__} is closed")
        return self._core

    async def _drive(self, op: Op[Any], deadline: float | None = None) -> Any:
        if deadline is None:
            deadline = time.monotonic() + self._settings.timeout
        try:
            call = next(op)
            while True:
                try:
                    results = await self._send(call, deadline)
                except RqueueError as exc:
                    call = op.throw(exc)
                else:
                    call = op.send(results)
        except StopIteration as stop:
            return stop.value

    async def _send(self, call: Call, deadline: float) -> tuple[Result, ...]:
        attempts = Attempts(
            call,
            self._endpoints,
            deadline,
            self._settings.request_timeout,
            limit=self._settings.timeout,
        )
        path = f"{call.path}?{urlencode(call.query)}" if call.query else call.path
        body = json.dumps(call.body()).encode()
        while True:
            url, timeout = attempts.next()
            probe = attempts.probe(url)
            if probe is not None and not await self._probe(attempts, url, probe):
                pause = attempts.pause()
                if pause:
                    await asyncio.sleep(pause)
                continue
            try:
                response = await self._client.request(
                    "POST", url, path, body, timeout, min(CONNECT_TIMEOUT, timeout)
                )
            except SendError as exc:
                if exc.sent:
                    attempts.maybe_sent(url, str(exc))
                else:
                    attempts.not_sent(url, str(exc))
            else:
                results = attempts.answered(url, response.status, response.text)
                if results is not None:
                    return results
            pause = attempts.pause()
            if pause:
                await asyncio.sleep(pause)

    async def _probe(self, attempts: Attempts, url: str, timeout: float) -> bool:
        """Ask a node we fail over to whether it is ready, before sending it the call."""
        try:
            response = await self._client.request("GET", url, "/readyz", None, timeout, timeout)
        except SendError as exc:
            attempts.not_sent(url, f"not ready (GET /readyz: {exc})")
            return False
        return attempts.probe_answered(url, response.status, response.text)


async def _detect(
    client: _Client,
    endpoints: Endpoints,
    deadline: float,
    request_timeout: float,
    limit: float,
) -> ServerInfo:
    """Ask nodes for ``/status`` until one answers; its version decides the protocol."""
    attempts = Attempts(STATUS_CALL, endpoints, deadline, request_timeout, limit=limit)
    while True:
        url, timeout = attempts.next()
        try:
            response = await client.request(
                "GET", url, "/status", None, timeout, min(CONNECT_TIMEOUT, timeout)
            )
            body = json.loads(response.text) if response.status == 200 else None
        except SendError as exc:
            attempts.not_sent(url, str(exc))
        except ValueError as exc:
            attempts.not_sent(url, describe_error(exc))
        else:
            server = attempts.status_answered(url, response.status, response.headers, body)
            if server is not None:
                return server
        pause = attempts.pause()
        if pause:
            await asyncio.sleep(pause)
