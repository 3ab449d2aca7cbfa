"""``AsyncRqliteTransport``: the asyncio twin's own parts, written by hand: the HTTP
session over httpx's async transport, and the merger (group commit) on one event loop.
The rest is :class:`rqueue._async.AsyncTransport`, shared with the blocking twin."""

from __future__ import annotations

import asyncio
import base64
import ssl
import time

import httpx

from . import _async, _batch
from ._attempts import CONNECT_TIMEOUT, Reply, SendError, describe_error, unknown_host
from ._config import Settings
from ._models import HttpCall

#: httpx errors raised before the request could reach a server (a failed TLS
#: handshake is a ``ConnectError`` too)
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_JSON = {"Content-Type": "application/json"}


class _Client:
    """One httpx transport (a keep-alive pool per node): the twin's
    :class:`~rqueue._async.AsyncSession`.

    Requests go straight to the transport: ``AsyncClient.request`` would merge client
    settings, cookies and auth into every request, which costs more CPU than the rest
    of a claim. Nothing of that applies here (no proxies, no cookies, no redirects), and
    the headers, auth included, are fixed at start.
    """

    def __init__(self, settings: Settings) -> None:
        verify: bool | ssl.SSLContext = settings.options.verify
        if settings.options.ca_bundle:
            verify = ssl.create_default_context(cafile=settings.options.ca_bundle)
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
        self, method: str, url: str, path: str, body: bytes | None, timeout: float
    ) -> Reply:
        timeouts = httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT, timeout))
        request = httpx.Request(
            method,
            url + path,  # already a clean URL (parse_urls) and an encoded path
            content=body,
            headers=self._headers,
            extensions={"timeout": timeouts.as_dict()},
        )
        try:
            response = await self._transport.handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            sent, unknown = not isinstance(exc, _NOT_SENT), unknown_host(exc)
            raise SendError(describe_error(exc), sent=sent, unknown_host=unknown) from exc
        return Reply(response.status_code, response.text, response.headers)

    async def aclose(self) -> None:
        await self._transport.aclose()


class _Merger:
    """Group commit for one transport's tasks (see :mod:`rqueue._batch`): a task whose
    call arrives during another's merged request waits, then the oldest waiting task
    sends every waiting call as one request and hands each its results. Everything
    runs on the transport's event loop, so the coalescer needs no lock."""

    def __init__(self, send: _batch.AsyncSendBatch) -> None:
        self._send = send
        self.coalescer = _batch.Coalescer()

    async def run(self, call: HttpCall, deadline: float, request_timeout: float) -> _batch.Settled:
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


class AsyncRqliteTransport(_async.AsyncTransport):
    """The asyncio twin of :class:`~rqueue.RqliteTransport`: same methods, awaited.

    Create it with ``await AsyncRqliteTransport.from_url(...)``. ``statements_class``
    is the hook for mutant subjects (see :mod:`rqueue._statements`).
    """

    _session_class = _Client
    _merger_class = _Merger
