"""rqueue's own core, driven over the simulated network.

A :class:`SimClient` has the methods the workload calls (the transports' names and
arguments, checked by rqueue's own :mod:`rqueue._validate`); each returns a task that
runs the core's operation generator (:class:`rqueue._core.QueueCore`,
:mod:`rqueue._many`: the very generators the sync and async transports drive) and sends
every call it yields as the transports' ``_send_alone`` does, through rqueue's
:class:`~rqueue._attempts.Attempts` (failover, probes, the time zone check, backoff)
on the virtual clock. A transport several workers share merges their concurrent calls
(group commit, :mod:`harness.sim.merger`). Not modelled: long polling (the long pollers
claim as the others do).
"""

from __future__ import annotations

import random
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Protocol

from rqueue import _admin, _batch, _many, _validate
from rqueue._attempts import CONNECT_TIMEOUT, Attempts, Reply, SendError
from rqueue._config import Settings, check_lease
from rqueue._core import QueueCore
from rqueue._exceptions import OutcomeUnknown, RqueueError
from rqueue._models import HttpCall, Lease, Op, Result
from rqueue._statements import Statements
from rqueue._version import ServerInfo

from ..errors import HarnessError
from ..subjects import note_dead_letter
from .loop import Future, Task
from .merger import SimMerger
from .net import CLIENT
from .node import Request, SimNode

#: the rqlite version the simulated nodes follow and the clients detect
VERSION = "10.2.7"


class World(Protocol):
    """What a client needs of the simulation: its clock, network and nodes by URL."""

    loop: Any
    net: Any
    by_url: dict[str, SimNode]


def http(
    world: World, url: str, method: str, path: str, body: bytes | None, timeout: float
) -> Task:
    """One exchange with the node at ``url``: its :class:`Reply`, or :class:`SendError`
    (``sent`` False when the request certainly did not reach the node)."""
    node = world.by_url[url]
    if not node.up:  # nothing listens: refused at once
        yield world.net.rng.uniform(0.0002, 0.001)
        raise SendError("ConnectionRefusedError: connection refused", sent=False)
    if not world.net.reachable(CLIENT, node.id):
        yield min(CONNECT_TIMEOUT, timeout)
        raise SendError("ConnectTimeoutError: connect timed out", sent=False)
    reply = Future()

    def answered(status: int, text: str) -> None:
        if status < 0:
            reply.settle(error=SendError(f"ConnectionError: {text}", sent=True))
        else:
            reply.settle(Reply(status, text, {}))

    req = Request(method, path.partition("?")[0], path.partition("?")[2], body or b"")
    world.net.deliver(CLIENT, node.id, node.from_client, req, answered)
    world.loop.timeout(reply, timeout, lambda: SendError("ReadTimeout: read timed out", sent=True))
    return (yield reply)


class ClientDied(HarnessError, OutcomeUnknown):
    """The simulated client process died between two steps of an operation (a fault
    point): the operation's outcome is unknown (recorded ``info``, as an operation left
    open is read)."""


@dataclass(frozen=True)
class FaultPoints:
    """Faults between two steps of an operation (a call answered, before the core reads
    the answer): a pause of up to ``pause_max`` seconds with probability ``pause``, the client dying
    with probability ``die``; drawn from ``rng``."""

    rng: random.Random
    pause: float = 0.0
    die: float = 0.0
    pause_max: float = 5.0

    def between(self) -> Generator[Any, Any, None]:
        """What happens between two steps (nothing, mostly)."""
        if self.pause and self.rng.random() < self.pause:
            yield self.rng.uniform(0.0, self.pause_max)
        if self.die and self.rng.random() < self.die:
            raise ClientDied("the client died between two steps of the operation (fault point)")


