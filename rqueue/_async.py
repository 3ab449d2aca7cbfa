"""The twins' I/O, written once: sending the core's calls over an HTTP session.

Written for asyncio in ``rqueue/_async.py``; ``scripts/unasync.py`` writes the blocking
twin, ``rqueue/_sync.py``, from it (``async``/``await`` dropped, the ``Async`` names
replaced by an explicit table), and a lint test fails when that file is stale. What
differs by nature stays hand-written per twin (``rqueue/_async_http.py``,
``rqueue/_sync_http.py``): the HTTP session over the twin's library, and the merger
(group commit: tasks on one loop, or threads and a lock). Everything here only sends,
waits and hands back; the decisions are the core's and :class:`~rqueue._attempts.Attempts`'s.
No HTTP library is imported here, so the admin CLI, which drives the blocking twin's
:class:`Admin` over a plain socket, starts without one.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Protocol, Self

from . import _admin, _batch, _many, _options, _poll, _queues, _validate
from ._attempts import Attempts, Reply, SendError, describe_error
from ._config import STATUS_CALL, Settings, check_lease, publish_items
from ._core import DEFAULT_DEDUP_TTL, QueueCore
from ._endpoints import Endpoints
from ._exceptions import RqueueError, TransportClosed
from ._models import DeadLetter, HttpCall, Lease, Op, QueuedMessage, Result, Stats
from ._statements import DEFAULT_CLOCK_TOLERANCE, Statements
from ._version import ServerInfo
from ._zone import ZoneGuard


class AsyncSession(Protocol):
    """An HTTP session (a keep-alive pool per node): one exchange per ``request``, which
    raises :class:`~rqueue._attempts.SendError` saying whether the request may have
    reached the server."""

    async def request(
        self, method: str, url: str, path: str, body: bytes | None, timeout: float
    ) -> Reply: ...

    async def aclose(self) -> None: ...


class AsyncMerger(Protocol):
    """Group commit (:mod:`rqueue._batch`): sends a mergeable call with the calls that
    arrive meanwhile, as one request, or says to send it alone."""

    coalescer: _batch.Coalescer

    async def run(
        self, call: HttpCall, deadline: float, request_timeout: float
    ) -> _batch.Settled: ...


class AsyncAdmin:
    """The operator's API (``stats``, ``peek``, the dead-letter queue), and the loop that
    drives the core's operations over ``_session``: shared by the transports and the
    admin CLI. A subclass sets the attributes below."""

    _settings: Settings
    _session: AsyncSession
    _endpoints: Endpoints
    _core: QueueCore

    def _open(self) -> QueueCore:
        """The core, for a new operation."""
        return self._core

    async def stats(self) -> Stats:
        """Messages ready, leased, parked and dead-lettered, groups, the oldest ready
        message's age, by priority: from counters and indexes, cheap enough to poll."""
        return await self._drive(_admin.stats(self._open()))

    async def peek(self, group_id: str, limit: int = 20) -> list[QueuedMessage]:
        """The first ``limit`` messages of ``group_id`` in order, with their state."""
        core = self._open()
        op = _admin.peek(core, _validate.text("group_id", group_id), _validate.limit(limit))
        return await self._drive(op)

    async def dead_letters(
        self, group_id: str | None = None, *, after: int = 0, limit: int = 100
    ) -> list[DeadLetter]:
        """Dead-lettered messages in seq order (of one group, if given), after seq ``after``."""
        core = self._open()
        group = None if group_id is None else _validate.text("group_id", group_id)
        after = _validate.seq("after", after, allow_zero=True)
        return await self._drive(_admin.dead_letters(core, group, after, _validate.limit(limit)))

    async def redrive(
        self, seq: int | None = None, *, group_id: str | None = None, all: bool = False
    ) -> int:
        """Put dead letters back at the tail of their groups (one by ``seq``, a group, or
        ``all=True``) as new messages; returns how many."""
        core = self._open()
        return await self._drive(_admin.redrive(core, *_validate.selection(seq, group_id, all)))

    async def purge(
        self, seq: int | None = None, *, group_id: str | None = None, all: bool = False
    ) -> int:
        """Delete dead letters (one by ``seq``, a group, or ``all=True``); returns how many."""
        core = self._open()
        return await self._drive(_admin.purge(core, *_validate.selection(seq, group_id, all)))

    async def queues(self) -> list[_queues.QueueInfo]:
        """Every queue of the database (:mod:`rqueue._queues`), by name, each with its
        depth (``QueueInfo.stats``, as its own ``stats()`` says; one read for all)."""
        return await self._drive(_queues.list_queues(self._open()))

    # -- driving the core ---------------------------------------------------------------
    async def _drive(self, op: Op[Any], deadline: float | None = None) -> Any:
        """Run one operation of the core: send each call it yields, hand back its results
        (or its error), until it returns; within ``timeout`` unless given a deadline."""
        if deadline is None:
            deadline = time.monotonic() + self._settings.options.timeout
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

    async def _send(self, call: HttpCall, deadline: float) -> tuple[Result, ...]:
        return await self._send_alone(call, deadline)

    async def _send_alone(self, call: HttpCall, deadline: float) -> tuple[Result, ...]:
        """Send ``call`` by itself, failing over between nodes as :class:`Attempts`
        decides; a node failed over to is asked ``/readyz`` first."""
        s = self._settings
        attempts = Attempts(
            call,
            self._endpoints,
            deadline,
            s.options.request_timeout,
            limit=s.options.timeout,
            zone=self._zone,
        )
        while True:
            url, timeout = attempts.next()
            probe = attempts.probe(url)
            if probe is not None and not await self._probe(attempts, url, probe):
                await _pause(attempts)
                continue
            if attempts.zone_check_due(url) and not await self._check_zone(attempts, url, timeout):
                await _pause(attempts)
                continue
            path, body = attempts.target()
            try:
                reply = await self._session.request("POST", url, path, body, timeout)
            except SendError as exc:
                if exc.sent:
                    attempts.maybe_sent(url, str(exc))
                else:
                    attempts.not_sent(url, str(exc))
            else:
                results = attempts.answered(url, reply.status, reply.text)
                if results is not None:
                    return results
            await _pause(attempts)

    async def _check_zone(self, attempts: Attempts, url: str, timeout: float) -> bool:
        """Measure the time zone of a node before its first timed call (rqueue._zone)."""
        path, body = attempts.zone_check()
        try:
            reply = await self._session.request("POST", url, path, body, timeout)
        except SendError as exc:
            attempts.not_sent(url, f"time zone check: {exc}")
            return False
        return attempts.zone_answered(url, reply.status, reply.text)

    @property
    def _zone(self) -> ZoneGuard | None:
        return self._core.zone

    async def _probe(self, attempts: Attempts, url: str, timeout: float) -> bool:
        """Ask a node we fail over to whether it is ready, before sending it the call."""
        try:
            reply = await self._session.request("GET", url, "/readyz", None, timeout)
        except SendError as exc:
            attempts.not_sent(url, f"not ready (GET /readyz: {exc})")
            return False
        return attempts.probe_answered(url, reply.status, reply.text)


