"""``AsyncRqliteTransport``: the queue over httpx's async transport (only sends and receives)."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpx

from . import _admin, _batch, _validate
from ._attempts import CONNECT_TIMEOUT, Attempts, Reply, SendError, describe_error
from ._config import STATUS_CALL, Settings, check_lease, publish_items
from ._core import DEFAULT_DEDUP_TTL, Op, QueueCore
from ._endpoints import Endpoints
from ._exceptions import RqueueError, TransportClosed
from ._models import Call, DeadLetter, Lease, Result
from ._statements import DEFAULT_CLOCK_TOLERANCE, Statements
from ._version import ServerInfo

#: httpx errors raised before the request could reach a server (a failed TLS
#: handshake is a ``ConnectError`` too)
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_JSON = {"Content-Type": "application/json"}


class _Client:
    """One httpx transport (a keep-alive pool per node) behind the small interface both
    twins' I/O layers share: ``request(...) -> Reply``, raising :class:`SendError`.

    Requests go straight to the transport: ``AsyncClient.request`` would merge client
    settings, cookies and auth into every request, which costs more CPU than the rest
    of a claim. Nothing of that applies here (no proxies, no cookies, no redirects), and
    the headers, auth included, are fixed at start.
    """

    def __init__(self, settings: Settings) -> None:
        verify: bool | ssl.SSLContext = settings.verify
        if settings.ca_bundle:
            verify = ssl.create_default_context(cafile=settings.ca_bundle)
        self._transport = httpx.AsyncHTTPTransport(
            verify=verify,
            trust_env=False,  # no proxies or .netrc from the environment
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )
        self._headers = dict(_JSON)
        if settings.credentials is not None:
            pair = ":".join(settings.credentials.as_tuple()).encode()
            self._headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")

    async def request(
        self,
        method: str,
        url: str,
        path: str,
        body: bytes | None,
        timeout: float,
        connect_timeout: float,
    ) -> Reply:
        request = httpx.Request(
            method,
            url + path,  # already a clean URL (parse_urls) and an encoded path
            content=body,
            headers=self._headers,
            extensions={"timeout": httpx.Timeout(timeout, connect=connect_timeout).as_dict()},
        )
        try:
            response = await self._transport.handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            raise SendError(describe_error(exc), sent=not isinstance(exc, _NOT_SENT)) from exc
        return Reply(response.status_code, response.text, response.headers)

    async def aclose(self) -> None:
        await self._transport.aclose()


class _Merger:
    """Group commit for one transport's tasks (see :mod:`rqueue._batch`): a task whose
    call arrives during another's merged request waits, then the oldest waiting task
    sends every waiting call as one request and hands each its results. Everything
    runs on the transport's event loop, so the coalescer needs no lock."""

    def __init__(
        self, send: Callable[[list[_batch.Waiting], float], Awaitable[list[_batch.Settled]]]
    ) -> None:
        self._send = send
        self.coalescer = _batch.Coalescer()

    async def run(self, call: Call, deadline: float, request_timeout: float) -> _batch.Settled:
        if not self.coalescer.accepting(time.monotonic()):
            return _batch.Alone("merging paused after a failed statement")
        item = _batch.Waiting(
            call, deadline, handle=asyncio.Event(), fragment=_batch.fragment(call)
        )
        batch = self.coalescer.arrive(item)
        if batch is None:
            try:
                settled = await self._wait(item, deadline, request_timeout)
            except asyncio.CancelledError:
                self._abandon(item)
                raise
            if settled is not None:
                return settled
            batch = item.batch
            assert batch is not None
        return await self._flush(item, batch)

    async def _wait(
        self, item: _batch.Waiting, deadline: float, request_timeout: float
    ) -> _batch.Settled | None:
        """Wait to be settled (returned) or made the sender of a batch (None)."""
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
        # arrives as the event is set, and a cancelled task would go on to send its batch
        try:
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                await item.handle.wait()
        except TimeoutError:
            if self.coalescer.withdraw(item):
                return _batch.Alone("no time left while waiting to be merged")
            # taken into a batch: its one exchange is bounded by the request timeout
            bound = request_timeout + _batch.SETTLE_MARGIN
            try:
                async with asyncio.timeout(bound):
                    await item.handle.wait()
            except TimeoutError:
                return _batch.no_word(item, bound)
        return None if item.batch is not None else item.settled

    def _abandon(self, item: _batch.Waiting) -> None:
        """A waiting task was cancelled: leave the queue, or pass on the turn it got."""
        if self.coalescer.withdraw(item) or item.batch is None:
            return
        # made the sender just before the cancellation: nothing of its batch was sent
        self._settle(item, item.batch, _batch.stopped_sender(item.batch, sent=False))

    async def _flush(self, item: _batch.Waiting, batch: list[_batch.Waiting]) -> _batch.Settled:
        """Send ``batch`` (``item`` is ours), settle the others, pass the turn on."""
        settled: list[_batch.Settled] | None = None
        try:
            settled = await self._send(batch, _batch.deadline_of(batch))
        finally:
            if settled is None:  # cancelled: the request may have gone out
                settled = _batch.stopped_sender(batch, sent=True)
            self._settle(item, batch, settled)
        return settled[batch.index(item)]

    def _settle(
        self, item: _batch.Waiting, batch: list[_batch.Waiting], settled: list[_batch.Settled]
    ) -> None:
        for w in self.coalescer.conclude(batch, settled, item, time.monotonic()):
            w.handle.set()


