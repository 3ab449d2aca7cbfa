"""The client protocols the workload drives, and the description of a subject.

A *subject* is a queue implementation under test. It opens a sync client (used by worker
threads) and an async client (used by tasks on one event loop) with rqueue's method
names and arguments. Clients raise rqueue's exception classes, so the workload can turn
every outcome into a history type without knowing the subject: ``Unavailable``,
``StatementError``, ``LeaseLost`` and ``TransportClosed`` are ``fail`` (certainly not
applied); ``OutcomeUnknown`` (and anything unexpected) is ``info`` (may have applied).

``ack_and_claim`` acks a lease and claims the next message: an error it raises is the
ack's (nothing claimed) unless the error's ``acked`` attribute is True, in which case the
ack took effect and the error is the claim's. A queue without such a call implements it
as ``ack`` then ``claim``, setting ``acked = True`` on an error of the claim.

Optional, detected on each opened client: ``claim(..., wait=...)`` (long polling),
``publish(..., delay=...)`` (delayed messages), ``claim_many(worker_id, visibility,
max_messages=10, min_priority=0) -> list[lease]`` with ``ack_many(leases) -> list[error |
None]`` (batches: one outcome per lease, None when acked). A client without one has the
workload's long pollers, delayed publishes or batch claimers downgraded, with a log line.

docs/example_subject/README.md documents the protocols for authors of other queues.
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..errors import HarnessError

#: the worker's wall clock: epoch seconds, possibly skewed by the nemesis
Clock = Callable[[], float]

#: what the current claim (of this thread or task) dead-lettered, as the client reported
#: it through :func:`note_dead_letter`; None when no claim collects (the workload's
#: :mod:`harness.workload.deadletters` sets and reads it)
DEAD_LETTERS: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "harness_dead_letters", default=None
)


def note_dead_letter(dead: Any) -> None:
    """A client's ``on_dead_letter`` callback: report ``dead`` (with ``group_id``, ``seq``,
    ``deliveries`` and ``event``, as rqueue's ``DeadLetter``) for the current claim."""
    found = DEAD_LETTERS.get()
    if found is not None:
        found.append(dead)


#: the methods every client has (async clients: as coroutine functions)
CLIENT_METHODS = ("publish", "claim", "ack", "ack_and_claim", "nack", "extend", "close")


class SubjectError(HarnessError, ValueError):
    """A subject that cannot be loaded or does not fit the protocol (one-line reason)."""


class LeaseLike(Protocol):
    """What a claim hands back: enough to name the message and to ack it.

    ``event`` is the published event text, unchanged (the workload reads its ``msg``).
    """

    seq: int
    group_id: str
    event: str
    token: str


class SyncClient(Protocol):
    def publish(self, group_id: str, event: str, priority: int = 0) -> int: ...
    def claim(
        self, worker_id: str, visibility: float, min_priority: int = 0
    ) -> LeaseLike | None: ...
    def ack(self, lease: LeaseLike) -> None: ...
    def ack_and_claim(
        self, lease: LeaseLike, worker_id: str, visibility: float, min_priority: int = 0
    ) -> LeaseLike | None: ...
    def nack(self, lease: LeaseLike, delay: float = 0) -> None: ...
    def extend(
        self, lease: LeaseLike, visibility: float
    ) -> object: ...  # rqueue returns the extended lease; the harness ignores it
    def close(self) -> None: ...


class AsyncClient(Protocol):
    async def publish(self, group_id: str, event: str, priority: int = 0) -> int: ...
    async def claim(
        self, worker_id: str, visibility: float, min_priority: int = 0
    ) -> LeaseLike | None: ...
    async def ack(self, lease: LeaseLike) -> None: ...
    async def ack_and_claim(
        self, lease: LeaseLike, worker_id: str, visibility: float, min_priority: int = 0
    ) -> LeaseLike | None: ...
    async def nack(self, lease: LeaseLike, delay: float = 0) -> None: ...
    async def extend(self, lease: LeaseLike, visibility: float) -> object: ...
    async def close(self) -> None: ...


#: (node URLs, worker clock, per-request timeout in seconds) -> client
OpenSync = Callable[[Sequence[str], Clock, float], SyncClient]
OpenAsync = Callable[[Sequence[str], Clock, float], Awaitable[AsyncClient]]
#: (node URLs, timeout) -> messages left in the queue (None: no node answered)
Pending = Callable[[Sequence[str], float], "int | None"]


@dataclass(frozen=True)
class Subject:
    """A named implementation under test and how to open its two clients."""

    name: str
    description: str
    open_sync: OpenSync
    open_async: OpenAsync
    #: True for the real queue; mutants and the seed are expected to show anomalies
    expected_valid: bool = True
    #: how many messages are left, for the drain after the faults; None: rqueue's
    #: ``messages`` table is counted
    pending: Pending | None = None


def client_problem(client: Any, is_async: bool) -> str | None:
    """What keeps ``client`` from fitting the sync (or async) protocol, or None."""
    missing = [m for m in CLIENT_METHODS if not callable(getattr(client, m, None))]
    if missing:
        return f"{type(client).__name__} lacks {', '.join(missing)}"
    if is_async:
        plain = [m for m in CLIENT_METHODS if not inspect.iscoroutinefunction(getattr(client, m))]
        if plain:
            return f"{type(client).__name__}.{plain[0]} is not an async method"
    else:
        coros = [m for m in CLIENT_METHODS if inspect.iscoroutinefunction(getattr(client, m))]
        if coros:
            return f"{type(client).__name__}.{coros[0]} is async in the sync client"
    return None


def checked(subject: Subject, where: str) -> Subject:
    """``subject`` whose opened clients are checked against the protocols first.

    A client that does not fit is closed and :class:`SubjectError` names what is wrong.
    """
    open_sync, open_async = subject.open_sync, subject.open_async

    def checked_sync(urls: Sequence[str], clock: Clock, timeout: float, **options: Any) -> Any:
        client = open_sync(urls, clock, timeout, **options)
        problem = client_problem(client, is_async=False)
        if problem is not None:
            if callable(getattr(client, "close", None)):
                client.close()
            raise SubjectError(f"{where}: open_sync returned a client that does not fit: {problem}")
        return client

    async def checked_async(
        urls: Sequence[str], clock: Clock, timeout: float, **options: Any
    ) -> Any:
        opened = open_async(urls, clock, timeout, **options)
        if not inspect.isawaitable(opened):
            raise SubjectError(f"{where}: open_async must be an async function; it returned "
                               f"{type(opened).__name__}")  # fmt: skip
        client = await opened
        problem = client_problem(client, is_async=True)
        if problem is not None:
            close = getattr(client, "close", None)
            if inspect.iscoroutinefunction(close):
                await close()
            raise SubjectError(
                f"{where}: open_async returned a client that does not fit: {problem}"
            )
        return client

    return replace(subject, open_sync=checked_sync, open_async=checked_async)
