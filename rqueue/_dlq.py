"""The dead-letter queue's statements: moving exhausted or expired messages out, listing,
redriving, purging (the operator's calls that run them: :mod:`rqueue._admin`).

With ``max_deliveries`` or ``max_age`` set, every claim request starts with
:meth:`DeadLetters.move`: the heads of groups that were claimed ``max_deliveries``
times, or that are older than ``max_age`` (retention), and are free again (never leased,
or the last lease lapsed, was nacked, or its park ran out, by the claim's own lapse
margin) move to ``rqueue_dead``, tagged with the claim's token and with why
(``reason``), and their groups point at their next message. The move reads only
replicated data and the request's stamp, so every replica moves the same rows; it is
fenced like an ack: a live lease or park is never moved, and the late ack of a lease
that lapsed finds its row gone (``LeaseLost``). The claim then leases as before, in the
same transaction (one request, one Raft entry), and reads back what it moved by its
token (also after an unknown outcome).

A redrive puts messages back at the *tail* of their group, as new messages (new seq,
delivery count 0). The head would need a seq below the group's current head, which may
be leased at that moment: a group's head is what the claim checks for exclusivity, so
slipping a message in front of a leased one would let a second message of the group be
leased. The tail keeps that invariant and the order of everything still queued; the
group had moved on past the message anyway (like a redrive from an SQS dead-letter queue).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._exceptions import ProtocolError
from ._models import DeadLetter, Result, Stmt
from ._statements import NOW, RETENTION_SCAN, Statements

_DEAD_COLUMNS = (
    "seq, group_id, event, priority, deliveries, last_error, enqueued_at, dead_at, reason"
)
#: the columns a move writes, and what it reads for them from a head ``m`` of group ``g``
_MOVED = (
    "INSERT INTO rqueue_dead (seq, group_id, event, priority, deliveries, last_error, "
    "enqueued_at, dead_at, dead_by, reason) "
)
_HEAD = "SELECT m.seq, m.group_id, m.event, g.priority, g.deliveries, m.last_error, "
_HEAD_REST = "m.enqueued_at, {now}, ?, "


class DeadLetters:
    """The dead-letter statements, rendered by a queue's :class:`Statements`."""

    def __init__(self, statements: Statements) -> None:
        self.s = statements

    @property
    def enabled(self) -> bool:
        return self.s.max_deliveries is not None or self.s.max_age is not None

    def move(self, token: str) -> list[Stmt]:
        """Move every exhausted free head (``reason`` 'max_deliveries') and the free heads
        older than ``max_age`` among the first :data:`RETENTION_SCAN` free groups in claim
        order ('retention') to ``rqueue_dead``, tagged ``token``; advance and drop their
        groups. Empty with neither option. The first result's ``rows_affected`` is the
        number moved.

        The exhausted heads are found through the partial index on the group rows'
        ``deliveries > 0`` (a group row counts its head's deliveries), the old ones
        through the claim order's index: so the cost does not grow with the queue. A
        claim never leases a head past ``max_age`` (see ``Statements._free_groups``), so
        such heads stay at the front of the claim order until a move reaches them. A
        message's age counts from when it was due: its ``deliver_at`` if delayed, else
        its ``enqueued_at`` (see ``Statements.expired``).
        """
        s = self.s
        limit, max_age = s.max_deliveries, s.max_age
        if limit is None and max_age is None:
            return []
        exhausted = "g.deliveries > 0 AND g.deliveries >= ?"
        free, unleased = s.free("g")  # a claim's own "free": no live lease or park
        parts: list[str] = []
        params: list[Any] = []
        if limit is not None:
            parts.append(
                f"{_HEAD}{_HEAD_REST}'max_deliveries' FROM \"groups\" g "
                f"JOIN messages m ON m.seq = g.head_seq WHERE {exhausted} AND {free}"
            )
            params += [NOW, token, limit, *unleased]
        if max_age is not None:
            old, aged = s.expired("m")
            parts.append(
                f"{_HEAD}{_HEAD_REST}'retention' FROM (SELECT group_id, head_seq, priority, "
                f'deliveries, locked_by, lock_expiry FROM "groups" g WHERE g.head_seq IS NOT '
                f"NULL AND {free} ORDER BY g.last_claimed_at, g.head_seq LIMIT ?) g "
                f"JOIN messages m ON m.seq = g.head_seq WHERE {old}"
                + ("" if limit is None else f" AND NOT ({exhausted})")
            )
            params += [NOW, token, *unleased, RETENTION_SCAN, *aged]
            if limit is not None:
                params.append(limit)
        mine = "(SELECT group_id FROM rqueue_dead WHERE dead_by = ?)"
        return [
            s.stmt(_MOVED + " UNION ALL ".join(parts), *params),
            # the head moves on; the trigger rqueue_head_advance deletes the moved message
            s.stmt(
                'UPDATE "groups" SET head_seq = (SELECT min(m.seq) FROM messages m '
                'WHERE m.group_id = "groups".group_id AND m.seq > "groups".head_seq), '
                "locked_by = NULL, lock_expiry = NULL, deliveries = 0 "
                f"WHERE group_id IN {mine}",
                token,
            ),
            s.stmt(f'DELETE FROM "groups" WHERE head_seq IS NULL AND group_id IN {mine}', token),
        ]

    def moved_by(self, token: str) -> list[Stmt]:
        """Read what the claim with ``token`` moved (empty without ``max_deliveries``)."""
        if not self.enabled:
            return []
        return [self.s.stmt(f"SELECT {_DEAD_COLUMNS} FROM rqueue_dead WHERE dead_by = ?", token)]

    def list(self, group_id: str | None, after: int, limit: int) -> Stmt:
        where, params = _selection(None, group_id)
        return self.s.stmt(
            f"SELECT {_DEAD_COLUMNS} FROM rqueue_dead WHERE {where} AND seq > ? "
            "ORDER BY seq LIMIT ?",
            *params,
            after,
            limit,
        )

    def redrive(self, seq: int | None, group_id: str | None) -> list[Stmt]:
        """Back at the tail of each group as new messages (``enqueued_at`` the request's
        time); the first result's ``rows_affected`` is how many."""
        where, params = _selection(seq, group_id)
        return [
            self.s.stmt(
                "INSERT INTO messages (group_id, event, enqueued_at) "
                f"SELECT group_id, event, {{now}} FROM rqueue_dead WHERE {where} "
                "ORDER BY seq",
                NOW,
                *params,
            ),
            self.s.stmt(
                "INSERT OR IGNORE INTO groups (group_id, priority, head_seq) "
                "SELECT d.group_id, max(d.priority), "
                "(SELECT min(m.seq) FROM messages m WHERE m.group_id = d.group_id) "
                f"FROM rqueue_dead d WHERE {where} GROUP BY d.group_id",
                *params,
            ),
            self.s.stmt(f"DELETE FROM rqueue_dead WHERE {where}", *params),
        ]

    def purge(self, seq: int | None, group_id: str | None) -> Stmt:
        where, params = _selection(seq, group_id)
        return self.s.stmt(f"DELETE FROM rqueue_dead WHERE {where}", *params)


