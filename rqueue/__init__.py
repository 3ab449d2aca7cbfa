"""rqueue: a multi-machine FIFO queue with per-group exclusivity on rqlite.

``RqliteTransport`` (needs the ``requests`` extra) and ``AsyncRqliteTransport`` (needs
the ``httpx`` extra) are imported lazily, so using one twin never imports the other's
HTTP library; so are ``Worker`` and ``AsyncWorker``, which run a handler per message.
See docs/rqueue.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._exceptions import (
    LeaseLost,
    OutcomeUnknown,
    ProtocolError,
    QueueNotFound,
    RqueueError,
    StatementError,
    TransportClosed,
    Unavailable,
    ZoneRefused,
)
from ._models import DeadLetter, Lease, QueuedMessage, Stats
from ._queues import QueueInfo
from ._statements import Statements

if TYPE_CHECKING:
    from ._async_http import AsyncRqliteTransport
    from ._sync_http import RqliteTransport
    from ._worker import Worker
    from ._worker_async import AsyncWorker

__all__ = [
    "AsyncRqliteTransport",
    "AsyncWorker",
    "DeadLetter",
    "Lease",
    "LeaseLost",
    "OutcomeUnknown",
    "ProtocolError",
    "QueueInfo",
    "QueueNotFound",
    "QueuedMessage",
    "RqliteTransport",
    "RqueueError",
    "StatementError",
    "Statements",
    "Stats",
    "TransportClosed",
    "Unavailable",
    "Worker",
    "ZoneRefused",
]

_LAZY = {
    "RqliteTransport": "._sync_http",
    "AsyncRqliteTransport": "._async_http",
    "Worker": "._worker",
    "AsyncWorker": "._worker_async",
}

# the public names are shown (tracebacks, reprs) as rqueue.X, where users import them
for _public in (
    LeaseLost,
    OutcomeUnknown,
    ProtocolError,
    QueueNotFound,
    RqueueError,
    StatementError,
    TransportClosed,
    Unavailable,
    ZoneRefused,
    DeadLetter,
    Lease,
    QueuedMessage,
    QueueInfo,
    Stats,
    Statements,
):
    _public.__module__ = __name__


def _package_version() -> str:
    """The installed distribution's version; else a source tree's pyproject.toml; else
    ``0+unknown`` (a PEP 440 version that sorts below every release)."""
    from importlib import metadata
    from pathlib import Path

    try:
        return metadata.version("rqueue")
    except metadata.PackageNotFoundError:
        pass
    import tomllib

    try:
        project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
        if project["project"]["name"] == "rqueue":
            return str(project["project"]["version"])
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):
        pass
    return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":  # read on first use: importlib.metadata costs start-up time
        value: Any = _package_version()
    else:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'rqueue' has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(module, __name__), name)
        value.__module__ = __name__
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, "__version__"])
