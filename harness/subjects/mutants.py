"""Mutant subjects: rqueue with one statement builder broken on purpose.

Each mutant subclasses rqueue's :class:`~rqueue.Statements`, overrides exactly one
builder, and plugs it into subclasses of both transports through their
``statements_class`` hook. The harness's own tests run them and assert that the checker
catches each bug:

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


class NoExclusivityStatements(Statements):
    """Lease the oldest free message of any group, in flight or not."""

    def claim_lease(self, token: str, visibility: float, min_priority: int):
        return self.stmt(
            "UPDATE messages SET locked_by = ?, lock_expiry = {now} + ? WHERE seq = ("
            "SELECT m.seq FROM messages m JOIN groups g ON g.group_id = m.group_id "
            "WHERE g.priority >= ? AND (m.locked_by IS NULL OR m.lock_expiry < {now}) "
            "ORDER BY g.last_claimed_at ASC, m.seq ASC LIMIT 1) "
            "AND NOT EXISTS (SELECT 1 FROM messages WHERE locked_by = ?)",
            token,
            NOW,
            visibility,
            min_priority,
            NOW,
            token,
        )


class LifoStatements(Statements):
    """Keep group exclusivity, but lease the group's newest message."""

    def claim_lease(self, token: str, visibility: float, min_priority: int):
        return self.stmt(
            "UPDATE messages SET locked_by = ?, lock_expiry = {now} + ? WHERE seq = ("
            "SELECT (SELECT max(x.seq) FROM messages x WHERE x.group_id = g.group_id) "
            "FROM groups g WHERE g.priority >= ? AND NOT EXISTS ("
            "SELECT 1 FROM messages y WHERE y.group_id = g.group_id "
            "AND y.locked_by IS NOT NULL AND y.lock_expiry >= {now}) "
            "ORDER BY g.last_claimed_at ASC LIMIT 1) "
            "AND NOT EXISTS (SELECT 1 FROM messages WHERE locked_by = ?)",
            token,
            NOW,
            visibility,
            min_priority,
            NOW,
            token,
        )


class AckWrongRowStatements(Statements):
    """Ack deletes the group's next message (the leased one only when it is the last)
    and releases the leased one."""

    def ack(self, lease: Lease):
        wrong = self.stmt(
            "DELETE FROM messages WHERE seq = COALESCE("
            "(SELECT min(seq) FROM messages WHERE group_id = ? AND seq > ?), ?)",
            lease.group_id,
            lease.seq,
            lease.seq,
        )
        # ...and lets go of the leased row, as if it were gone (so runs drain quickly)
        release = self.stmt(
            "UPDATE messages SET locked_by = NULL, lock_expiry = 0 WHERE seq = ? AND locked_by = ?",
            lease.seq,
            lease.token,
        )
        return [wrong, release, *super().ack(lease)[1:]]

    def ack_and_claim(self, lease: Lease, token: str, visibility: float, min_priority: int):
        """The fused call with this ack: its wrong delete, then its release, to which the
        claim is chained (so the leased row is let go here too)."""
        fused = super().ack_and_claim(lease, token, visibility, min_priority)
        return [fused[0], self.ack(lease)[1], *fused[1:]]


#: the server's clock in epoch seconds, written out (not rqueue's rendering of it)
_SERVER_NOW = "((julianday('now') - 2440587.5) * 86400.0)"
#: how long after its stored expiry a lease counts as lapsed (rqueue's default margin)
_LAPSE_MARGIN = 0.25


class SubqueryNowStatements(Statements):
    """rqueue's claim, with the server's clock read where rqlite does not rewrite it.

    The message is picked by a scalar subquery comparing leases with the server's
    ``now``, and the new lease's expiry is ``(SELECT now) + visibility``: rqlite leaves
    ``'now'`` inside a scalar subquery as it is, so every replica evaluates its own
    clock when it applies the entry, and a restarted node its clock at replay. Replicas
    then store different expiries and, around a lease's lapse, lease different rows.
    """

    def claim_lease(self, token: str, visibility: float, min_priority: int) -> Stmt:
        return Stmt(
            f"UPDATE messages SET locked_by = ?, lock_expiry = (SELECT {_SERVER_NOW}) + ? "
            "WHERE seq = ("
            "SELECT g.head_seq FROM groups g JOIN messages m ON m.seq = g.head_seq "
            f"WHERE g.priority >= ? AND (m.locked_by IS NULL OR m.lock_expiry < {_SERVER_NOW} - ?) "
            "ORDER BY g.last_claimed_at ASC, g.head_seq ASC LIMIT 1) "
            "AND NOT EXISTS (SELECT 1 FROM messages WHERE locked_by = ?)",
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