def _selection(seq: int | None, group_id: str | None) -> tuple[str, tuple[Any, ...]]:
    """The WHERE clause for one message (``seq``), a group, or everything (neither)."""
    if seq is not None:
        return "seq = ?", (seq,)
    if group_id is not None:
        return "group_id = ?", (group_id,)
    return "1 = 1", ()


def dead_letters_of(res: Result) -> list[DeadLetter]:
    """Rows of ``rqueue_dead`` (in :data:`_DEAD_COLUMNS` order) as :class:`DeadLetter`."""
    try:
        return [
            DeadLetter(
                seq=int(r["seq"]),
                group_id=str(r["group_id"]),
                event=str(r["event"]),
                priority=int(r["priority"]),
                deliveries=int(r["deliveries"]),
                last_error=r.get("last_error"),
                enqueued_at=_num(r.get("enqueued_at")),
                dead_at=_num(r.get("dead_at")),
                reason=r.get("reason"),
            )
            for r in res.dicts()
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"dead letters: unreadable row: {exc}") from exc


def _num(x: Any) -> float | None:
    return None if x is None else float(x)


def collect(into: dict[int, DeadLetter], results: Sequence[Result]) -> None:
    """Add the dead letters read back by :meth:`DeadLetters.moved_by` to ``into``."""
    for res in results:
        for d in dead_letters_of(res):
            into[d.seq] = d
