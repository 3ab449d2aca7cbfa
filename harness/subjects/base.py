"""The small client interface the workload drives, and the registry entry of a subject.

A *subject* is a queue implementation under test. Each offers a sync client (used by
worker threads) and an async client (used by tasks on one event loop) with rqueue's
method names. Clients raise rqueue's exception classes, so the workload can turn every
outcome into a history type without knowing the subject: ``Unavailable``,
``StatementError``, ``LeaseLost`` and ``TransportClosed`` are ``fail``;
``OutcomeUnknown`` (and anything unexpected) is ``info``.

``ack_and_claim`` acks a lease and claims the next message: an error it raises is the
ack's (nothing claimed) unless the error's ``acked`` attribute is True, in which case the
ack took effect and the error is the claim's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

#: the worker's wall clock: epoch seconds, possibly skewed by the nemesis
Clock = Callable[[], float]


class LeaseLike(Protocol):
    """What a claim hands back: enough to name the message and to ack it."""

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
    def extend(self, lease: LeaseLike, visibility: float) -> None: ...
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
    async def extend(self, lease: LeaseLike, visibility: float) -> None: ...
    async def close(self) -> None: ...


#: (node URLs, worker clock, per-request timeout in seconds) -> client
OpenSync = Callable[[Sequence[str], Clock, float], SyncClient]
OpenAsync = Callable[[Sequence[str], Clock, float], Awaitable[AsyncClient]]


@dataclass(frozen=True)
class Subject:
    """A named implementation under test and how to open its two clients."""

    name: str
    description: str
    open_sync: OpenSync
    open_async: OpenAsync
    #: True for the real queue; mutants and the seed are expected to show anomalies
    expected_valid: bool = True
