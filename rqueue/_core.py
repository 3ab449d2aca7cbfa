"""The sans-IO core: each queue operation as a generator of HTTP calls.

An operation yields :class:`~rqueue._models.HttpCall` objects and receives each call's
results (a tuple of :class:`~rqueue._models.Result`) or has the call's exception thrown
into it; it returns the operation's value. The sync and async transports only drive
these generators, so the twins cannot drift. The decisions that make the queue safe under
faults live here, each write's on the one unknown-outcome ladder (:func:`rqueue._ladder.climb`:
an operation supplies its request, its lookup and what they prove, as a ``Ladder``):

* a claim whose outcome is unknown looks its token up and, if the row is not there,
  retries with the same token (a claim applied twice leases one row and answers it);
* an ``ack``/``nack``/``extend`` whose outcome is unknown looks the row up and retries
  while the row is still leased to the token; it raises ``LeaseLost`` only when the
  row proves the lease gone and the write unapplied;
* a publish is retried after unknown outcomes (stored at most once: by its ``dedup_id``,
  or else by the idempotency key it carries); an answer that stored nothing (the
  request applied twice) reads the seq by key;
* an ``ack`` or ``nack`` that changed nothing reads whether it applied before (its
  token is remembered in ``rqueue_keys``) instead of raising ``LeaseLost`` at once;
* ``ack_and_claim`` acks and claims in one transaction whose claim runs only if the ack
  applied; after an unknown outcome a found token proves both, and otherwise the ack is
  settled alone first, then the claim is retried with the same token;
* a write whose statements read the request's time starts with the time stamp (see
  :mod:`rqueue._render`), so no write depends on when a replica applies it; on
  servers that cannot stamp time, an operation that needs the time first reads the
  leader's clock when :class:`~rqueue._clock.LeaderClock` says it is due.

The batch operations (``claim_many``, ``ack_many``) are in :mod:`rqueue._many`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from . import _dlq, _queues, _schema, _validate
from ._clock import MAX_SAMPLES, LeaderClock
from ._decisions import (
    Proof,
    after_ack,
    decide_after_unknown,
    fenced_step,
    insert_id,
    lease_lost,
    with_expiry,
)
from ._exceptions import (
    OutcomeUnknown,
    ProtocolError,
    StatementError,
    Unavailable,
)
from ._ladder import (
    AGAIN,
    LOOK_UP,
    Known,
    Ladder,
    Lookup,
    Step,
    Tries,
    climb,
    look_up,
    sending,
)
from ._models import DeadLetter, HttpCall, Lease, Op, Result, Stmt
from ._publish import KEY_TTL
from ._statements import ACKED, Statements, batch_chunks
from ._version import ServerInfo
from ._zone import MEASURE, ZoneGuard

log = logging.getLogger("rqueue")
T = TypeVar("T")

_TX = (("transaction", "true"),)
#: the first rqlite whose parser takes ``UPDATE ... FROM`` (and so returns its rows):
#: the rewrite corpora show v9.4.5 and v10.2.7 parsing it, v8.36.18 rejecting it
FUSING = (9, 4, 5)
#: how long dedup ids are remembered, in seconds
DEFAULT_DEDUP_TTL = 7 * 24 * 3600.0
#: a keyed write forgets the keys older than KEY_TTL once in this many (amortised)
PURGE_EVERY = 64


def _uses_clock(method: Callable[..., Op[T]]) -> Callable[..., Op[T]]:
    """Run the operation after reading the leader's clock, when that is due."""

    @functools.wraps(method)
    def timed(self: QueueCore, *args: Any, **kwargs: Any) -> Op[T]:
        return (yield from self.with_clock(method(self, *args, **kwargs)))

    return timed


def _reads(stmt: Stmt) -> bool:
    """Whether ``stmt`` is a read (rqueue's reads all start with ``SELECT``)."""
    return stmt.sql.lstrip()[:6].upper() == "SELECT"


def new_key() -> str:
    """An idempotency key of one publish (or one chunk of a batch)."""
    return uuid.uuid4().hex


def _run(last: int, n: int) -> range:
    """The ``n`` consecutive seqs ending at ``last`` (one INSERT's messages)."""
    return range(last - n + 1, last + 1)


