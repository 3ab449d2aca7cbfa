"""Every SQL statement rqueue sends, built by the methods of one class.

:class:`Statements` is the hook for *mutant* subjects: a transport uses it through its
``statements_class`` attribute, so the harness can subclass a transport, subclass
``Statements``, override one builder and get a deliberately broken queue, e.g.::

    class NoExclusivity(Statements):
        def claim_lease(self, token, visibility, min_priority):
            ...  # pick any free message, ignoring whether its group is in flight

    class Mutant(RqliteTransport):
        statements_class = NoExclusivity

Builders write ``{now}`` where the lease clock's current time goes and pass :data:`NOW`
(how that becomes the request's time, never a replica's: :mod:`rqueue._render`). This
module holds the claims and the settling of leases; the class inherits the publish
builders (:mod:`rqueue._publish`) and the rendering (:class:`~rqueue._render.Renderer`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from ._models import Claim, Fuse, Lease, Stmt
from ._publish import (
    BATCH_ITEMS,
    LAST_SEQ,
    MAX_PARAMS,
    PublishStatements,
    batch_chunks,
    batch_params,
)
from ._render import CLOCK_REF, NOW, SERVER_CLOCK_STEP, SERVER_NOW, SERVER_UTC, STAMP
from ._zone import ZoneGuard

__all__ = [
    "BATCH_ITEMS",
    "CLOCK_REF",
    "DEFAULT_CLOCK_TOLERANCE",
    "LAST_SEQ",
    "LEASE_RETURNING",
    "MAX_PARAMS",
    "NOW",
    "PARKED",
    "RETENTION_SCAN",
    "SERVER_CLOCK_STEP",
    "SERVER_NOW",
    "SERVER_UTC",
    "STAMP",
    "Statements",
    "batch_chunks",
    "batch_params",
]

#: default bound on how far apart the clocks that stamp and check a lease may be
DEFAULT_CLOCK_TOLERANCE = 0.25
#: a lease's columns, as a claim returns them (its ``RETURNING``) or reads them back from
#: the group row that holds it: seq, group_id, event, lock_expiry
LEASE_RETURNING = (
    "head_seq AS seq, group_id, "
    "(SELECT event FROM messages WHERE seq = head_seq) AS event, lock_expiry"
)
#: the ``locked_by`` value of a message parked by ``nack(delay > 0)``, or of a delayed
#: message (``publish(..., delay > 0)``) while it is its group's head and not yet due
PARKED = "__parked__"
#: what ``rqueue_keys`` remembers an applied ack (the trigger ``rqueue_settled_ack``)
#: and an applied nack by: this prefix and the lease's token
ACKED = "ack:"
NACKED = "nack:"
#: how many free groups, in claim order, each claim checks for heads older than
#: ``max_age`` (retention moves them out group by group, see rqueue._dlq)
RETENTION_SCAN = 16


#: the builders whose statements :meth:`Statements.fused` replaces in merged requests
_FUSED = (
    "claim_lease",
    "claim_returning",
    "claim_batch",
    "ack",
    "_acked",
    "ack_and_claim",
    "_drop_if_empty",
    "_free_groups",
)


@functools.cache
def _own_fused_builders(cls: type) -> bool:
    """Whether ``cls`` writes claims, acks and drops as :class:`Statements` does."""
    return all(getattr(cls, name) is getattr(Statements, name) for name in _FUSED)


def _marks(items: Sequence[Any]) -> str:
    return ", ".join(["?"] * len(items))


def _acked_key(lease: Lease | None) -> tuple[str | None, str | None]:
    """The group and token a chained claim checks ``acked_by`` of (None: not chained)."""
    return (None, None) if lease is None else (lease.group_id, lease.token)


class Statements(PublishStatements):
    """The statement builders: schema-independent SQL for each queue operation.

    ``server_clock`` True: lease times come from the server (``SERVER_NOW``); False:
    from ``clock()`` on this worker (old rqlite without time rewriting).
    """

    #: send text that rqlite (>= 8.31) could take for a blob literal as its bytes, cast
    #: back to text (:mod:`rqueue._text`); a mutant subject turns it off
    text_as_bytes: bool = True
    #: guard the stamp against nodes whose rewritten time is off UTC, and check and
    #: refuse such nodes (:mod:`rqueue._zone`); a mutant subject turns it off
    zone_guard: bool = True
    #: make every write safe to apply twice (a server's resend) and to retry after a lost
    #: reply: publishes carry an idempotency key, a claim applied again answers with the
    #: lease of its token, settled tokens are remembered; a mutant subject turns it off
    idempotency: bool = True

    def __init__(
        self,
        *,
        server_clock: bool,
        clock: Callable[[], float],
        clock_tolerance: float = DEFAULT_CLOCK_TOLERANCE,
        max_deliveries: int | None = None,
        max_age: float | None = None,
        zone: ZoneGuard | None = None,
    ) -> None:
        self.server_clock = server_clock
        #: the stamp's guard against nodes off UTC (rqueue._zone; None: an unguarded stamp)
        self.zone = zone
        #: claims a message may get before it is dead-lettered (None: no limit)
        self.max_deliveries = max_deliveries
        #: seconds a message may stay queued once due before it is dead-lettered
        #: (retention; None: kept until acked)
        self.max_age = max_age
        self.clock = clock
        #: a lease (or park) counts as lapsed only this long after its stored expiry: the
        #: clocks that stamp and check it (nodes, or workers without server time) may
        #: disagree by up to ``clock_tolerance``, and two rounded server timestamps differ
        #: from real time by up to one step; without the margin a claim could take a group
        #: whose lease has not yet run out
        self.lapse_margin = clock_tolerance + (SERVER_CLOCK_STEP if server_clock else 0.0)
        #: merged requests merge claims, acks and drops into one statement of each kind
        #: (:meth:`fused`), for :attr:`fuser`; a queue's core decides it for itself, by its
        #: server (``QueueCore.fusing``: where the parser takes ``UPDATE ... FROM``, rqlite
        #: >= 9, so the merged claim returns its rows) and asks :meth:`fuser_for`
        self.fusing = False

    @property
    def fuser(self) -> Statements | None:
        """:meth:`fuser_for` :attr:`fusing`."""
        return self.fuser_for(self.fusing)

    def fuser_for(self, fusing: bool) -> Statements | None:
        """This object, for merged requests to fuse statements with (:meth:`fused`); None
        when ``fusing`` is off, or when a subclass writes a claim, ack or drop its own way
        (a mutant's statement must not be replaced by this class's fused one)."""
        return self if fusing and _own_fused_builders(type(self)) else None

    # -- claim --------------------------------------------------------------------------
    def _free_groups(self, min_priority: int) -> tuple[str, tuple[Any, ...]]:
        """The WHERE clause (on ``"groups"``) of a group a claim may take, and its
        parameters: a head, the priority floor, no live lease or park (a delayed head
        not yet due is parked), not exhausted, not past ``max_age`` (such a head waits
        for a claim's retention move, see rqueue._dlq)."""
        exhausted: str = ""
        limit: tuple[Any, ...] = ()
        if self.max_deliveries is not None:
            exhausted, limit = "AND deliveries < ? ", (self.max_deliveries,)
        if self.max_age is not None:
            old, aged = self.expired("due")
            exhausted += (
                f"AND NOT EXISTS (SELECT 1 FROM messages due WHERE due.seq = head_seq AND {old}) "
            )
            limit = (*limit, *aged)
        free, unleased = self.free()
        return (
            f"head_seq IS NOT NULL AND priority >= ? AND {free} " + exhausted,
            (min_priority, *unleased, *limit),
        )

    def free(self, alias: str = "") -> tuple[str, tuple[Any, ...]]:
        """The condition (and its parameters) that group row ``alias`` (none: the row the
        statement updates) holds no live lease or park: none, or lapsed by
        :attr:`lapse_margin`. Claims and dead-letter moves share it, so nothing a claim
        would not take is ever moved."""
        a = f"{alias}." if alias else ""
        return (
            f"({a}locked_by IS NULL OR {a}lock_expiry < {{now}} - ?)",
            (NOW, self.lapse_margin),
        )

    def expired(self, alias: str) -> tuple[str, tuple[Any, ...]]:
        """The condition (and its parameters) that message ``alias`` is older than
        :attr:`max_age`: counted from when it became claimable, its ``enqueued_at``, or
        for a delayed message its ``deliver_at`` plus the lapse margin (the park that
        holds it back lapses only then). No enqueue time: never."""
        return (
            f"coalesce({alias}.deliver_at + ?, {alias}.enqueued_at) < {{now}} - ?",
            (self.lapse_margin, NOW, self.max_age),
        )

    def claim_lease(self, token: str, visibility: float, min_priority: int) -> Stmt:
        """Lease the next deliverable group's head to ``token``: one UPDATE of one row.

        The lease lives on the group row (``locked_by``, ``lock_expiry``, the head's
        ``deliveries``), with the group's round-robin key ``last_claimed_at``: so a claim
        writes that one row and nothing else. The seed's selection, exactly: groups in
        ``last_claimed_at`` order (then by the head's seq), priority floor, and only a
        group with nothing in flight (one lease per group row is per-group exclusivity;
        only the head is ever leased, which is FIFO). The order comes from an index, so
        the cost does not grow with the number of queued messages. The new key is kept
        strictly above every other group's (the max from the same index): rqlite's
        rewritten ``now`` has a resolution of 86.4 ms and a new leader's clock may lag,
        and either would otherwise reorder groups claimed close together. A row already
        leased to ``token`` (this claim applied before: a server's resend of the same
        request, or rqueue's retry after a late first application) is taken again as it
        is, before any free row: no second lease, no second delivery, the same expiry and
        key, so the answer is the first application's lease (without
        :attr:`idempotency`, a mutant's, the UPDATE does nothing then). A lease lapses
        :attr:`lapse_margin` after its stored expiry. Each claim counts a delivery; with
        :attr:`max_deliveries`, a head claimed that often is skipped (the claim's
        dead-lettering moves it out, see rqueue._dlq). ``"groups"`` is quoted so that
        rqlite's parser accepts the statement, which it must for :meth:`claim_returning`.
        """
        free, params = self._free_groups(min_priority)
        if not self.idempotency:
            return self.stmt(
                'UPDATE "groups" SET locked_by = ?, lock_expiry = {now} + ?, '
                "deliveries = deliveries + 1, last_claimed_at = "
                'max({now}, (SELECT max(last_claimed_at) FROM "groups") + 0.000001) '
                'WHERE group_id = (SELECT group_id FROM "groups" WHERE '
                f"{free}ORDER BY last_claimed_at ASC, head_seq ASC LIMIT 1) "
                'AND NOT EXISTS (SELECT 1 FROM "groups" WHERE locked_by = ?)',
                token,
                NOW,
                visibility,
                NOW,
                *params,
                token,
            )
        # a row already leased to the token (this claim applied before: a resend, a
        # retry) is taken again unchanged, so the answer is that lease
        return self.stmt(
            'UPDATE "groups" SET locked_by = ?, lock_expiry = CASE WHEN locked_by = ? '
            "THEN lock_expiry ELSE {now} + ? END, deliveries = deliveries + "
            "(locked_by IS NOT ?), last_claimed_at = CASE WHEN locked_by = ? THEN "
            'last_claimed_at ELSE max({now}, (SELECT max(last_claimed_at) FROM "groups") '
            '+ 0.000001) END WHERE group_id = coalesce((SELECT group_id FROM "groups" '
            f'WHERE locked_by = ?), (SELECT group_id FROM "groups" WHERE {free}'
            "ORDER BY last_claimed_at ASC, head_seq ASC LIMIT 1))",
            token,
            token,
            NOW,
            visibility,
            token,
            token,
            NOW,
            token,
            *params,
        )

    def claim_returning(self, token: str, visibility: float, min_priority: int) -> Stmt:
        """:meth:`claim_lease` returning the leased message (``RETURNING``): no read-back.

        rqlite >= 8.23 returns the rows of a write (on ``/db/execute`` as on
        ``/db/request``) only when its own parser accepts the statement and finds the
        ``RETURNING`` clause; otherwise it runs it as a plain write and answers without
        ``columns`` (the core then reads the row back by token). A subclass whose
        ``claim_lease`` names ``groups`` unquoted gets that slower path, never a wrong one.
        """
        lease = self.claim_lease(token, visibility, min_priority)
        fuse = Fuse("claim", claims=(Claim(token, visibility),), min_priority=min_priority)
        return Stmt(f"{lease.sql} RETURNING {LEASE_RETURNING}", lease.params, fuse)

    def claim_batch(self, claims: Sequence[Claim], min_priority: int) -> Stmt:
        """Lease up to ``len(claims)`` heads of as many distinct groups with one UPDATE,
        the i-th free group (in claim order) to the i-th claim whose token is not in use
        yet and whose condition holds, each with its own token and visibility; returns
        the leased rows with their tokens (``RETURNING``).

        The same selection and the same new round-robin keys as that many
        :meth:`claim_lease` in a row: each group taken gets a key above every other
        group's, in the order taken. A claim's ``after_ack`` (a lease token) makes it
        run only if the ack of that lease applied earlier in the request (the ack wrote
        its token to its group row's ``acked_by``, see :meth:`ack`; the group is dropped
        only after the claim). Needs ``UPDATE ... FROM``
        (SQLite >= 3.33), which rqlite's parser accepts from v9 on (v8 runs it without
        ``RETURNING`` rows: the core then reads the leases back by token).
        """
        if not claims:
            raise ValueError("claim_batch: no claims")
        want = ", ".join(["(?, ?, ?, ?, ?)"] * len(claims))
        free, params = self._free_groups(min_priority)
        stmt = self.stmt(
            self._claim_batch_sql(want, free),
            *(
                v
                for i, c in enumerate(claims, 1)
                for v in (i, c.token, c.visibility, *_acked_key(c.after_ack))
            ),
            *params,
            NOW,
            NOW,
        )
        fuse = Fuse("claim", claims=tuple(claims), min_priority=min_priority)
        return Stmt(stmt.sql, stmt.params, fuse)

    def _claim_batch_sql(self, want: str, free: str) -> str:
        """:meth:`claim_batch`'s SQL. With :attr:`idempotency`, a token already in use
        (the claim applied before: a server's resend, a retry) takes its row again as it
        is (the second part of ``pick``: no new delivery, the same expiry and key), so the
        answer holds every lease; a held row that a free one also names (its lease
        lapsed) is left to the free one. The unary ``+`` on ``pick.group_id`` keeps SQLite
        (3.54, as the node and rqlite's go-sqlite3 carry it) from indexing ``pick`` and
        scanning every group row against it: ``pick`` drives, each row found by its key.
        Without (a mutant's), a token in use leases nothing and answers nothing."""
        ctes = (
            f"WITH want (pos, token, visibility, ack_group, ack_token) AS (VALUES {want}), "
            "ready (token, visibility, rank) AS (SELECT token, visibility, "
            "row_number() OVER (ORDER BY pos) FROM want WHERE NOT EXISTS "
            '(SELECT 1 FROM "groups" g WHERE g.locked_by = want.token) AND (ack_token IS NULL '
            'OR EXISTS (SELECT 1 FROM "groups" g WHERE g.group_id = want.ack_group '
            "AND g.acked_by = want.ack_token))), "
            "free (group_id, rank) AS (SELECT group_id, row_number() OVER "
            "(ORDER BY last_claimed_at, head_seq) FROM (SELECT group_id, last_claimed_at, "
            f'head_seq FROM "groups" WHERE {free}ORDER BY last_claimed_at ASC, '
            "head_seq ASC LIMIT (SELECT count(*) FROM ready))), "
            'top (t) AS (SELECT max({now}, (SELECT max(last_claimed_at) FROM "groups")))'
        )
        returning = f"RETURNING {LEASE_RETURNING}, locked_by AS token"
        if not self.idempotency:
            return (
                f'{ctes} UPDATE "groups" SET locked_by = ready.token, '
                "lock_expiry = {now} + ready.visibility, deliveries = deliveries + 1, "
                "last_claimed_at = (SELECT t FROM top) + ready.rank * 0.000001 "
                'FROM free JOIN ready ON ready.rank = free.rank WHERE "groups".group_id = '
                f"free.group_id {returning}"
            )
        return (
            f'{ctes} UPDATE "groups" SET locked_by = pick.token, '
            "lock_expiry = coalesce({now} + pick.visibility, lock_expiry), "
            "deliveries = deliveries + (pick.rank IS NOT NULL), "
            "last_claimed_at = coalesce((SELECT t FROM top) + pick.rank * 0.000001, "
            "last_claimed_at) FROM (SELECT free.group_id AS group_id, ready.token AS token, "
            "ready.visibility AS visibility, ready.rank AS rank FROM free JOIN ready ON "
            "ready.rank = free.rank UNION ALL SELECT g.group_id, g.locked_by, NULL, NULL "
            'FROM "groups" g WHERE g.locked_by IN (SELECT token FROM want) AND g.group_id NOT IN '
            '(SELECT group_id FROM free)) AS pick WHERE "groups".group_id = +pick.group_id '
            f"{returning}"
        )

    def claim_read_back(self, token: str) -> Stmt:
        """Read the lease of ``token``: seq, group_id, event, lock_expiry."""
        return self.stmt(f'SELECT {LEASE_RETURNING} FROM "groups" WHERE locked_by = ?', token)

    # -- settle (fenced by the lease's token) -------------------------------------------
    def ack(self, lease: Lease) -> list[Stmt]:
        """Release the group and point it at its next message if still leased to this
        token (the head's row goes with it: the trigger ``rqueue_head_advance``); drop
        the group if that was its last message.

        The first result's ``rows_affected`` is 1 when the ack took effect.
        """
        return [self._acked(lease), self._drop_if_empty(lease.group_id)]

    def _acked(self, lease: Lease) -> Stmt:
        """The fenced head advance of an ack (it records the token in ``acked_by``)."""
        stmt = self.stmt(
            'UPDATE "groups" SET head_seq = (SELECT min(seq) FROM messages '
            "WHERE group_id = ? AND seq > ?), locked_by = NULL, lock_expiry = NULL, "
            "deliveries = 0, acked_by = ? "
            "WHERE group_id = ? AND head_seq = ? AND locked_by = ? AND lock_expiry >= {now}",
            lease.group_id,
            lease.seq,
            lease.token,
            lease.group_id,
            lease.seq,
            lease.token,
            NOW,
        )
        return Stmt(stmt.sql, stmt.params, Fuse("ack", leases=(lease,)))

    def _drop_if_empty(self, group_id: str) -> Stmt:
        stmt = self.stmt('DELETE FROM "groups" WHERE group_id = ? AND head_seq IS NULL', group_id)
        return Stmt(stmt.sql, stmt.params, Fuse("drop", groups=(group_id,)))

    def ack_batch(self, leases: Sequence[Lease]) -> list[Stmt]:
        """Ack every lease in ``leases`` (of distinct groups) with one fenced UPDATE, then
        drop the groups left empty with one DELETE.

        A group row carries a token only while its head is leased to it (an ack or a
        dead-letter move clears it as the head moves on), so the token and the lease's
        expiry fence each ack. Each applied ack writes its token to ``acked_by``, and the
        UPDATE returns those tokens (``RETURNING``): each ack's outcome is known alone.
        """
        if not leases:
            raise ValueError("ack_batch: no leases")
        groups = tuple(dict.fromkeys(x.group_id for x in leases))
        stmt = self.stmt(
            'UPDATE "groups" SET head_seq = (SELECT min(m.seq) FROM messages m WHERE '
            'm.group_id = "groups".group_id AND m.seq > "groups".head_seq), '
            "locked_by = NULL, lock_expiry = NULL, deliveries = 0, acked_by = locked_by "
            f"WHERE group_id IN ({_marks(groups)}) AND locked_by IN ({_marks(leases)}) "
            "AND lock_expiry >= {now} RETURNING acked_by",
            *groups,
            *(x.token for x in leases),
            NOW,
        )
        acked = Stmt(stmt.sql, stmt.params, Fuse("ack", leases=tuple(leases)))
        return [acked, self._drops(groups)]

    def _drops(self, groups: Sequence[str]) -> Stmt:
        stmt = self.stmt(
            f'DELETE FROM "groups" WHERE group_id IN ({_marks(groups)}) AND head_seq IS NULL',
            *groups,
        )
        return Stmt(stmt.sql, stmt.params, Fuse("drop", groups=tuple(groups)))

    def fused(self, fuses: Sequence[Fuse]) -> Stmt:
        """One statement doing what the statements of ``fuses`` (all of one kind, and for
        claims of one priority floor) do, in their order."""
        kind = fuses[0].kind
        if kind == "ack":
            return self.ack_batch([x for f in fuses for x in f.leases])[0]
        if kind == "drop":
            return self._drops(tuple(dict.fromkeys(g for f in fuses for g in f.groups)))
        if kind == "claim":
            claims = [c for f in fuses for c in f.claims]
            return self.claim_batch(claims, fuses[0].min_priority)
        raise ValueError(f"fused: unknown kind {kind!r}")

    def ack_and_claim(
        self, lease: Lease, token: str, visibility: float, min_priority: int
    ) -> list[Stmt]:
        """Ack ``lease`` and, only if that ack took effect, lease the next message to ``token``.

        One transaction of three statements: the ack's fenced head advance (its
        ``rows_affected`` is 1 when the ack took effect), the claim returning the leased
        row (see :meth:`claim_returning`), chained to the ack by SQLite's ``changes()``,
        and the emptied group's removal. So nothing is leased unless *this* ack applied,
        even when another holder's ack had already moved the group on after this lease
        lapsed. ``changes()`` is deterministic, so every replica agrees.
        """
        lease_next = self.claim_lease(token, visibility, min_priority)
        fuse = Fuse("claim", claims=(Claim(token, visibility, lease),), min_priority=min_priority)
        guarded = Stmt(
            f"{lease_next.sql} AND changes() > 0 RETURNING {LEASE_RETURNING}",
            lease_next.params,
            fuse,
        )
        return [self._acked(lease), guarded, self._drop_if_empty(lease.group_id)]

    def _fence(self, lease: Lease) -> tuple[str, tuple[Any, ...]]:
        return (
            "WHERE group_id = ? AND head_seq = ? AND locked_by = ? AND lock_expiry >= {now}",
            (lease.group_id, lease.seq, lease.token, NOW),
        )

    def nack(self, lease: Lease, delay: float, error: str | None = None) -> list[Stmt]:
        """Release (``delay == 0``) or park until ``now + delay`` if still leased;
        ``error`` (the worker's reason) is kept on the message for the dead-letter queue,
        only if the release applied."""
        fence, fenced = self._fence(lease)
        if delay > 0:
            first = self.stmt(
                'UPDATE "groups" SET locked_by = ?, lock_expiry = {now} + ? ' + fence,
                PARKED,
                NOW,
                delay,
                *fenced,
            )
        else:
            first = self.stmt(
                'UPDATE "groups" SET locked_by = NULL, lock_expiry = NULL ' + fence, *fenced
            )
        settled: list[Stmt] = []
        if self.idempotency:
            # remembered: the same nack applied again (or retried) learns it applied
            settled.append(
                self.stmt(
                    "INSERT OR IGNORE INTO rqueue_keys (idem_key, seq, created_at) "
                    "SELECT ?, ?, {now} WHERE changes() > 0",
                    self.nack_key(lease, delay),
                    lease.seq,
                    NOW,
                )
            )
        if error is None:
            return [first, *settled]
        noted = self.stmt(
            "UPDATE messages SET last_error = ? WHERE seq = ? AND changes() > 0", error, lease.seq
        )
        return [first, *settled, noted]

    def nack_key(self, lease: Lease, delay: float) -> str:
        """What ``rqueue_keys`` remembers an applied nack of ``lease`` by: its delay too,
        so only a nack asking the same is answered by it."""
        return f"{NACKED}{float(delay)!r}:{lease.token}"

    def settled(self, key: str) -> Stmt:
        """Read whether ``key`` (:data:`ACKED` or :data:`NACKED` and a token) is
        remembered: one row if it is."""
        return self.stmt("SELECT 1 FROM rqueue_keys WHERE idem_key = ?", key)

    def extend(self, lease: Lease, visibility: float) -> Stmt:
        """Push the lease's expiry to ``now + visibility`` if still leased."""
        fence, fenced = self._fence(lease)
        return self.stmt(
            'UPDATE "groups" SET lock_expiry = {now} + ? ' + fence, NOW, visibility, *fenced
        )

    def extend_returning(self, lease: Lease, visibility: float) -> Stmt:
        """:meth:`extend` returning the new ``lock_expiry`` (no row: the lease is gone).

        As with :meth:`claim_returning`, a server whose parser does not accept the
        statement runs it as a plain write and answers without ``columns``: the core then
        reads the expiry back.
        """
        extended = self.extend(lease, visibility)
        return Stmt(f"{extended.sql} RETURNING lock_expiry", extended.params)

    def extended_read_back(self, lease: Lease) -> Stmt:
        """Read the ``lock_expiry`` of the lease still held by ``lease.token``."""
        return self.stmt(
            'SELECT lock_expiry FROM "groups" WHERE group_id = ? AND head_seq = ? '
            "AND locked_by = ?",
            lease.group_id,
            lease.seq,
            lease.token,
            read=True,
        )

    def lookup(self, lease: Lease) -> Stmt:
        """Read who holds the message of ``lease`` and whether that lease is live:
        locked_by, live (no row: the message is gone, only a head is ever leased)."""
        return self.stmt(
            'SELECT locked_by, lock_expiry >= {now} FROM "groups" '
            "WHERE group_id = ? AND head_seq = ?",
            NOW,
            lease.group_id,
            lease.seq,
            read=True,
        )
