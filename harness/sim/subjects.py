"""The subjects the simulation can drive, as the statements their transports use.

rqueue and its mutants differ only in the :class:`~rqueue.Statements` class their
transports are given (``statements_class``, :mod:`harness.subjects.mutants`); the
simulation builds rqueue's core with that class. Other subjects (the seed's protocol,
kombu, a subject named by path) bring their own I/O: ``seed-reference`` is driven by
:mod:`harness.sim.seed` (None here), the others are not simulated.
"""

from __future__ import annotations

from rqueue import Statements

from ..subjects import SubjectError
from ..subjects import mutants as m

#: subject name -> the statements its transports use
STATEMENTS: dict[str, type[Statements] | None] = {
    "rqueue": Statements,
    "seed-reference": None,
    "mutant-no-exclusivity": m.NoExclusivityStatements,
    "mutant-lifo": m.LifoStatements,
    "mutant-ack-wrong-row": m.AckWrongRowStatements,
    "mutant-subquery-now": m.SubqueryNowStatements,
    "mutant-blob-text": m.BlobTextStatements,
    "mutant-zone-blind": m.ZoneBlindStatements,
    "mutant-no-idempotency": m.NoIdempotencyStatements,
    "harness.subjects.mutants:EARLY_DEAD_LETTER": m.EarlyDeadLetterStatements,
}
SIMULATED: tuple[str, ...] = tuple(STATEMENTS)


def statements_for(subject: str) -> type[Statements] | None:
    """The statements class of ``subject`` (None: the seed's protocol);
    :class:`SubjectError` for one not simulated."""
    try:
        return STATEMENTS[subject]
    except KeyError:
        raise SubjectError(
            f"subject {subject!r} is not simulated (its client brings its own I/O); "
            f"simulated: {', '.join(SIMULATED)}"
        ) from None