class AsyncRqliteTransport(_admin.AsyncAdmin):
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
        self._merger = _Merger(self._send_merged)

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
        max_deliveries: int | None = None,
        on_dead_letter: Callable[[DeadLetter], None] | None = None,
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
            max_deliveries=max_deliveries,
            on_dead_letter=on_dead_letter,
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
        worker_id, visibility, min_priority = _validate.claim_args(
            worker_id, visibility, min_priority
        )
        return await self._drive(core.claim(worker_id, visibility, min_priority))

    async def ack(self, lease: Lease) -> None:
        """Delete the leased message; :class:`~rqueue.LeaseLost` if no longer held."""
        core = self._open()
        await self._drive(core.ack(check_lease(lease, core)))

    async def ack_and_claim(
        self, lease: Lease, worker_id: str, visibility: float, min_priority: int = 0
    ) -> Lease | None:
        """Ack ``lease`` and claim the next message, in one request where the server allows.

        As ``ack`` then ``claim``, but one Raft entry: the claim runs only if the ack
        took effect. Errors are the ack's (nothing claimed) unless ``exc.acked`` is True.
        """
        core = self._open()
        lease = check_lease(lease, core)
        worker_id, visibility, min_priority = _validate.claim_args(
            worker_id, visibility, min_priority
        )
        return await self._drive(core.ack_and_claim(lease, worker_id, visibility, min_priority))

    async def nack(self, lease: Lease, delay: float = 0, error: str | None = None) -> None:
        """Give the message back now (``delay == 0``) or park it for ``delay`` seconds."""
        core = self._open()
        lease = check_lease(lease, core)
        delay = _validate.seconds("delay", delay, allow_zero=True)
        await self._drive(core.nack(lease, delay, _admin.error_text(error)))

    async def extend(self, lease: Lease, visibility: float) -> Lease:
        """Keep the lease for ``visibility`` more seconds from now (a heartbeat).

        Returns the extended lease: a new :class:`~rqueue.Lease` (same message and token)
        whose ``expires_at`` is the new deadline (None if the extend applied but the
        deadline could not be read back); ``lease`` itself is left unchanged. Either
        settles the message. :class:`~rqueue.LeaseLost` if the lease was no longer held.
        """
        core = self._open()
        lease = check_lease(lease, core)
        visibility = _validate.seconds("visibility", visibility, allow_zero=False)
        return await self._drive(core.extend(lease, visibility))

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
                    call = op.send(call.for_caller(results))
        except StopIteration as stop:
            return stop.value

    async def _send(self, call: Call, deadline: float) -> tuple[Result, ...]:
        if call.mergeable:
            settled = await self._merger.run(call, deadline, self._settings.request_timeout)
            if isinstance(settled, _batch.Done):
                return settled.results
            if isinstance(settled, _batch.Failed):
                raise settled.error
        return await self._send_alone(call, deadline)

    async def _send_merged(
        self, batch: list[_batch.Waiting], deadline: float
    ) -> list[_batch.Settled]:
        """One try of ``batch``'s calls as one request, to the node that answered last."""
        ex = _batch.exchange(
            batch, self._endpoints, self._settings.request_timeout, deadline - time.monotonic()
        )
        if isinstance(ex, list):
            return ex
        try:
            reply = await self._client.request(
                "POST", ex.url, ex.path, ex.body, ex.timeout, min(CONNECT_TIMEOUT, ex.timeout)
            )
        except SendError as exc:
            return ex.failed(str(exc), exc.sent)
        return ex.answered(reply.status, reply.text)

    async def _send_alone(self, call: Call, deadline: float) -> tuple[Result, ...]:
        attempts = Attempts(
            call,
            self._endpoints,
            deadline,
            self._settings.request_timeout,
            limit=self._settings.timeout,
        )
        path, body = _batch.request_target(call)
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
