"""The unknown-outcome ladder: the one loop that settles every write of the core whose
outcome can be unknown (a timeout, a dropped connection, a leader change).

Every operation climbs the same rungs (:func:`climb`); it supplies only what differs, as
a :class:`Ladder`: its request, what an answer proves, its lookup and what a found or
not-found lookup proves.

1. **Send** the operation's request (``Ladder.send``).
2. **Answered**: what the answer proves (``Ladder.answered``): the operation's value
   (:class:`Known`), or :data:`LOOK_UP` where only the stored rows can tell (a fenced
   write that changed nothing after an earlier try's outcome was unknown).
3. **Unknown**: the operation's lookup (``Ladder.lookup``, a :class:`Lookup`) reads what
   took effect, and ``Ladder.proves`` says what that proves: the value (found), send the
   same request again where a repeat is safe (:data:`AGAIN`: the same token leases
   nothing twice, the same dedup id stores nothing twice, a fenced write still live
   applies once), a definite error it raises (a lease proven lost), or
   :class:`Unsettled` (:class:`~rqueue.OutcomeUnknown`, saying why). Without a lookup
   (``None``) the request is sent again as it is.
4. **Give up where a repeat cannot help**: after an unknown outcome whose statement failed
   (``OutcomeUnknown.statement_failed``: the same request would fail alike) the ladder
   raises it instead of sending again; once an outcome was unknown, a definite failure
   after it (:class:`~rqueue.Unavailable`, :class:`~rqueue.StatementError`) is
   ``OutcomeUnknown`` too ("retries gave up"), and so is a lookup that fails, naming what
   could not be looked up.

Reads, and the writes that are idempotent as they stand (``HttpCall.idempotent``: the
schema, the registry, ``redrive``, ``purge``), never climb: their transport sends them
again by itself (:mod:`rqueue._attempts`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ._exceptions import OutcomeUnknown, RqueueError, StatementError, Unavailable
from ._models import HttpCall, Op, Result

T = TypeVar("T")
V = TypeVar("V")

Results = tuple[Result, ...]


class Next(enum.Enum):
    """A step that is not the end: what the ladder does next."""

    #: send the same request again (a repeat is safe: it applies at most once)
    AGAIN = "send the same request again"
    #: the answer does not settle it: look the effect up
    LOOK_UP = "look the effect up"


AGAIN, LOOK_UP = Next.AGAIN, Next.LOOK_UP


@dataclass(frozen=True)
class Known(Generic[T]):
    """The outcome is known: the operation returns ``value``."""

    value: T


@dataclass(frozen=True)
class Unsettled:
    """The lookup cannot settle the outcome: :class:`~rqueue.OutcomeUnknown`, saying why."""

    why: str


#: what an answer or a lookup proves
Step = Known[T] | Next | Unsettled


@dataclass
class Tries:
    """What the tries of one operation learnt: the first outcome that was unknown (None:
    every try so far was answered, or failed for certain)."""

    unknown: OutcomeUnknown | None = None

    def unknown_from_here(self, why: str) -> None:
        """From here on a failure leaves the outcome unknown (a write applied, its answer
        still to be read; or an answer that did not tell every item apart)."""
        if self.unknown is None:
            self.unknown = OutcomeUnknown(why)


@dataclass(frozen=True)
class Lookup(Generic[V]):
    """How an operation looks its effect up: the read (built when it is sent, so a
    worker's clock renders the time of the lookup), what the read found, and what is said
    when it fails (after ``"{unknown}; "``, and with the read's own error where
    ``names_cause``)."""

    read: Callable[[], HttpCall]
    found: Callable[[Results], V]
    unreadable: str
    names_cause: bool = True


def look_up(lookup: Lookup[V], unknown: OutcomeUnknown) -> Op[V]:
    """Send ``lookup``'s read; what it found. A read that fails leaves ``unknown`` unknown
    (:class:`~rqueue.OutcomeUnknown`, naming what could not be looked up)."""
    try:
        results = yield lookup.read()
    except (Unavailable, StatementError) as exc:
        cause = f": {exc}" if lookup.names_cause else ""
        raise OutcomeUnknown(f"{unknown}; {lookup.unreadable}{cause}") from exc
    return lookup.found(results)


def give_up(exc: RqueueError, unknown: OutcomeUnknown | None) -> Any:
    """The end after a definite failure: the failure itself, or, once an outcome was
    unknown, :class:`~rqueue.OutcomeUnknown` (the earlier try may have applied)."""
    if unknown is None:
        raise exc
    raise OutcomeUnknown(f"{unknown}; retries gave up: {exc}") from exc


def found_or_again(found: V) -> Step[V]:
    """What a claim's lookup proves: found (a lease, or leases), the claim applied and
    that is its value; not found, nothing was leased, so the same tokens go again (a
    token already in use takes its own row again, nothing more)."""
    return Known(found) if found else AGAIN


def sending(call: Callable[[], HttpCall]) -> Callable[[Tries], Op[Results]]:
    """A try that is one request, built anew for each try (a worker's clock renders the
    time of that try)."""

    def send(tries: Tries) -> Op[Results]:
        return (yield call())

    return send


@dataclass(frozen=True)
class Ladder(Generic[T, V]):
    """One operation's part in :func:`climb`: what differs between operations.

    ``answered`` and ``proves`` return a :data:`Step` (``answered`` may be a generator,
    to read more: a claim's lease read back). ``gave_up`` ends the ladder after a definite
    failure (default :func:`give_up`; ``ack_many`` answers per lease instead of raising).
    """

    send: Callable[[Tries], Op[Results]]
    answered: Callable[[Results, Tries], Step[T] | Op[Step[T]]]
    lookup: Lookup[V] | None = None
    proves: Callable[[V], Step[T]] = found_or_again
    gave_up: Callable[[RqueueError, OutcomeUnknown | None], T] = give_up


def climb(ladder: Ladder[T, Any], tries: Tries | None = None) -> Op[T]:
    """Run an operation until its outcome is known (see the module's doc); ``tries``:
    what earlier tries learnt (an unknown outcome of another operation)."""
    tries = Tries() if tries is None else tries
    while True:
        failed: OutcomeUnknown | None = None
        step: Step[T]
        try:
            results = yield from ladder.send(tries)
        except OutcomeUnknown as exc:
            failed, tries.unknown = exc, tries.unknown or exc
            step = LOOK_UP
        except (Unavailable, StatementError) as exc:
            return ladder.gave_up(exc, tries.unknown)
        else:
            answer = ladder.answered(results, tries)
            step = (yield from answer) if isinstance(answer, Generator) else answer
        if step is LOOK_UP:
            assert tries.unknown is not None
            if ladder.lookup is None:
                step = AGAIN
            else:
                step = ladder.proves((yield from look_up(ladder.lookup, tries.unknown)))
            if step is AGAIN and failed is not None and failed.statement_failed:
                raise failed  # the same request would fail alike
        if isinstance(step, Known):
            return step.value
        if isinstance(step, Unsettled):
            raise OutcomeUnknown(f"{tries.unknown}; {step.why}")
