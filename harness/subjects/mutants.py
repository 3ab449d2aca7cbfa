"""Mutant subjects: rqueue with one statement builder broken on purpose.

Each mutant subclasses rqueue's :class:`~rqueue.Statements`, overrides exactly one
builder (or one switch of how statements are sent), and plugs it into subclasses of
both transports through their ``statements_class`` hook. The harness's own tests run
them and assert that the checker catches each bug:

``mutant-no-exclusivity``  claim ignores whether the group has a message in flight
                           → ``duplicate-group-lease`` (and FIFO violations)
``mutant-lifo``            claim takes the group's newest message instead of its oldest
                           → ``fifo-violation``
``mutant-ack-wrong-row``   ack deletes the group's next message instead of the leased one
                           → ``lost``
``mutant-subquery-now``    claim reads the server's clock inside scalar subqueries, which
                           rqlite (>= 8.33) does not rewrite to a literal: each replica
                           evaluates its own clock when it applies the entry (and again
                           on replay) → ``replica-divergence`` on real rqlite
``mutant-blob-text``       sends every text as it is, so rqlite (>= 8.31) binds a group
                           id, dedup id, worker id or error shaped ``x'41'`` as a BLOB
                           of those bytes → a delivered group id that differs from the
                           published one (``corrupted``), and leases never settled
``mutant-zone-blind``      stamps leases with the receiving node's rewritten 'now' as it
                           comes, without the guard against a node off UTC and without
                           checking or refusing such nodes: after a daylight-saving
                           jump every live lease looks expired → ``duplicate-group-lease``
                           (and early delivery); for the ``timezone`` fault
``mutant-no-idempotency``  today's publish and claim before they were idempotent: a
                           publish without dedup id has no key, a claim applied twice
                           answers nothing, settled tokens are not remembered. Through
                           a resend of a forwarded write (rqlite v10) or a lost reply
                           (``lost-replies``) → ``duplicated`` (one publish stored as
                           two messages), claims whose lease nobody got (stuck until
                           they lapse, then redelivered), ``OutcomeUnknown`` publishes

Not registered by name (run it as ``harness.subjects.mutants:EARLY_DEAD_LETTER``):

``EARLY_DEAD_LETTER``      max_deliveries one below the one asked for: dead-letters a
                           message one claim early → ``early-dead-letter`` (poison runs)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rqueue import AsyncRqliteTransport, Lease, RqliteTransport, Statements
from rqueue._models import Stmt
from rqueue._statements import NOW

from . import rqueue_subject
from .base import Clock, Subject

_CLAIM_SET = (
    'UPDATE "groups" SET locked_by = ?, lock_expiry = {now} + ?, deliveries = deliveries + 1, '
    'last_claimed_at = max({now}, (SELECT max(last_claimed_at) FROM "groups") + 0.000001) '
)
_NOT_RETRIED = 'AND NOT EXISTS (SELECT 1 FROM "groups" WHERE locked_by = ?)'


class NoExclusivityStatements(Statements):
    """Lease the next group in claim order whether or not its head is in flight."""

    def claim_lease(self, token: str, visibility: float, min_priority: int):
        return self.stmt(
            _CLAIM_SET + 'WHERE group_id = (SELECT group_id FROM "groups" '
            "WHERE head_seq IS NOT NULL AND priority >= ? "
            "ORDER BY last_claimed_at ASC, head_seq ASC LIMIT 1) " + _NOT_RETRIED,
            token,
            NOW,
            visibility,
            NOW,
            min_priority,
            token,
        )


#: the group's newest message as a lease's columns
_NEWEST = (
    '(SELECT max(seq) FROM messages m WHERE m.group_id = "groups".group_id) AS seq, group_id, '
    '(SELECT event FROM messages m WHERE m.group_id = "groups".group_id ORDER BY m.seq DESC '
    "LIMIT 1) AS event, lock_expiry"
)


class LifoStatements(Statements):
    """Keep group exclusivity, but hand out the group's newest message (and settle that
    one: the fence checks the group and token, not the head)."""

    def claim_returning(self, token: str, visibility: float, min_priority: int):
        lease = self.claim_lease(token, visibility, min_priority)
        return Stmt(f"{lease.sql} RETURNING {_NEWEST}", lease.params)

    def claim_read_back(self, token: str):
        return self.stmt(f'SELECT {_NEWEST} FROM "groups" WHERE locked_by = ?', token)

    def _fence(self, lease: Lease):
        return (
            "WHERE group_id = ? AND ? IS NOT NULL AND locked_by = ? AND lock_expiry >= {now}",
            (lease.group_id, lease.seq, lease.token, NOW),
        )

    def _acked(self, lease: Lease):
        fence, fenced = self._fence(lease)
        return self.stmt(
            'UPDATE "groups" SET head_seq = (SELECT min(seq) FROM messages '
            "WHERE group_id = ? AND seq != ?), locked_by = NULL, lock_expiry = NULL, "
            "deliveries = 0, acked_by = ? " + fence,
            lease.group_id,
            lease.seq,
            lease.token,
            *fenced,
        )

    def _gone(self, lease: Lease):
        """Delete the leased message when it was not the head (the head goes by trigger)."""
        return self.stmt(
            "DELETE FROM messages WHERE seq = ? AND EXISTS "
            '(SELECT 1 FROM "groups" WHERE group_id = ? AND acked_by = ?)',
            lease.seq,
            lease.group_id,
            lease.token,
        )

    def ack(self, lease: Lease):
        acked, drop = super().ack(lease)
        return [acked, self._gone(lease), drop]

    def ack_and_claim(self, lease: Lease, token: str, visibility: float, min_priority: int):
        acked, claim, drop = super().ack_and_claim(lease, token, visibility, min_priority)
        return [acked, claim, self._gone(lease), drop]


class AckWrongRowStatements(Statements):
    """Ack deletes the group's next message (the leased one only when it is the last)
    and releases the leased one."""

    def _acked(self, lease: Lease):
        next_seq = "(SELECT min(seq) FROM messages WHERE group_id = ? AND seq > ?)"
        return self.stmt(
            f'UPDATE "groups" SET head_seq = CASE WHEN {next_seq} IS NULL THEN NULL '
            "ELSE head_seq END, locked_by = NULL, lock_expiry = NULL, acked_by = ? "
            "WHERE group_id = ? AND head_seq = ? AND locked_by = ? AND lock_expiry >= {now}",
            lease.group_id,
            lease.seq,
            lease.token,
            lease.group_id,
            lease.seq,
            lease.token,
            NOW,
        )

    def _wrong(self, lease: Lease):
        return self.stmt(
            "DELETE FROM messages WHERE seq = (SELECT min(seq) FROM messages "
            "WHERE group_id = ? AND seq > ?) AND EXISTS "
            '(SELECT 1 FROM "groups" WHERE group_id = ? AND acked_by = ?)',
            lease.group_id,
            lease.seq,
            lease.group_id,
            lease.token,
        )

    def ack(self, lease: Lease):
        acked, drop = super().ack(lease)
        return [acked, self._wrong(lease), drop]

    def ack_and_claim(self, lease: Lease, token: str, visibility: float, min_priority: int):
        acked, claim, drop = super().ack_and_claim(lease, token, visibility, min_priority)
        return [acked, claim, self._wrong(lease), drop]


#: the server's clock in epoch seconds, written out (not rqueue's rendering of it)
_SERVER_NOW = "((julianday('now') - 2440587.5) * 86400.0)"
#: how long after its stored expiry a lease counts as lapsed (rqueue's default margin)
_LAPSE_MARGIN = 0.25


class SubqueryNowStatements(Statements):
    """rqueue's claim, with the server's clock read where rqlite does not rewrite it.

    The group is picked by a scalar subquery comparing leases with the server's
    ``now``, and the new lease's expiry is ``(SELECT now) + visibility``: rqlite leaves
    ``'now'`` inside a scalar subquery as it is, so every replica evaluates its own
    clock when it applies the entry, and a restarted node its clock at replay. Replicas
    then store different expiries and, around a lease's lapse, lease different rows.
    """

    def claim_lease(self, token: str, visibility: float, min_priority: int) -> Stmt:
        return Stmt(
            f'UPDATE "groups" SET locked_by = ?, lock_expiry = (SELECT {_SERVER_NOW}) + ?, '
            f"deliveries = deliveries + 1, last_claimed_at = max((SELECT {_SERVER_NOW}), "
            '(SELECT max(last_claimed_at) FROM "groups") + 0.000001) '
            'WHERE group_id = (SELECT group_id FROM "groups" WHERE head_seq IS NOT NULL '
            f"AND priority >= ? AND (locked_by IS NULL OR lock_expiry < {_SERVER_NOW} - ?) "
            "ORDER BY last_claimed_at ASC, head_seq ASC LIMIT 1) " + _NOT_RETRIED,
            (token, visibility, min_priority, _LAPSE_MARGIN, token),
        )


def _mutant(name: str, statements: type[Statements], description: str) -> Subject:
    sync_cls = type(f"{statements.__name__}Transport", (RqliteTransport,), {})
    sync_cls.statements_class = statements
    async_cls = type(f"Async{statements.__name__}Transport", (AsyncRqliteTransport,), {})
    async_cls.statements_class = statements

    def open_sync(urls: Sequence[str], clock: Clock, timeout: float) -> Any:
        return rqueue_subject.open_sync(urls, clock, timeout, sync_cls)

    async def open_async(urls: Sequence[str], clock: Clock, timeout: float) -> Any:
        return await rqueue_subject.open_async(urls, clock, timeout, async_cls)

    return Subject(name, description, open_sync, open_async, expected_valid=False)


NO_EXCLUSIVITY = _mutant(
    "mutant-no-exclusivity",
    NoExclusivityStatements,
    "rqueue whose claim ignores in-flight groups (expect duplicate-group-lease)",
)
LIFO = _mutant(
    "mutant-lifo",
    LifoStatements,
    "rqueue whose claim takes a group's newest message (expect fifo-violation)",
)
ACK_WRONG_ROW = _mutant(
    "mutant-ack-wrong-row",
    AckWrongRowStatements,
    "rqueue whose ack deletes the group's next message (expect lost)",
)
SUBQUERY_NOW = _mutant(
    "mutant-subquery-now",
    SubqueryNowStatements,
    "rqueue whose claim reads the server clock in a subquery rqlite does not rewrite "
    "(expect replica-divergence on real rqlite)",
)


class BlobTextStatements(Statements):
    """rqueue's statements, sent without turning text that looks like a blob literal into
    bytes (:mod:`rqueue._text`): rqlite >= 8.31 (and the embedded node) binds a string
    parameter shaped ``x'…'`` as a BLOB of the hex bytes."""

    text_as_bytes = False


BLOB_TEXT = _mutant(
    "mutant-blob-text",
    BlobTextStatements,
    "rqueue sending text shaped x'41' as it is, bound as a BLOB by rqlite >= 8.31 "
    "(expect corrupted: a delivered group id that is not the published one)",
)


class ZoneBlindStatements(Statements):
    """rqueue's statements with the stamp unguarded, and no time zone checks of the nodes
    (:mod:`rqueue._zone`): a node whose rewritten ``'now'`` is off UTC stamps every
    lease with its local time."""

    zone_guard = False


ZONE_BLIND = _mutant(
    "mutant-zone-blind",
    ZoneBlindStatements,
    "rqueue without the stamp's guard against nodes off UTC and without their checks "
    "(expect duplicate-group-lease after a daylight-saving jump: the timezone fault)",
)


class NoIdempotencyStatements(Statements):
    """rqueue's writes as they were before they were made idempotent: a publish without
    a dedup id carries no key (two statements, not retried after an unknown outcome), a
    claim whose token is already in use leases nothing and answers nothing, and no
    settled ack or nack is remembered (a second application answers ``LeaseLost``)."""

    idempotency = False


NO_IDEMPOTENCY = _mutant(
    "mutant-no-idempotency",
    NoIdempotencyStatements,
    "rqueue without idempotent writes (expect duplicated under lost-replies: a publish "
    "stored twice; claims applied twice leave leases nobody holds, lost replies "
    "OutcomeUnknown)",
)


class EarlyDeadLetterStatements(Statements):
    """Use one delivery fewer than the transport's ``max_deliveries``."""

    @property
    def max_deliveries(self) -> int | None:
        limit = self.__dict__.get("_asked")
        return None if limit is None else max(1, limit - 1)

    @max_deliveries.setter
    def max_deliveries(self, value: int | None) -> None:
        self.__dict__["_asked"] = value


def _with_options(name: str, statements: type[Statements], description: str) -> Subject:
    """A mutant whose clients take the workload's options (``max_deliveries``)."""
    sync_cls = type(f"{statements.__name__}Transport", (RqliteTransport,), {})
    sync_cls.statements_class = statements
    async_cls = type(f"Async{statements.__name__}Transport", (AsyncRqliteTransport,), {})
    async_cls.statements_class = statements

    def open_sync(urls: Sequence[str], clock: Clock, timeout: float, **options: Any) -> Any:
        return rqueue_subject.open_sync(urls, clock, timeout, sync_cls, **options)

    async def open_async(urls: Sequence[str], clock: Clock, timeout: float, **options: Any) -> Any:
        return await rqueue_subject.open_async(urls, clock, timeout, async_cls, **options)

    return Subject(name, description, open_sync, open_async, expected_valid=False)


EARLY_DEAD_LETTER = _with_options(
    "mutant-early-dead-letter",
    EarlyDeadLetterStatements,
    "rqueue dead-lettering one claim before max_deliveries (expect early-dead-letter)",
)