class AsyncTransport(AsyncAdmin):
    """The queue's API over a session and a merger. A twin's transport class names them
    (``_session_class``, ``_merger_class``); ``statements_class`` is the hook for mutant
    subjects: a :class:`~rqueue.Statements` subclass that overrides one builder (see
    :mod:`rqueue._statements`)."""

    statements_class: type[Statements] = Statements
    _session_class: ClassVar[Callable[[Settings], AsyncSession]]
    _merger_class: ClassVar[Callable[[_batch.AsyncSendBatch], AsyncMerger]]

    def __init__(self, settings: Settings, session: AsyncSession, core: QueueCore) -> None:
        self._settings = settings
        self._session = session
        self._endpoints = settings.endpoints()
        self._core = core
        self._closed = False
        self._merger = self._merger_class(self._send_merged)
        self._poller = _poll.AsyncPoller()

    @classmethod
    @_options.documented
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
        queue: str | None = None,
        on_dead_letter: Callable[[DeadLetter], None] | None = None,
        max_age: float | None = None,
        create: bool = False,
    ) -> Self:
        """Connect to the nodes in ``url`` (one URL, comma-separated URLs, or a list),
        create the schema if absent, register the queue, return.

        ``queue``: the name of one of the database's queues (each with its own groups,
        FIFO and dead letters); None or ``"default"``: the queue of the tables without a
        prefix, the one of earlier releases, created when absent. A named queue is created
        on purpose: with ``create=True`` (or ``python -m rqueue queues create NAME``);
        without, one that does not exist raises :class:`~rqueue.QueueNotFound` naming it.

        Retries for at most ``timeout`` seconds in all until a node answers and the
        cluster has a leader; then raises :class:`~rqueue.Unavailable` naming the URLs
        and the last failure. Lease times come from the server's stamp (rqlite >= 8.33)
        or, on servers without time rewriting or with ``server_clock=False``, from the
        leader's clock read over HTTP and advanced by this process's monotonic clock.
        Every option is checked before anything is sent; an error names it.
        """
        # the signature above is rqueue._options' declaration (tests/rqueue/test_options.py)
        settings = Settings.build(url, **_options.given(locals()))
        session = cls._session_class(settings)
        try:
            endpoints = settings.endpoints()
            deadline = time.monotonic() + settings.options.timeout
            server = await detect(session, endpoints, deadline, settings)
            core = settings.core(server, cls.statements_class)
            self = cls(settings, session, core)
            self._endpoints = endpoints
            await self._drive(core.open(create=settings.options.create), deadline)
        except BaseException:
            await session.aclose()
            raise
        return self

    # -- the queue ----------------------------------------------------------------------
    async def publish(
        self,
        group_id: str,
        event: Any,
        priority: int = 0,
        dedup_id: str | None = None,
        *,
        delay: float = 0,
    ) -> int:
        """Append ``event`` to ``group_id``; return its seq. ``dedup_id``: at most once.

        ``delay`` (seconds): not deliverable before then, by the store's lease clock; a
        delayed message at its group's head holds the group back, as a parked one does.
        """
        core = self._open()
        text = _validate.event(event)
        group_id, priority, dedup_id, delay = _validate.publish_args(
            group_id, priority, dedup_id, delay
        )
        seq = await self._drive(core.publish(group_id, text, priority, dedup_id, delay))
        if not delay:
            self._poller.kick()  # a delayed message is no news until it is due
        return seq

    async def publish_many(self, items: Iterable[tuple[Any, ...]]) -> list[int]:
        """Publish ``(group_id, event[, priority[, delay]])`` items atomically in one
        request (``delay`` as in :meth:`publish`)."""
        core = self._open()
        checked = publish_items(items)
        seqs = await self._drive(core.publish_many(checked))
        if any(not delay for *_, delay in checked):
            self._poller.kick()
        return seqs

    async def claim(
        self, worker_id: str, visibility: float, min_priority: int = 0, *, wait: float = 0
    ) -> Lease | None:
        """Lease the next deliverable message for ``visibility`` seconds, or None.

        ``wait`` (seconds): long polling. Return as soon as a message is deliverable to
        this caller, or None when ``wait`` runs out; the waiting callers of a transport
        share their polls (:mod:`rqueue._poll`).
        """
        core = self._open()
        worker_id, visibility, min_priority = _validate.claim_args(
            worker_id, visibility, min_priority
        )
        if _validate.seconds("wait", wait, allow_zero=True):
            return await self._poller.run(
                lambda: self._drive(core.claim(worker_id, visibility, min_priority)),
                min_priority,
                wait,
            )
        return await self._drive(core.claim(worker_id, visibility, min_priority))

    async def claim_many(
        self, worker_id: str, visibility: float, max_messages: int = 10, min_priority: int = 0
    ) -> list[Lease]:
        """Lease up to ``max_messages`` messages of as many distinct groups (never two of
        one group) in one request, each with its own lease; [] when none is deliverable.
        Each lease is settled on its own (``ack``, ``nack``, ``extend``) or with
        :meth:`ack_many`."""
        core = self._open()
        worker_id, visibility, min_priority = _validate.claim_args(
            worker_id, visibility, min_priority
        )
        n = _batch_size("max_messages", max_messages)
        return await self._drive(_many.claim_many(core, worker_id, visibility, min_priority, n))

    async def ack_many(self, leases: Iterable[Lease]) -> list[RqueueError | None]:
        """Ack every lease in one request, each fenced by its own token. Returns one
        outcome per lease, in order: None (acked), :class:`~rqueue.LeaseLost` (no longer
        held, nothing changed) or :class:`~rqueue.OutcomeUnknown`; raises when the request
        definitely failed (nothing acked), as ``ack`` would."""
        core = self._open()
        checked = [check_lease(lease, core) for lease in leases]
        if not checked:
            return []
        _batch_size("leases", len(checked))
        outcomes = await self._drive(_many.ack_many(core, checked))
        self._poller.kick()  # the groups' next messages may be deliverable now
        first = outcomes[0]
        if first is not None and all(o is first for o in outcomes):
            raise first  # one definite failure of the request: nothing was acked
        return outcomes

    async def ack(self, lease: Lease) -> None:
        """Delete the leased message; :class:`~rqueue.LeaseLost` if no longer held."""
        core = self._open()
        await self._drive(core.ack(check_lease(lease, core)))
        self._poller.kick()  # the group's next message may be deliverable now

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
        """Give the message back now (``delay == 0``) or park it for ``delay`` seconds;
        ``error`` (why) is shown by the dead-letter queue if the message ends there."""
        core = self._open()
        lease = check_lease(lease, core)
        delay = _validate.seconds("delay", delay, allow_zero=True)
        await self._drive(core.nack(lease, delay, _validate.error_text(error)))
        self._poller.kick()

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
            await self._session.aclose()

    @property
    def server(self) -> ServerInfo:
        """The server's version and the features in use."""
        return self._core.server

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"{type(self).__name__}(urls={list(self._settings.urls)!r}, "
            f"server={self._core.server.version!r}, {state})"
        )

    # -- sending ------------------------------------------------------------------------
    def _open(self) -> QueueCore:
        if self._closed:
            raise TransportClosed(f"{type(self).__name__} is closed")
        return self._core

    async def _send(self, call: HttpCall, deadline: float) -> tuple[Result, ...]:
        if call.mergeable:
            settled = await self._merger.run(call, deadline, self._settings.options.request_timeout)
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
            batch,
            self._endpoints,
            self._settings.options.request_timeout,
            deadline - time.monotonic(),
            self._zone,
        )
        if isinstance(ex, list):
            return ex
        try:
            reply = await self._session.request("POST", ex.url, ex.path, ex.body, ex.timeout)
        except SendError as exc:
            return ex.failed(str(exc), exc.sent)
        return ex.answered(reply.status, reply.text)


