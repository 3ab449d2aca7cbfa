"""``rqueue``: the product's own transports, driven as they are shipped.

The worker's (possibly skewed) clock is handed to rqueue as ``clock``; rqueue uses it
only on servers that cannot rewrite time functions (rqlite < 8.33), so on the embedded
node and modern rqlite the clock-skew fault on workers must not matter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import Clock, Subject


def transport_timeouts(request_timeout: float) -> dict[str, float]:
    """rqueue's two bounds: one HTTP request, and one operation with its retries."""
    return {"request_timeout": request_timeout, "timeout": 2 * request_timeout}


def open_sync(urls: Sequence[str], clock: Clock, timeout: float, cls: Any = None) -> Any:
    if cls is None:
        from rqueue import RqliteTransport as cls
    return cls.from_url(list(urls), clock=clock, **transport_timeouts(timeout))


async def open_async(urls: Sequence[str], clock: Clock, timeout: float, cls: Any = None) -> Any:
    if cls is None:
        from rqueue import AsyncRqliteTransport as cls
    return await cls.from_url(list(urls), clock=clock, **transport_timeouts(timeout))


SUBJECT = Subject(
    name="rqueue",
    description="rqueue's RqliteTransport (threads) and AsyncRqliteTransport (asyncio tasks)",
    open_sync=open_sync,
    open_async=open_async,
)
