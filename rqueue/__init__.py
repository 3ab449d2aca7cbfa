"""rqueue: a multi-machine FIFO queue with per-group exclusivity on rqlite.

``RqliteTransport`` (needs the ``requests`` extra) and ``AsyncRqliteTransport`` (needs
the ``httpx`` extra) are imported lazily, so using one twin never imports the other's
HTTP library. See docs/rqueue.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._exceptions import (
    LeaseLost,
    OutcomeUnknown,
    ProtocolError,
    RqueueError,
    StatementError,
    TransportClosed,
    Unavailable,
)
from ._models import DeadLetter, Lease, QueuedMessage, Stats
from ._statements import Statements

if TYPE_CHECKING:
    from ._async import AsyncRqliteTransport
    from ._sync import RqliteTransport

__all__ = [
    "AsyncRqliteTransport",
    "DeadLetter",
    "Lease",
    "LeaseLost",
    "OutcomeUnknown",
    "ProtocolError",
    "QueuedMessage",
    "RqliteTransport",
    "RqueueError",
    "StatementError",
    "Statements",
    "Stats",
    "TransportClosed",
    "Unavailable",
]

_LAZY = {"RqliteTransport": "._sync", "AsyncRqliteTransport": "._async"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rqueue' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