def new_token(worker_id: str) -> str:
    """A lease token: ``"{worker_id}:{uuid}"`` as in the seed."""
    return f"{worker_id}:{uuid.uuid4().hex}"


class QueueCore:
    """The operations of one queue, given the statements and the server's features."""

    def __init__(
        self,
        statements: Statements,
        server: ServerInfo,
        *,
        read_consistency: str = "strong",
        origin: str = "",
        dedup_ttl: float = DEFAULT_DEDUP_TTL,
        leader_clock: LeaderClock | None = None,
        on_dead_letter: Callable[[DeadLetter], None] | None = None,
        queue: str | None = None,
        text_as_bytes: bool = True,
        zone: ZoneGuard | None = None,
    ) -> None:
        _validate.read_consistency("read_consistency", read_consistency)
        if read_consistency == "linearizable" and not server.linearizable_reads:
            raise ValueError(
                "read_consistency: 'linearizable' needs rqlite >= 8.32, "
                f"the server reports {server.version or 'no version'}"
            )
        self.statements = statements
        self.server = server
        self.read_consistency = read_consistency
        self.origin = origin
        self.dedup_ttl = dedup_ttl
        #: the lease clock when the server cannot stamp time and the caller gave none
        self.leader_clock = leader_clock
        #: the dead-letter statements (they move nothing without ``max_deliveries``)
        self.dead = _dlq.DeadLetters(statements)
        #: called with each message a claim moved to the dead-letter queue
        self.on_dead_letter = on_dead_letter
        #: the queue's names: every statement sent is qualified by them (rqueue._queues)
        self.naming = _queues.Naming(queue)
        #: text rqlite could take for a blob literal goes as bytes (rqueue._text)
        self.text_as_bytes = text_as_bytes
        #: the stamp's guard against nodes off UTC, its reference and the nodes' checks
        #: (rqueue._zone; None: no server stamp, or a mutant without it)
        self.zone = zone
        #: merged requests fuse claims and acks where the server's parser returns the rows
        #: of an ``UPDATE ... FROM`` (see :meth:`Statements.claim_batch`); the core's own
        #: decision: the statements it was given are left as they are
        self.fusing = server.one_request_claim and (server.number or (0,)) >= FUSING
        #: keyed writes sent so far (every PURGE_EVERY-th also purges expired keys)
        self._keyed_writes = 0

    # -- calls --------------------------------------------------------------------------
    def write(
        self, stmts: Sequence[Stmt], what: str, *, idempotent: bool = False, mergeable: bool = False
    ) -> HttpCall:
        return self._stamped(
            "/db/execute", stmts, _TX, idempotent=idempotent, what=what, mergeable=mergeable
        )

    def read(self, stmts: Sequence[Stmt], what: str, *, qualified: bool = True) -> HttpCall:
        """A read; ``qualified=False``: statements already written for their queues (the
        registry's reads of every queue), sent as they are."""
        query = (("level", self.read_consistency),)
        stmts = self.naming.stmts(stmts) if qualified else tuple(stmts)
        return HttpCall(
            "/db/query", stmts, query, idempotent=True, what=what, text_as_bytes=self.text_as_bytes
        )

    def request(self, stmts: Sequence[Stmt], what: str, *, mergeable: bool = False) -> HttpCall:
        """A write whose answer carries rows: a ``RETURNING`` write's, or a read's.

        Writes alone go to ``/db/execute``, which returns a ``RETURNING`` write's rows just
        as ``/db/request`` does (rqlite >= 8.23), at a lower cost: on ``/db/request``
        rqlite prepares every statement once more on the receiving node and once more on
        every replica, only to learn whether it reads (docs/performance.md: 10-20 % of a
        claim's node CPU in alternating A/B windows). A request holding a ``SELECT``
        goes to ``/db/request``, the one endpoint that answers a read inside a write.
        """
        path = "/db/request" if any(_reads(s) for s in stmts) else "/db/execute"
        return self._stamped(path, stmts, _TX, what=what, mergeable=mergeable)

    def _stamped(
        self, path: str, stmts: Sequence[Stmt], query: tuple[tuple[str, str], ...], **kw: Any
    ) -> HttpCall:
        """A write call; it starts with the time stamp when its statements read it."""
        s, stmts = self.statements, self.naming.stmts(stmts)
        kw["text_as_bytes"] = self.text_as_bytes
        if kw.get("mergeable"):
            kw["fuser"] = self.naming.fuser(s.fuser_for(self.fusing))
        if s.needs_stamp(stmts):
            stamp = s.stamp()
            assert stamp is not None
            return HttpCall(path, (stamp, *stmts), query, stamped=True, **kw)
        return HttpCall(path, tuple(stmts), query, **kw)

    # -- the lease clock (servers that cannot stamp time) ------------------------------
    def with_clock(self, op: Op[T]) -> Op[T]:
        """Run ``op`` after reading the leader's clock, when that is due; with the server's
        stamp, after reading SQLite's UTC once (the stamp's guard's first reference)."""
        clock = self.leader_clock
        if self.zone is not None and self.zone.reference() is None:
            (res,) = yield self.read([MEASURE], "read the server's UTC")
            self.zone.calibrate_from(res.rows)
        if clock is None:
            return (yield from op)
        if clock.due():
            yield from self._sync_clock(clock)
        try:
            return (yield from op)
        except (Unavailable, OutcomeUnknown):
            clock.suspect()  # perhaps a new leader: read its clock before the next use
            raise

    def _sync_clock(self, clock: LeaderClock) -> Op[None]:
        """Read the leader's clock; again (up to MAX_SAMPLES) while round trips are slow."""
        for _ in range(MAX_SAMPLES):
            sent = clock.monotonic()
            results = yield self.read(clock.sample(), "read the leader's clock")
            if clock.record(sent, clock.monotonic(), results):
                return
        clock.gave_up()

    # -- schema -------------------------------------------------------------------------
    def open(self, create: bool = True) -> Op[None]:
        """Create the schema if absent, migrate a seed-era database, register the queue
        (its statements, like every one sent, qualified by :attr:`naming`). Without
        ``create``, a named queue must exist already (:class:`~rqueue.QueueNotFound`, with
        nothing written); the default queue is created either way."""
        if not create:
            yield from _queues.require(self)
        yield self.write(_schema.TABLES, "create schema", idempotent=True)
        tables = _schema.ALTERED_TABLES
        *found, triggers = yield self.read(
            [*(_schema.table_columns(t) for t in tables), _schema.COUNT_TRIGGERS], "read schema"
        )
        added: set[tuple[str, str]] = set()
        for table, cols in zip(tables, found, strict=True):
            for column, alter in _schema.missing_columns(table, (row[0] for row in cols.rows)):
                try:
                    yield self.write([alter], "migrate schema", idempotent=True)
                except StatementError as exc:
                    if not _schema.is_duplicate_column(str(exc)):
                        raise
                added.add((table, column))
        if ("groups", "head_seq") in added:
            yield self.write(_schema.BACKFILL, "migrate schema", idempotent=True)
        if ("groups", "locked_by") in added:
            yield self.write(_schema.MOVE_LEASES, "migrate schema: move leases", idempotent=True)
        yield self.write(_schema.INDEXES, "create indexes", idempotent=True)
        if triggers.rows[0][0] != len(_schema.COUNTER_TRIGGERS):
            yield self.write(_schema.COUNTERS, "create counters", idempotent=True)
        yield from self.with_clock(_queues.register(self))

    # -- publish (timed: a message's ``enqueued_at`` is its request's time) --------------
    @_uses_clock
    def publish(
        self, group_id: str, event: str, priority: int, dedup_id: str | None, delay: float = 0.0
    ) -> Op[int]:
        """Publish one message, due ``delay`` seconds after the request's time."""
        if dedup_id is not None:
            return (yield from self._publish_dedup(group_id, event, priority, dedup_id, delay))
        if not self.statements.idempotency:
            stmts = self.statements.publish(group_id, event, priority, delay)
            results = yield self.write(stmts, "publish")
            return insert_id(results[0])
        key = new_key()
        stmts = self.statements.publish_keyed(group_id, event, priority, key, delay)
        (seq,) = yield from self._keyed("publish", stmts, [key], [1])
        return seq

    def _keyed(
        self, what: str, stmts: list[Stmt], keys: Sequence[str], counts: Sequence[int]
    ) -> Op[list[int]]:
        """Send a keyed publish until its outcome is known; the seqs, in order.

        ``stmts``: for each key its INSERT, its key row (``rows_affected`` 1 when this
        application stored the messages), its group rows; ``counts``: the messages of
        each key. Each key stores its messages at most once, so the request is sent
        again after an unknown outcome whose key is not found; an answer that inserted
        nothing (a second application: a server's resend, or a retry after a late first
        one) reads the seqs stored by the key."""
        s = self.statements
        if self._purge_due():
            stmts = [*stmts, s.purge_keys(KEY_TTL)]

        def seqs_of(rows: Sequence[Sequence[Any]]) -> list[int] | None:
            last = {str(k): int(v) for k, v in rows}
            if any(k not in last for k in keys):
                return None
            return [q for k, n in zip(keys, counts, strict=True) for q in _run(last[k], n)]

        lookup = Lookup(
            lambda: self.read([s.key_seq(keys)], f"{what}: look up"),
            lambda results: seqs_of(results[0].rows),
            "its idempotency key could not be looked up",
        )

        def answered(results: Sequence[Result], tries: Tries) -> Op[Step[list[int]]]:
            inserts, marks = results[: 3 * len(keys) : 3], results[1 : 3 * len(keys) : 3]
            if all(r.rows_affected > 0 for r in marks):  # each key row written now
                return Known(
                    [q for r, n in zip(inserts, counts, strict=True) for q in _run(insert_id(r), n)]
                )
            # applied before (the request was applied twice): the keys hold the seqs
            found = yield from look_up(lookup, OutcomeUnknown(f"{what}: stored, seq not read"))
            if found is None:
                raise ProtocolError(f"{what}: nothing stored and no idempotency key found")
            return Known(found)

        def proves(found: list[int] | None) -> Step[list[int]]:
            return AGAIN if found is None else Known(found)

        send = sending(lambda: self.write(stmts, what))
        return (yield from climb(Ladder(send, answered, lookup, proves)))

    def _purge_due(self) -> bool:
        """Whether this keyed write also forgets expired keys: one in :data:`PURGE_EVERY`."""
        self._keyed_writes += 1
        return self._keyed_writes % PURGE_EVERY == 1

    def _publish_dedup(
        self, group_id: str, event: str, priority: int, dedup_id: str, delay: float
    ) -> Op[int]:
        """A publish with a dedup id, sent again after an unknown outcome (no lookup: the
        dedup id stores it at most once); its seq read back in the same request where the
        server allows, else after it."""
        s = self.statements
        stmts = s.publish_dedup(group_id, event, priority, dedup_id, self.dedup_ttl, delay)

        def send(tries: Tries) -> Op[tuple[Result, ...]]:
            if self.server.one_request_claim:
                return (
                    yield self.request([*stmts, s.dedup_seq(dedup_id)], "publish", mergeable=True)
                )
            yield self.write(stmts, "publish")
            # stored: a failed read-back must not be reported as "not applied"
            tries.unknown_from_here("publish: stored, seq not read back")
            return (yield self.read([s.dedup_seq(dedup_id)], "publish"))

        def answered(results: Sequence[Result], tries: Tries) -> Step[int]:
            row = results[-1].rows
            if not row:
                raise ProtocolError(f"publish: no seq recorded for dedup_id {dedup_id!r}")
            return Known(int(row[0][0]))

        return (yield from climb(Ladder(send, answered)))

    @_uses_clock
    def publish_many(self, items: Sequence[tuple[Any, ...]]) -> Op[list[int]]:
        """Publish validated ``(group_id, event, priority[, delay])`` items in one request."""
        if not items:
            return []
        chunks = batch_chunks(items)
        if self.statements.idempotency:  # one key per chunk
            keys = [new_key() for _ in chunks]
            keyed = [
                st
                for key, chunk in zip(keys, chunks, strict=True)
                for st in self.statements.publish_batch(chunk, key)
            ]
            counts = [len(c) for c in chunks]
            return (yield from self._keyed(f"publish_many({len(items)})", keyed, keys, counts))
        stmts: list[Stmt] = []
        firsts: list[tuple[int, int]] = []  # (index of the chunk's INSERT, its item count)
        for chunk in chunks:
            firsts.append((len(stmts), len(chunk)))
            stmts.extend(self.statements.publish_batch(chunk))
        results = yield self.write(stmts, f"publish_many({len(items)})")
        seqs: list[int] = []
        for at, n in firsts:  # a chunk's seqs are consecutive, ending at its INSERT's id
            seqs.extend(_run(insert_id(results[at]), n))
        return seqs

    # -- claim --------------------------------------------------------------------------
    @_uses_clock
    def claim(self, worker_id: str, visibility: float, min_priority: int) -> Op[Lease | None]:
        token = new_token(worker_id)
        dead: dict[int, DeadLetter] = {}
        if self.server.one_request_claim:
            lease = yield from self._claim_one_request(token, visibility, min_priority, dead)
        else:
            lease = yield from self._claim_three_requests(token, visibility, min_priority, dead)
        self.report_dead(dead)
        return lease

    def report_dead(self, dead: dict[int, DeadLetter]) -> None:
        """Tell ``on_dead_letter`` what a claim that returned moved (in seq order)."""
        if self.on_dead_letter is not None:
            for seq in sorted(dead):
                self.on_dead_letter(dead[seq])

    def _claim_one_request(
        self, token: str, visibility: float, min_priority: int, dead: dict[int, DeadLetter]
    ) -> Op[Lease | None]:
        """Dead-letter exhausted heads (``max_deliveries``) and lease (returning the row),
        in one request (one Raft entry); read back what was moved."""
        s = self.statements
        move = self.dead.move(token)

        def answered(results: Sequence[Result], tries: Tries) -> Op[Step[Lease | None]]:
            _dlq.collect(dead, results[len(move) + 1 :])
            return Known((yield from self._leased(results[: len(move) + 1], token)))

        claim = lambda: self.request(  # noqa: E731
            [*move, s.claim_returning(token, visibility, min_priority), *self.dead.moved_by(token)],
            "claim",
            mergeable=True,
        )
        return (yield from climb(Ladder(sending(claim), answered, self.token_lookup(token, dead))))

    def _claim_three_requests(
        self, token: str, visibility: float, min_priority: int, dead: dict[int, DeadLetter]
    ) -> Op[Lease | None]:
        """The claim for servers without /db/request: lease (after dead-lettering
        exhausted heads, in the same transaction), then read back."""
        s = self.statements
        move = self.dead.move(token)
        lookup = self.token_lookup(token, dead)

        def answered(results: Sequence[Result], tries: Tries) -> Op[Step[Lease | None]]:
            leased = results[-1].rows_affected > 0
            if not leased and tries.unknown is None:
                if move and results[0].rows_affected > 0:
                    # applied: a failed read-back leaves only the moves unknown
                    moved = OutcomeUnknown("claim: dead-lettered, not read back")
                    yield from look_up(lookup, moved)
                return Known(None)
            unknown = tries.unknown or OutcomeUnknown("claim: leased but not read back")
            # None: nothing claimable now (or our lease already lapsed)
            return Known((yield from look_up(lookup, unknown)))

        claim = lambda: self.write(  # noqa: E731
            [*move, s.claim_lease(token, visibility, min_priority)], "claim"
        )
        return (yield from climb(Ladder(sending(claim), answered, lookup)))

    def _leased(self, results: Sequence[Result], token: str) -> Op[Lease | None]:
        """The lease a claim's applied request took: the rows of its last statement that
        returned rows (``RETURNING``, or a read-back). A server that ran the claim as a
        plain write answers without ``columns``: the row is then read back by token."""
        rows = [r for r in results if r.columns]
        if rows:
            return self.lease_of(rows[-1], token)
        try:
            (res,) = yield self.read([self.statements.claim_read_back(token)], "claim: read back")
        except (Unavailable, StatementError, OutcomeUnknown) as exc:
            raise OutcomeUnknown(f"claim: applied, but the lease could not be read: {exc}") from exc
        return self.lease_of(res, token)

    def token_lookup(
        self, token: str, dead: dict[int, DeadLetter] | None = None
    ) -> Lookup[Lease | None]:
        """A claim's lookup: the lease of ``token`` (None: nothing leased), and what its
        claim dead-lettered (into ``dead``)."""

        def read() -> HttpCall:
            stmts = [self.statements.claim_read_back(token)]
            if dead is not None:
                stmts.extend(self.dead.moved_by(token))
            return self.read(stmts, "claim: look up")

        def found(results: Sequence[Result]) -> Lease | None:
            res, *moved = results
            if dead is not None:
                _dlq.collect(dead, moved)
            return self.lease_of(res, token)

        return Lookup(read, found, "the token could not be looked up")

    def lease_of(self, res: Result, token: str) -> Lease | None:
        """The lease of ``token`` in a claim's row (None: no row)."""
        if not res.rows:
            return None
        row = res.dicts()[0]
        try:
            expiry = row.get("lock_expiry")
            return Lease(
                seq=int(row["seq"]),
                group_id=str(row["group_id"]),
                event=str(row["event"]),
                token=token,
                expires_at=float(expiry) if expiry is not None else None,
                origin=self.origin,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"claim: unreadable row {row!r}: {exc}") from exc

    # -- settle -------------------------------------------------------------------------
    @_uses_clock
    def ack(self, lease: Lease) -> Op[None]:
        yield from self._fenced(lease, self.statements.ack(lease), "ack", key=self._ack_key(lease))

    @_uses_clock
    def ack_and_claim(
        self, lease: Lease, worker_id: str, visibility: float, min_priority: int
    ) -> Op[Lease | None]:
        """Ack ``lease``, then claim the next message; one request where the server allows.

        Errors before the ack is certain are the ack's (nothing was claimed); errors after
        it carry ``acked = True`` and are the claim's.
        """
        token = new_token(worker_id)
        dead: dict[int, DeadLetter] = {}
        if not self.server.one_request_claim:
            yield from self.ack(lease)
            claim = self._claim_three_requests(token, visibility, min_priority, dead)
            found = yield from after_ack(claim)
            self.report_dead(dead)
            return found
        stmts = self.statements.ack_and_claim(lease, token, visibility, min_priority)

        key = self._ack_key(lease)

        def answered(results: Sequence[Result], tries: Tries) -> Op[Step[Lease | None]]:
            if results[0].rows_affected == 0:
                if key is not None and (yield from self._was_settled(key, "ack_and_claim")):
                    # the ack applied before (this request's first application, or an
                    # earlier call): settled; the claim goes on with the same token,
                    # which answers the first application's lease if it took one
                    return Known(_Then.CLAIM)
                raise lease_lost("ack", lease, " and nothing was claimed")
            try:
                return Known((yield from self._leased(results, token)))
            except ProtocolError as exc:
                exc.acked = True
                raise

        def proves(found: Lease | None) -> Step[Lease | _Then | None]:
            # A found token proves the transaction applied, and with it the ack (the
            # claim is chained to the ack's delete). Otherwise settle the ack alone.
            return Known(_Then.SETTLE_ACK if found is None else found)

        tries = Tries()
        fused = lambda: self.request(stmts, "ack_and_claim", mergeable=True)  # noqa: E731
        ladder = Ladder(sending(fused), answered, self.token_lookup(token), proves)
        outcome = yield from climb(ladder, tries)
        if outcome is _Then.SETTLE_ACK:
            ack = self.statements.ack(lease)
            yield from self._fenced(lease, ack, "ack", tries.unknown, key)
        elif outcome is not _Then.CLAIM:
            return outcome
        claim = self._claim_one_request(token, visibility, min_priority, dead)
        found = yield from after_ack(claim)
        self.report_dead(dead)
        return found

    @_uses_clock
    def nack(self, lease: Lease, delay: float, error: str | None = None) -> Op[None]:
        s = self.statements
        stmts = s.nack(lease, delay, *(() if error is None else (error,)))
        key = s.nack_key(lease, delay) if s.idempotency else None
        yield from self._fenced(lease, stmts, "nack", key=key)

    @_uses_clock
    def extend(self, lease: Lease, visibility: float) -> Op[Lease]:
        """Extend; return ``lease`` with the new ``expires_at`` (``RETURNING`` where the
        server has it, else read back; None if that read fails: the extend applied)."""
        s = self.statements
        if self.server.one_request_claim:
            stmt = s.extend_returning(lease, visibility)
        else:
            stmt = s.extend(lease, visibility)
        applied = yield from self._fenced(lease, [stmt], "extend")
        if applied.columns:
            return with_expiry(lease, applied)
        try:
            (res,) = yield self.read([s.extended_read_back(lease)], "extend: read back")
        except (Unavailable, StatementError, OutcomeUnknown) as exc:
            log.warning("extend: applied to message %s, expiry not read: %s", lease.seq, exc)
            return dataclasses.replace(lease, expires_at=None)
        return with_expiry(lease, res)

    def _fenced(
        self,
        lease: Lease,
        stmts: list[Stmt],
        what: str,
        unknown: OutcomeUnknown | None = None,
        key: str | None = None,
    ) -> Op[Result]:
        """A write that acts only while the row is leased to ``lease.token``; returns the
        result of its first statement, which changed the row (its ``RETURNING`` rows, or
        ``rows_affected``). After an unknown outcome the row decides
        (:func:`~rqueue._decisions.decide_after_unknown`).

        ``unknown``: an earlier attempt (by another operation) whose outcome is unknown.
        ``key``: what ``rqueue_keys`` remembers the write by once applied (an ack's, a
        nack's; None: not remembered, an extend applied twice applies again while live):
        a write that changed nothing was applied before if its key is there.
        """

        s = self.statements

        def answered(results: Sequence[Result], tries: Tries) -> Op[Step[Result]]:
            first = results[0]
            if first.rows if first.columns else first.rows_affected > 0:
                return Known(first)
            if tries.unknown is None:
                if key is not None and (yield from self._was_settled(key, what)):
                    return Known(_APPLIED)  # applied before: this is its second application
                raise lease_lost(what, lease)
            return LOOK_UP  # changed nothing after an unknown try: the row decides

        def read() -> HttpCall:
            stmts = [s.lookup(lease)] + ([] if key is None else [s.settled(key)])
            return self.read(stmts, f"{what}: look up")

        def found(results: Sequence[Result]) -> Proof:
            if key is not None and len(results) > 1 and results[1].rows:
                return Proof.APPLIED
            return decide_after_unknown(what, lease.token, results[0].rows)

        def proves(proof: Proof) -> Step[Result]:
            return Known(_APPLIED) if proof is Proof.APPLIED else fenced_step(proof, what, lease)

        lookup = Lookup(read, found, "the message could not be looked up", names_cause=False)
        ladder = Ladder(
            sending(lambda: self.write(stmts, what, mergeable=True)), answered, lookup, proves
        )
        return (yield from climb(ladder, Tries(unknown)))

    def _ack_key(self, lease: Lease) -> str | None:
        """What ``rqueue_keys`` remembers an applied ack of ``lease`` by (None: nothing
        is remembered, a mutant without idempotency)."""
        return ACKED + lease.token if self.statements.idempotency else None

    def _was_settled(self, key: str, what: str) -> Op[bool]:
        """Whether ``key`` is remembered: the write that changed nothing had applied
        before (a second application, or a retry after a lost reply)."""
        try:
            (res,) = yield self.read([self.statements.settled(key)], f"{what}: settled?")
        except (Unavailable, StatementError, OutcomeUnknown) as exc:
            raise OutcomeUnknown(
                f"{what}: changed nothing, and whether it applied before could not be read: {exc}"
            ) from exc
        return bool(res.rows)


#: the answer of a fenced write found applied before (by its remembered token)
_APPLIED = Result(rows_affected=1)


class _Then(enum.Enum):
    """What ``ack_and_claim`` does after its fused request (when not its value)."""

    #: the fused request did not apply (its token is not found): settle the ack alone,
    #: then claim
    SETTLE_ACK = "settle the ack alone"
    #: the ack is remembered as applied: claim (with the same token)
    CLAIM = "claim"
