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
at the matching place among the positional parameters; :meth:`Statements.stmt` renders
it and checks that placeholders and parameters line up. Every value is a parameter;
nothing a caller passes is put into SQL text.

No write may depend on when or where it is applied: every replica applies each Raft
entry at its own moment (and a restarted node replays its log much later), so a time
function evaluated at apply time makes the replicas disagree. rqlite >= 8.33 rewrites
``'now'`` to a literal on the node that receives the request, but only where its own
SQL parser accepts the statement and its tree walk reaches the call: not inside a scalar
subquery, not in a ``WITH`` clause, not where an unquoted table name ``groups`` stands
where that parser rejects it as a keyword (``UPDATE groups``, ``DELETE FROM groups``,
``FROM groups``). So ``{now}`` in a write never becomes a time function:

- *server clock* (rqlite >= 8.33): a request whose statements need the time starts with
  :meth:`Statements.stamp`, one top-level ``INSERT ... VALUES`` that rqlite rewrites,
  storing the receiving node's time in the one-row table ``rqueue_clock``; ``{now}``
  reads it back (:data:`CLOCK_REF`), a plain read of replicated data;
- otherwise the time is a bound parameter: the leader's clock as measured over the
  connection (:class:`rqueue._clock.LeaderClock`), or the caller's ``clock``.

Reads (``read=True``) are not replicated and may use the answering node's clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ._models import Lease, Stmt

#: server time in epoch seconds, as SQL; rqlite >= 8.33 rewrites it to a literal on the
#: node that receives the request, where its parser reaches it (see the module's doc)
SERVER_NOW = "((julianday('now') - 2440587.5) * 86400.0)"
#: the stamped server time of this request, as a write reads it (server clock)
CLOCK_REF = "(SELECT ts FROM rqueue_clock WHERE id = 1)"
#: the stamp: a top-level VALUES that rqlite's parser accepts and rewrites
STAMP = Stmt(f"INSERT OR REPLACE INTO rqueue_clock (id, ts) VALUES (1, {SERVER_NOW})")
#: resolution of the server clock: rqlite prints the rewritten ``now`` as a Julian day
#: with six decimals, so each server timestamp is rounded by up to half of this
SERVER_CLOCK_STEP = 86400.0 / 1e6
#: default bound on how far apart the clocks that stamp and check a lease may be
DEFAULT_CLOCK_TOLERANCE = 0.25
#: a leased row's columns, as a claim returns them (its ``RETURNING``) or reads them back
LEASE_COLUMNS = "seq, group_id, event, lock_expiry"
#: the highest seq ever given to a message (``messages`` is ``AUTOINCREMENT``)
LAST_SEQ = "(SELECT seq FROM sqlite_sequence WHERE name = 'messages')"
#: most items in one :meth:`Statements.publish_batch`: 2 parameters per message, 3 per
#: group and the one enqueue time stay within the 999 that SQLite binds before 3.32
BATCH_ITEMS = 199
#: the ``locked_by`` value of a message parked by ``nack(delay > 0)``
PARKED = "__parked__"


class _Now:
    def __repr__(self) -> str:
        return "NOW"


#: stands in the parameter list where the lease clock's ``now`` goes
NOW = _Now()

_PLACEHOLDER = re.compile(r"\?|\{now\}")


