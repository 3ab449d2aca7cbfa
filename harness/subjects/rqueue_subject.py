"""``rqueue``: the product's own transports, driven as they are shipped.

rqueue is opened as a user would, without a ``clock``: it never reads the worker's wall
clock. Lease times come from the server's stamp (rqlite >= 8.33) or from the leader's
clock, read over HTTP and advanced by the worker's monotonic clock (older rqlite). So
the clock-skew fault on workers, which steps their wall clocks (the ``clock`` argument
here), must not matter on any engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import Clock, Subject, note_dead_letter


def transport_timeouts(request_timeout: float) -> dict[str, float]:
    """rqueue's two bounds: one HTTP request, and one operation with its retries."""
    return {"request_timeout": request_timeout, "timeout": 2 * request_timeout}


def queue_options(options: dict[str, Any]) -> dict[str, Any]:
    """The workload's queue options as rqueue's: ``max_deliveries`` reports each dead
    letter to the history (through :func:`harness.subjects.note_dead_letter`)."""
    if options.get("max_deliveries"):
        return {"max_deliveries": options["max_deliveries"], "on_dead_letter": note_dead_letter}
    return {}


def open_sync(
    urls: Sequence[str], clock: Clock, timeout: float, cls: Any = None, **options: Any
) -> Any:
    if cls is None:
        from rqueue import RqliteTransport as cls
    return cls.from_url(list(urls), **transport_timeouts(timeout), **queue_options(options))


async def open_async(
    urls: Sequence[str], clock: Clock, timeout: float, cls: Any = None, **options: Any
) -> Any:
    if cls is None:
        from rqueue import AsyncRqliteTransport as cls
    return await cls.from_url(list(urls), **transport_timeouts(timeout), **queue_options(options))


SUBJECT = Subject(
    name="rqueue",
    description="rqueue's RqliteTransport (threads) and AsyncRqliteTransport (asyncio tasks)",
    open_sync=open_sync,
    open_async=open_async,
)
