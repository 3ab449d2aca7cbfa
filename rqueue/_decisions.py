"""What an outcome proves, for the core's operations (:mod:`rqueue._core`): what a row's
lookup proves after an unknown outcome of a fenced write (:class:`Proof`) and the step
it is on the ladder (:mod:`rqueue._ladder`), the errors of a lost lease and of a claim
after its ack, and reading a write's answer."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from ._exceptions import LeaseLost, ProtocolError, RqueueError
from ._ladder import AGAIN, Step, Unsettled
from ._models import Lease, Op, Result

T = TypeVar("T")


class Proof(enum.StrEnum):
    """What a fenced write's row proves after an unknown outcome."""

    #: still leased to the token, live: the write did not apply yet; sending it again is
    #: safe (a repeat is a no-op once either applies)
    RETRY = "retry"
    #: held by another token, or released: the write can never match (an ack's delete)
    LOST = "lost"
    #: it may still apply, or did: the outcome stays unknown
    UNKNOWN = "unknown"
    #: it applied (its token is remembered as settled: ``rqueue_keys``)
    APPLIED = "applied"


def decide_after_unknown(what: str, token: str, rows: Iterable[Sequence[Any]]) -> Proof:
    """After an unknown outcome, what a row lookup proves.

    ``rows`` is the lookup's result: ``[(locked_by, live)]`` or empty (row deleted).
    The unknown attempt may still be applied *after* the lookup (it can sit unread in a
    paused leader's socket, then be proposed when that node wakes up), with the ``now``
    it was stamped with when the lease was live. So :attr:`Proof.LOST` needs a row that
    such a late attempt can no longer match: one leased to another token (or released).
    """
    found = list(rows)
    if not found:
        return Proof.UNKNOWN  # deleted: by our ack, or by whoever held it after us
    locked_by, live = found[0][0], bool(found[0][1])
    if locked_by == token:
        # live: the write did not apply yet. Lapsed: a late attempt may still apply.
        return Proof.RETRY if live else Proof.UNKNOWN
    if what == "ack":
        return Proof.LOST  # held by another token or released: our delete can never match
    return Proof.UNKNOWN


def fenced_step(proof: Proof, what: str, lease: Lease) -> Step[Any]:
    """The ladder's step for a fenced write (``ack``, ``nack``, ``extend``) whose row
    proved ``proof``: send it again, raise :class:`~rqueue.LeaseLost`, or unsettled."""
    if proof is Proof.RETRY:
        return AGAIN
    if proof is Proof.LOST:
        raise lease_lost(what, lease)
    return Unsettled(UNSETTLED)


#: why a fenced write's outcome stays unknown after its row was looked up
UNSETTLED = "the message's state does not settle it"


def lease_lost(what: str, lease: Lease, also: str = "") -> LeaseLost:
    return LeaseLost(
        f"{what}: message {lease.seq} of group {lease.group_id!r} is no longer leased to "
        f"this token; nothing was changed{also}"
    )


def after_ack(op: Op[T]) -> Op[T]:
    """Run ``op`` (a claim after an applied ack): its errors say the ack applied."""
    try:
        return (yield from op)
    except RqueueError as exc:
        exc.acked = True
        raise


def with_expiry(lease: Lease, res: Result) -> Lease:
    """``lease`` with the ``lock_expiry`` read in ``res`` (None when the row is not there)."""
    try:
        expiry = res.rows[0][0] if res.rows else None
        return dataclasses.replace(lease, expires_at=None if expiry is None else float(expiry))
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"extend: unreadable lock_expiry {res.rows!r}: {exc}") from exc


def insert_id(res: Result) -> int:
    if res.last_insert_id is None:
        raise ProtocolError("publish: rqlite did not report the new row's id")
    return res.last_insert_id
