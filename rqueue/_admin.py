"""The operator's calls: ``stats``, ``peek``, ``dead_letters``, ``redrive``, ``purge``.

Each is an operation of the core (a generator of calls, see :mod:`rqueue._core`) over
statements from :mod:`rqueue._stats` and :mod:`rqueue._dlq`, with checked arguments
(:mod:`rqueue._validate`). Both twins and the admin CLI drive them through one mixin
(``AsyncAdmin`` in :mod:`rqueue._async`, and ``Admin`` generated from it).
"""

from __future__ import annotations

from . import _dlq, _stats
from ._core import QueueCore
from ._models import DeadLetter, Op, QueuedMessage, Stats


def stats(core: QueueCore) -> Op[Stats]:
    results = yield core.read(_stats.STATEMENTS, "stats")
    return _stats.stats_of(results)


def peek(core: QueueCore, group_id: str, limit: int) -> Op[list[QueuedMessage]]:
    (res,) = yield core.read([_stats.peek(group_id, limit)], "peek")
    return _stats.queued_of(res)


def dead_letters(
    core: QueueCore, group_id: str | None, after: int, limit: int
) -> Op[list[DeadLetter]]:
    (res,) = yield core.read([core.dead.list(group_id, after, limit)], "dead letters")
    return _dlq.dead_letters_of(res)


def redrive(core: QueueCore, seq: int | None, group_id: str | None) -> Op[int]:
    """Redrive; idempotent in effect: a repeat (after an unknown outcome) redrives what is
    in the dead-letter queue then, and nothing twice. Timed (the new messages'
    ``enqueued_at``): on servers without the stamp it reads the leader's clock when due."""
    return (yield from core.with_clock(_redrive(core, seq, group_id)))


def _redrive(core: QueueCore, seq: int | None, group_id: str | None) -> Op[int]:
    results = yield core.write(core.dead.redrive(seq, group_id), "redrive", idempotent=True)
    return results[0].rows_affected


def purge(core: QueueCore, seq: int | None, group_id: str | None) -> Op[int]:
    (res,) = yield core.write([core.dead.purge(seq, group_id)], "purge", idempotent=True)
    return res.rows_affected
