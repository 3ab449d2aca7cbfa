"""The operator's API of both twins: ``stats``, ``peek`` and the dead-letter queue.

Two small mixins over the same core operations (:mod:`rqueue._stats`,
:mod:`rqueue._dlq`); a twin provides ``_open()`` and ``_drive(op)``. The arguments are
checked here, before anything is sent.
"""

from __future__ import annotations

from typing import Any

from . import _dlq, _stats, _validate
from ._models import DeadLetter, QueuedMessage, Stats

#: most rows one ``dead_letters`` or ``peek`` call returns
MAX_LIMIT = 10_000


def _limit(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"limit: expected an int, got {type(value).__name__}")
    if not 1 <= value <= MAX_LIMIT:
        raise ValueError(f"limit: must be between 1 and {MAX_LIMIT}, got {value}")
    return value


def _seq(name: str, value: Any, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name}: must be {'>= 0' if allow_zero else '> 0'}, got {value}")
    return value


def selection(seq: Any, group_id: Any, everything: Any) -> tuple[int | None, str | None]:
    """Exactly one of ``seq``, ``group_id`` or ``all=True`` (nothing is acted on by default)."""
    chosen = [seq is not None, group_id is not None, everything is True]
    if not isinstance(everything, bool):
        raise TypeError(f"all: expected a bool, got {type(everything).__name__}")
    if sum(chosen) != 1:
        raise ValueError("give exactly one of seq=, group_id= or all=True")
    return (
        None if seq is None else _seq("seq", seq),
        None if group_id is None else _validate.text("group_id", group_id),
    )


class Admin:
    """``stats``, ``peek`` and the dead-letter queue for the blocking twin."""

    def stats(self) -> Stats:
        """Messages ready, leased, parked and dead-lettered, groups, the oldest ready
        message's age, by priority: from counters and indexes, cheap enough to poll."""
        return self._drive(_stats.stats(self._open()))  # type: ignore[attr-defined]

    def peek(self, group_id: str, limit: int = 20) -> list[QueuedMessage]:
        """The first ``limit`` messages of ``group_id`` in order, with their state."""
        core = self._open()  # type: ignore[attr-defined]
        op = _dlq.peek(core, _validate.text("group_id", group_id), _limit(limit))
        return self._drive(op)  # type: ignore[attr-defined]

    def dead_letters(
        self, group_id: str | None = None, *, after: int = 0, limit: int = 100
    ) -> list[DeadLetter]:
        """Dead-lettered messages in seq order (of one group, if given), after seq ``after``."""
        core = self._open()  # type: ignore[attr-defined]
        group = None if group_id is None else _validate.text("group_id", group_id)
        op = _dlq.list_dead(core, group, _seq("after", after, allow_zero=True), _limit(limit))
        return self._drive(op)  # type: ignore[attr-defined]

    def redrive(
        self, seq: int | None = None, *, group_id: str | None = None, all: bool = False
    ) -> int:
        """Put dead letters back at the tail of their groups (one by ``seq``, a group, or
        ``all=True``) as new messages; returns how many."""
        core = self._open()  # type: ignore[attr-defined]
        return self._drive(_dlq.redrive(core, *selection(seq, group_id, all)))  # type: ignore[attr-defined]

    def purge(
        self, seq: int | None = None, *, group_id: str | None = None, all: bool = False
    ) -> int:
        """Delete dead letters (one by ``seq``, a group, or ``all=True``); returns how many."""
        core = self._open()  # type: ignore[attr-defined]
        return self._drive(_dlq.purge(core, *selection(seq, group_id, all)))  # type: ignore[attr-defined]


class AsyncAdmin:
    """``stats``, ``peek`` and the dead-letter queue for the asyncio twin."""

    async def stats(self) -> Stats:
        """As :meth:`Admin.stats`."""
        return await self._drive(_stats.stats(self._open()))  # type: ignore[attr-defined]

    async def peek(self, group_id: str, limit: int = 20) -> list[QueuedMessage]:
        """As :meth:`Admin.peek`."""
        core = self._open()  # type: ignore[attr-defined]
        op = _dlq.peek(core, _validate.text("group_id", group_id), _limit(limit))
        return await self._drive(op)  # type: ignore[attr-defined]

    async def dead_letters(
        self, group_id: str | None = None, *, after: int = 0, limit: int = 100
    ) -> list[DeadLetter]:
        """As :meth:`Admin.dead_letters`."""
        core = self._open()  # type: ignore[attr-defined]
        group = None if group_id is None else _validate.text("group_id", group_id)
        op = _dlq.list_dead(core, group, _seq("after", after, allow_zero=True), _limit(limit))
        return await self._drive(op)  # type: ignore[attr-defined]

    async def redrive(
        self, seq: int | None = None, *, group_id: str | None = None, all: bool = False
    ) -> int:
        """As :meth:`Admin.redrive`."""
        core = self._open()  # type: ignore[attr-defined]
        return await self._drive(_dlq.redrive(core, *selection(seq, group_id, all)))  # type: ignore[attr-defined]

    async def purge(
        self, seq: int | None = None, *, group_id: str | None = None, all: bool = False
    ) -> int:
        """As :meth:`Admin.purge`."""
        core = self._open()  # type: ignore[attr-defined]
        return await self._drive(_dlq.purge(core, *selection(seq, group_id, all)))  # type: ignore[attr-defined]


def error_text(value: Any) -> str | None:
    """The checked ``error`` of a ``nack``: None or a str (kept up to 4,000 characters)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"error: expected a str, got {type(value).__name__}")
    return value[:4000]


def max_deliveries(value: Any) -> int | None:
    """The checked ``max_deliveries`` transport option: None (off) or an int >= 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_deliveries: expected an int or None, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"max_deliveries: must be >= 1, got {value}")
    return value