async def detect(
    session: AsyncSession, endpoints: Endpoints, deadline: float, settings: Settings
) -> ServerInfo:
    """Ask nodes for ``/status`` until one answers; its version decides the protocol.

    Connecting, a node whose host name does not resolve or that is not rqlite is not
    asked again, and when every node is so this fails at once (``Attempts.hopeless``);
    a node that refuses, times out or answers 5xx is asked again until ``deadline``."""
    attempts = Attempts(
        STATUS_CALL,
        endpoints,
        deadline,
        settings.options.request_timeout,
        limit=settings.options.timeout,
    )
    while True:
        url, timeout = attempts.next()
        try:
            reply = await session.request("GET", url, "/status", None, timeout)
            body = json.loads(reply.text) if reply.status == 200 else None
        except SendError as exc:
            if exc.unknown_host:  # connecting: a name never resolved is a misspelt one
                attempts.unresolved(url, exc)
            else:
                attempts.not_sent(url, str(exc))
        except ValueError as exc:  # a whole answer, but not rqlite's JSON
            attempts.not_rqlite(url, f"HTTP 200 without JSON ({describe_error(exc)})")
        else:
            server = attempts.status_answered(url, reply.status, reply.headers, body)
            if server is not None:
                return server
        await _pause(attempts)


def _batch_size(name: str, n: Any) -> int:
    """A checked number of messages for one batch call (1 to :data:`rqueue._many.MAX_BATCH`)."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{name}: expected an int, got {type(n).__name__}")
    if not 1 <= n <= _many.MAX_BATCH:
        raise ValueError(f"{name}: 1 to {_many.MAX_BATCH} messages, got {n}")
    return n


async def _pause(attempts: Attempts) -> None:
    pause = attempts.pause()
    if pause:
        await asyncio.sleep(pause)