class SimClient:
    """One transport's worth of rqueue: its core, its endpoints, its options."""

    def __init__(
        self,
        world: World,
        urls: list[str],
        statements_class: type[Statements],
        request_timeout: float,
        max_deliveries: int | None = None,
        faults: FaultPoints | None = None,
        shared: bool = False,
    ) -> None:
        options: dict[str, Any] = {
            "request_timeout": request_timeout,
            "timeout": 2 * request_timeout,
        }
        if max_deliveries:
            options.update(max_deliveries=max_deliveries, on_dead_letter=note_dead_letter)
        self.world = world
        self.faults = faults
        self.settings = Settings.build(urls, **options)
        self.endpoints = self.settings.endpoints()
        self.core: QueueCore = self.settings.core(
            ServerInfo.from_version(VERSION), statements_class
        )
        if self.core.zone is not None:
            self.core.zone.monotonic = world.loop.clock
        #: group commit, for a transport several workers share (``shared_transport``)
        self.merger = SimMerger(world.loop, self._send_merged) if shared else None

    # -- the operations the workload calls --------------------------------------------------
    def open(self) -> Task:
        """Create the schema and register the queue (``from_url``'s work), without fault
        points: opening is not an operation the history records."""
        return self._drive(self.core.open(create=True), faults=False)

    def publish(self, group_id: str, event: Any, priority: int = 0, delay: float = 0) -> Task:
        text = _validate.event(event)
        group_id, priority, dedup_id, delay = _validate.publish_args(
            group_id, priority, None, delay
        )
        return self._drive(self.core.publish(group_id, text, priority, dedup_id, delay))

    def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> Task:
        args = _validate.claim_args(worker_id, visibility, min_priority)
        return self._drive(self.core.claim(*args))

    def claim_many(
        self, worker_id: str, visibility: float, max_messages: int = 10, min_priority: int = 0
    ) -> Task:
        worker_id, visibility, min_priority = _validate.claim_args(
            worker_id, visibility, min_priority
        )
        return self._drive(
            _many.claim_many(self.core, worker_id, visibility, min_priority, max_messages)
        )

    def ack(self, lease: Lease) -> Task:
        return self._drive(self.core.ack(check_lease(lease, self.core)))

    def ack_many(self, leases: list[Lease]) -> Task:
        checked = [check_lease(x, self.core) for x in leases]
        outcomes = yield from self._drive(_many.ack_many(self.core, checked))
        first = outcomes[0] if outcomes else None
        if first is not None and all(o is first for o in outcomes):
            raise first  # one definite failure of the request, as the transports raise it
        return outcomes

    def ack_and_claim(
        self, lease: Lease, worker_id: str, visibility: float, min_priority: int = 0
    ) -> Task:
        lease = check_lease(lease, self.core)
        args = _validate.claim_args(worker_id, visibility, min_priority)
        return self._drive(self.core.ack_and_claim(lease, *args))

    def nack(self, lease: Lease, delay: float = 0, error: str | None = None) -> Task:
        lease = check_lease(lease, self.core)
        delay = _validate.seconds("delay", delay, allow_zero=True)
        return self._drive(self.core.nack(lease, delay, _validate.error_text(error)))

    def extend(self, lease: Lease, visibility: float) -> Task:
        lease = check_lease(lease, self.core)
        visibility = _validate.seconds("visibility", visibility, allow_zero=False)
        return self._drive(self.core.extend(lease, visibility))

    def dead_letters(self, after: int = 0, limit: int = 100) -> Task:
        """A page of the dead-letter queue in seq order (the admin API's)."""
        return self._drive(_admin.dead_letters(self.core, None, after, limit))

    def close(self) -> None:
        pass

    # -- driving the core (the transports' loop, on the virtual clock) ----------------------
    def _drive(self, op: Op[Any], faults: bool = True) -> Generator[Any, Any, Any]:
        deadline = self.world.loop.now + self.settings.options.timeout
        try:
            call = next(op)
            while True:
                try:
                    results = yield from self._send(call, deadline)
                except RqueueError as exc:
                    call = op.throw(exc)
                else:
                    if faults and self.faults is not None:  # the core has not seen the answer
                        yield from self.faults.between()
                    call = op.send(call.for_caller(results))
        except StopIteration as stop:
            return stop.value

    def _send(self, call: HttpCall, deadline: float) -> Generator[Any, Any, tuple[Result, ...]]:
        """A mergeable call through the merger (a shared transport), else alone."""
        if call.mergeable and self.merger is not None:
            timeout = self.settings.options.request_timeout
            settled = yield from self.merger.run(call, deadline, timeout)
            if isinstance(settled, _batch.Done):
                return settled.results
            if isinstance(settled, _batch.Failed):
                raise settled.error
        return (yield from self._send_alone(call, deadline))

    def _send_merged(
        self, batch: list[_batch.Waiting], deadline: float
    ) -> Generator[Any, Any, list[_batch.Settled]]:
        """One try of ``batch``'s calls as one request, to the node that answered last."""
        ex = _batch.exchange(
            batch,
            self.endpoints,
            self.settings.options.request_timeout,
            deadline - self.world.loop.now,
            self.core.zone,
        )
        if isinstance(ex, list):
            return ex
        try:
            reply = yield from http(self.world, ex.url, "POST", ex.path, ex.body, ex.timeout)
        except SendError as exc:
            return ex.failed(str(exc), exc.sent)
        return ex.answered(reply.status, reply.text)

    def _send_alone(
        self, call: HttpCall, deadline: float
    ) -> Generator[Any, Any, tuple[Result, ...]]:
        o = self.settings.options
        attempts = Attempts(
            call,
            self.endpoints,
            deadline,
            o.request_timeout,
            monotonic=self.world.loop.clock,
            limit=o.timeout,
            zone=self.core.zone,
        )
        while True:
            url, timeout = attempts.next()
            probe = attempts.probe(url)
            if probe is not None and not (yield from self._probe(attempts, url, probe)):
                yield attempts.pause()
                continue
            if attempts.zone_check_due(url) and not (
                yield from self._check_zone(attempts, url, timeout)
            ):
                yield attempts.pause()
                continue
            path, body = attempts.target()
            try:
                reply = yield from http(self.world, url, "POST", path, body, timeout)
            except SendError as exc:
                if exc.sent:
                    attempts.maybe_sent(url, str(exc))
                else:
                    attempts.not_sent(url, str(exc))
            else:
                results = attempts.answered(url, reply.status, reply.text)
                if results is not None:
                    return results
            yield attempts.pause()

    def _probe(self, attempts: Attempts, url: str, timeout: float) -> Generator[Any, Any, bool]:
        try:
            reply = yield from http(self.world, url, "GET", "/readyz", None, timeout)
        except SendError as exc:
            attempts.not_sent(url, f"not ready (GET /readyz: {exc})")
            return False
        return attempts.probe_answered(url, reply.status, reply.text)

    def _check_zone(
        self, attempts: Attempts, url: str, timeout: float
    ) -> Generator[Any, Any, bool]:
        path, body = attempts.zone_check()
        try:
            reply = yield from http(self.world, url, "POST", path, body, timeout)
        except SendError as exc:
            attempts.not_sent(url, f"time zone check: {exc}")
            return False
        return attempts.zone_answered(url, reply.status, reply.text)