class Statements:
    """The statement builders: schema-independent SQL for each queue operation.

    ``server_clock`` True: lease times come from the server (``SERVER_NOW``); False:
    from ``clock()`` on this worker (old rqlite without time rewriting).
    """

    def __init__(
        self,
        *,
        server_clock: bool,
        clock: Callable[[], float],
        clock_tolerance: float = DEFAULT_CLOCK_TOLERANCE,
        max_deliveries: int | None = None,
    ) -> None:
        self.server_clock = server_clock
        #: claims a message may get before it is dead-lettered (None: no limit)
        self.max_deliveries = max_deliveries
        self.clock = clock
        #: a lease (or park) counts as lapsed only this long after its stored expiry: the
        #: clocks that stamp and check it (nodes, or workers without server time) may
        #: disagree by up to ``clock_tolerance``, and two rounded server timestamps differ
        #: from real time by up to one step; without the margin a claim could take a group
        #: whose lease has not yet run out
        self.lapse_margin = clock_tolerance + (SERVER_CLOCK_STEP if server_clock else 0.0)

    # -- rendering ----------------------------------------------------------------------
    def stmt(self, sql: str, *params: Any, read: bool = False) -> Stmt:
        """Render ``{now}`` placeholders and their :data:`NOW` parameters.

        With the server clock a write reads the request's stamp (:data:`CLOCK_REF`:
        the request must start with :meth:`stamp`), a read the answering node's clock.
        """
        slots = _PLACEHOLDER.findall(sql)
        if len(slots) != len(params):
            raise AssertionError(f"{len(slots)} placeholders but {len(params)} params: {sql}")
        for slot, param in zip(slots, params, strict=True):
            if (slot == "{now}") != (param is NOW):
                raise AssertionError(f"placeholder {slot} does not match {param!r}: {sql}")
        if self.server_clock:
            ref = SERVER_NOW if read else CLOCK_REF
            return Stmt(sql.replace("{now}", ref), tuple(p for p in params if p is not NOW))
        if "{now}" not in sql:
            return Stmt(sql, params)
        now = float(self.clock())
        return Stmt(sql.replace("{now}", "?"), tuple(now if p is NOW else p for p in params))

    def stamp(self) -> Stmt | None:
        """The statement a request starts with when its writes read :data:`CLOCK_REF`."""
        return STAMP if self.server_clock else None

    def needs_stamp(self, stmts: Sequence[Stmt]) -> bool:
        """Whether ``stmts`` read the stamped time (so the request must stamp it first)."""
        return self.server_clock and any(CLOCK_REF in s.sql for s in stmts)

    # -- publish ------------------------------------------------------------------------
    def publish(self, group_id: str, event: str, priority: int) -> list[Stmt]:
        """Insert the message, ``enqueued_at`` the request's time; create its group row
        (first publish sets the priority).

        The first result's ``last_insert_id`` is the message's ``seq``.
        """
        return [
            self.stmt(
                "INSERT INTO messages (group_id, event, enqueued_at) VALUES (?, ?, {now})",
                group_id,
                event,
                NOW,
            ),
            self.stmt(
                "INSERT OR IGNORE INTO groups (group_id, priority, head_seq) "
                "VALUES (?, ?, last_insert_rowid())",
                group_id,
                priority,
            ),
        ]

    def publish_batch(self, items: Sequence[tuple[str, str, int]]) -> list[Stmt]:
        """Insert the ``(group_id, event, priority)`` items in order with one statement, then
        create the group rows they need with one more (a group's first item in the batch
        sets its priority and head, as a run of :meth:`publish` would).

        The messages' seqs are consecutive (one INSERT on an ``AUTOINCREMENT`` table): the
        first result's ``last_insert_id`` is the last item's, so item ``i`` of ``n`` got
        ``last_insert_id - (n - 1 - i)``. The group rows read that last seq from
        ``sqlite_sequence``, which nothing else in the statement writes (each row's
        ``last_insert_rowid()`` would see the previous group row's insert). Every message's
        ``enqueued_at`` is the request's time, given once (``WITH``: a bound time is one
        parameter, not one per row). At most :data:`BATCH_ITEMS` items: SQLite before 3.32
        binds at most 999 parameters.
        """
        n = len(items)
        if not 1 <= n <= BATCH_ITEMS:
            raise ValueError(f"publish_batch: 1 to {BATCH_ITEMS} items, got {n}")
        rows = ", ".join(["(?, ?, (SELECT t FROM enqueued))"] * n)
        inserted = self.stmt(
            "WITH enqueued (t) AS (SELECT {now}) "
            f"INSERT INTO messages (group_id, event, enqueued_at) VALUES {rows}",
            NOW,
            *(v for group_id, event, _ in items for v in (group_id, event)),
        )
        firsts: dict[str, tuple[int, int]] = {}
        for i, (group_id, _, priority) in enumerate(items):
            firsts.setdefault(group_id, (priority, n - 1 - i))
        heads = ", ".join([f"(?, ?, {LAST_SEQ} - CAST(? AS INTEGER))"] * len(firsts))
        grouped = self.stmt(
            f"INSERT OR IGNORE INTO groups (group_id, priority, head_seq) VALUES {heads}",
            *(v for g, (prio, back) in firsts.items() for v in (g, prio, back)),
        )
        return [inserted, grouped]

    def publish_dedup(
        self, group_id: str, event: str, priority: int, dedup_id: str, dedup_ttl: float
    ) -> list[Stmt]:
        """Publish at most once per ``dedup_id`` (within ``dedup_ttl`` seconds).

        Ends with no read: follow with :meth:`dedup_seq` to learn the message's seq.
        """
        return [
            self.stmt("DELETE FROM rqueue_dedup WHERE created_at < {now} - ?", NOW, dedup_ttl),
            self.stmt(
                "INSERT INTO messages (group_id, event, enqueued_at) SELECT ?, ?, {now} "
                "WHERE NOT EXISTS (SELECT 1 FROM rqueue_dedup WHERE dedup_id = ?)",
                group_id,
                event,
                NOW,
                dedup_id,
            ),
            self.stmt(
                "INSERT OR IGNORE INTO rqueue_dedup (dedup_id, seq, created_at) "
                "VALUES (?, last_insert_rowid(), {now})",
                dedup_id,
                NOW,
            ),
            self.stmt(
                "INSERT OR IGNORE INTO groups (group_id, priority, head_seq) "
                "SELECT m.group_id, ?, m.seq FROM rqueue_dedup d "
                "JOIN messages m ON m.seq = d.seq WHERE d.dedup_id = ?",
                priority,
                dedup_id,
            ),
        ]

    def dedup_seq(self, dedup_id: str) -> Stmt:
        """Read the seq stored for ``dedup_id``."""
        return self.stmt("SELECT seq FROM rqueue_dedup WHERE dedup_id = ?", dedup_id)

    # -- claim --------------------------------------------------------------------------
    def claim_lease(self, token: str, visibility: float, min_priority: int) -> Stmt:
        """Lease the next deliverable message to ``token``: one serialized UPDATE.

        The seed's selection, exactly: groups in ``last_claimed_at`` order (then by the
        message's seq), priority floor, and only a group with nothing in flight. Within a
        group only the head (lowest seq) can ever be leased or parked, so "the group is
        free" is "its head is free or its lease lapsed", read from ``groups.head_seq``
        through an index: the cost does not grow with the number of queued messages.
        The UPDATE does nothing when a row already carries ``token`` (a retried claim).
        A lease lapses :attr:`lapse_margin` after its stored expiry (server-clock rounding).
        Each claim counts a delivery; with :attr:`max_deliveries`, a head claimed that
        often is skipped (the claim's dead-lettering moves it out, see rqueue._dlq).
        ``"groups"`` is quoted so that rqlite's parser accepts the statement, which it must
        for :meth:`claim_returning`.
        """
        exhausted, limit = "", ()
        if self.max_deliveries is not None:
            exhausted, limit = "AND m.deliveries < ? ", (self.max_deliveries,)
        return self.stmt(
            "UPDATE messages SET locked_by = ?, lock_expiry = {now} + ?, "
            "deliveries = deliveries + 1 "
            "WHERE seq = ("
            'SELECT g.head_seq FROM "groups" g JOIN messages m ON m.seq = g.head_seq '
            "WHERE g.priority >= ? AND (m.locked_by IS NULL OR m.lock_expiry < {now} - ?) "
            f"{exhausted}"
            "ORDER BY g.last_claimed_at ASC, g.head_seq ASC LIMIT 1) "
            "AND NOT EXISTS (SELECT 1 FROM messages WHERE locked_by = ?)",
            token,
            NOW,
            visibility,
            min_priority,
            NOW,
            self.lapse_margin,
            *limit,
            token,
        )

    def claim_returning(self, token: str, visibility: float, min_priority: int) -> Stmt:
        """:meth:`claim_lease` returning the leased row (``RETURNING``): no read-back.

        rqlite >= 8.23 returns the rows of a write (on ``/db/execute`` as on
        ``/db/request``) only when its own parser accepts the statement and finds the
        ``RETURNING`` clause; otherwise it runs it as a plain write and answers without
        ``columns`` (the core then reads the row back by token). A subclass whose
        ``claim_lease`` names ``groups`` unquoted gets that slower path, never a wrong one.
        """
        lease = self.claim_lease(token, visibility, min_priority)
        return Stmt(f"{lease.sql} RETURNING {LEASE_COLUMNS}", lease.params)

    def claim_mark_group(self, token: str) -> Stmt:
        """Record the claim time of the group leased to ``token`` (round-robin).

        The time is kept strictly above every other group's: rqlite's rewritten ``now``
        has a resolution of 86.4 ms and a new leader's clock may lag, and either would
        otherwise reorder groups claimed close together. The max comes from an index.
        """
        return self.stmt(
            "UPDATE groups SET last_claimed_at = "
            "max({now}, (SELECT max(last_claimed_at) FROM groups) + 0.000001) "
            "WHERE group_id = (SELECT group_id FROM messages WHERE locked_by = ?)",
            NOW,
            token,
        )

    def claim_read_back(self, token: str) -> Stmt:
        """Read the row leased to ``token``: seq, group_id, event, lock_expiry."""
        return self.stmt(f"SELECT {LEASE_COLUMNS} FROM messages WHERE locked_by = ?", token)

    # -- settle (fenced by the lease's token) -------------------------------------------
    def ack(self, lease: Lease) -> list[Stmt]:
        """Delete the message if still leased to this token; advance or drop its group.

        The first result's ``rows_affected`` is 1 when the ack took effect.
        """
        return [
            self.stmt(
                "DELETE FROM messages WHERE seq = ? AND locked_by = ? AND lock_expiry >= {now}",
                lease.seq,
                lease.token,
                NOW,
            ),
            self._advance_head(
                lease.group_id, "NOT EXISTS (SELECT 1 FROM messages WHERE seq = ?)", lease.seq
            ),
            self.stmt("DELETE FROM groups WHERE group_id = ? AND head_seq IS NULL", lease.group_id),
        ]

    def _advance_head(self, group_id: str, only_if: str, *params: Any) -> Stmt:
        """Point the group at its oldest message (NULL when none is left), ``only_if``."""
        return self.stmt(
            "UPDATE groups SET head_seq = (SELECT min(seq) FROM messages WHERE group_id = ?) "
            f"WHERE group_id = ? AND {only_if}",
            group_id,
            group_id,
            *params,
        )

    def ack_and_claim(
        self, lease: Lease, token: str, visibility: float, min_priority: int
    ) -> list[Stmt]:
        """Ack ``lease`` and, only if that ack took effect, lease the next message to ``token``.

        One transaction of five statements: the ack's delete (its ``rows_affected`` is 1
        when the ack took effect), the group's head advance, the claim returning the
        leased row (see :meth:`claim_returning`), the emptied group's removal and the
        claim's group mark. SQLite's
        ``changes()`` chains them: the head advances only if the delete just before it
        removed the row, and the claim runs only if that advance did. So nothing is
        leased unless *this* ack applied, even when another holder's ack had already
        removed the row after this lease lapsed. ``changes()`` is deterministic, so every
        replica agrees.
        """
        ack = self.ack(lease)
        delete, drop_group = ack[0], ack[-1]  # the fenced delete; the emptied group's removal
        advance = self._advance_head(lease.group_id, "changes() > 0")
        lease_next = self.claim_lease(token, visibility, min_priority)
        guarded = Stmt(
            f"{lease_next.sql} AND changes() > 0 RETURNING {LEASE_COLUMNS}", lease_next.params
        )
        return [delete, advance, guarded, drop_group, self.claim_mark_group(token)]

    def nack(self, lease: Lease, delay: float, error: str | None = None) -> Stmt:
        """Release (``delay == 0``) or park until ``now + delay`` if still leased;
        ``error`` (the worker's reason) is kept for the dead-letter queue."""
        noted, why = ("", ()) if error is None else (", last_error = ?", (error,))
        if delay > 0:
            return self.stmt(
                f"UPDATE messages SET locked_by = ?, lock_expiry = {{now}} + ?{noted} "
                "WHERE seq = ? AND locked_by = ? AND lock_expiry >= {now}",
                PARKED,
                NOW,
                delay,
                *why,
                lease.seq,
                lease.token,
                NOW,
            )
        return self.stmt(
            f"UPDATE messages SET locked_by = NULL, lock_expiry = 0{noted} "
            "WHERE seq = ? AND locked_by = ? AND lock_expiry >= {now}",
            *why,
            lease.seq,
            lease.token,
            NOW,
        )

    def extend(self, lease: Lease, visibility: float) -> Stmt:
        """Push the lease's expiry to ``now + visibility`` if still leased."""
        return self.stmt(
            "UPDATE messages SET lock_expiry = {now} + ? "
            "WHERE seq = ? AND locked_by = ? AND lock_expiry >= {now}",
            NOW,
            visibility,
            lease.seq,
            lease.token,
            NOW,
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
        """Read the ``lock_expiry`` of the row still leased to ``lease.token``."""
        return self.stmt(
            "SELECT lock_expiry FROM messages WHERE seq = ? AND locked_by = ?",
            lease.seq,
            lease.token,
            read=True,
        )

    def lookup(self, seq: int) -> Stmt:
        """Read who holds message ``seq`` and whether that lease is live: locked_by, live."""
        return self.stmt(
            "SELECT locked_by, lock_expiry >= {now} FROM messages WHERE seq = ?",
            NOW,
            seq,
            read=True,
        )
