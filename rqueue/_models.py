"""The value objects rqueue hands to callers and passes between its own layers."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ._text import wire

T = TypeVar("T")


@dataclass(frozen=True)
class Lease:
    """A claimed message: hold it until ``ack``, ``nack`` or its visibility lapses.

    ``event`` is the stored Event JSON text, exactly as published. ``token`` fences every
    later ``ack``/``nack``/``extend``: they act only while the row still carries it.
    ``expires_at`` is the lease deadline on the clock that leases use (server epoch
    seconds, or the worker's clock on servers without time rewriting); informational.
    """

    seq: int
    group_id: str
    event: str
    token: str
    expires_at: float | None = field(default=None, compare=False)
    #: identity of the queue (its node URLs) that issued this lease; "" = unknown
    origin: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class Claim:
    """One lease a batched claim asks for: its token and visibility; ``after_ack``, a
    lease whose ack must have applied earlier in the same request (ack_and_claim)."""

    token: str
    visibility: float
    after_ack: Lease | None = None


@dataclass(frozen=True)
class Fuse:
    """What a statement does, for merging it with its kind in a merged request (group
    commit, :mod:`rqueue._batch`): ``kind`` "ack" (``leases`` fenced and acked), "claim"
    (``claims`` with the priority floor ``min_priority``) or "drop" (``groups`` dropped
    if empty)."""

    kind: str
    leases: tuple[Lease, ...] = ()
    claims: tuple[Claim, ...] = ()
    min_priority: int = 0
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stmt:
    """One SQL statement with its positional parameters, as rqlite takes it; ``fuse``
    says how it merges with statements of its kind (None: it does not)."""

    sql: str
    params: tuple[Any, ...] = ()
    fuse: Fuse | None = field(default=None, compare=False, repr=False)

    def to_json(self, text_as_bytes: bool = True) -> str | list[Any]:
        """The statement in rqlite's wire form: ``"sql"`` or ``["sql", *params]`` (a text
        parameter rqlite could take for a blob literal as bytes: :func:`rqueue._text.wire`)."""
        return wire(self.sql, self.params, text_as_bytes) if self.params else self.sql


@dataclass(frozen=True)
class HttpCall:
    """One HTTP request the core wants sent: a POST of statements to an endpoint.

    ``idempotent`` calls (reads) may be re-sent after an unknown outcome; others may not.
    ``mergeable`` calls may share one request with concurrent ones (see ``rqueue._batch``):
    only writes whose operation settles an unknown outcome by itself.
    """

    path: str  # "/db/execute", "/db/query" or "/db/request"
    statements: tuple[Stmt, ...]
    query: tuple[tuple[str, str], ...] = ()
    idempotent: bool = False
    what: str = "request"  # short description for error messages
    mergeable: bool = False
    #: the first statement is the core's time stamp, not the operation's: its result is
    #: dropped before the operation sees the results (:meth:`for_caller`)
    stamped: bool = False
    #: builds the merged statements of the kinds in ``Stmt.fuse`` (the queue's
    #: :class:`~rqueue.Statements`); None: the call's statements are sent as they are
    fuser: Any = field(default=None, compare=False, repr=False)
    #: of a merged call: where each call's statements went (see :func:`rqueue._batch.merge`)
    layout: Any = field(default=None, compare=False, repr=False)
    #: the server binds a string shaped like a blob literal as a BLOB (rqlite >= 8.31):
    #: such text goes as its bytes, cast back to text (:func:`rqueue._text.wire`)
    text_as_bytes: bool = True

    def body(self, stamp: Stmt | None = None) -> list[str | list[Any]]:
        """The JSON body; all statements in one form (rqlite < 8.24.8 refuses a mix). Every
        statement sent goes through :func:`rqueue._text.wire` here or in
        :func:`rqueue._batch.fragment`. ``stamp``: the time stamp to send in place of the
        first statement's (a stamped call's, with the reference of the moment)."""
        stmts = self.statements if stamp is None else (stamp, *self.statements[1:])
        if any(s.params for s in stmts):
            return [wire(s.sql, s.params, self.text_as_bytes) for s in stmts]
        return [s.sql for s in stmts]

    def for_caller(self, results: tuple[Result, ...]) -> tuple[Result, ...]:
        """The results the operation that made this call expects."""
        return results[1:] if self.stamped else results


@dataclass(frozen=True)
class Result:
    """One statement's result from rqlite's JSON answer."""

    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    rows_affected: int = 0
    last_insert_id: int | None = None

    def dicts(self) -> list[dict[str, Any]]:
        """The rows as dicts keyed by column name."""
        return [dict(zip(self.columns, row, strict=False)) for row in self.rows]


#: one operation of the core (:mod:`rqueue._core`): a generator that yields the calls it
#: wants sent, receives each call's results (or has its error thrown in), and returns a T
Op = Generator[HttpCall, tuple[Result, ...], T]


@dataclass(frozen=True)
class DeadLetter:
    """A message moved to the dead-letter queue after ``max_deliveries`` claims, or
    after ``max_age`` seconds queued (retention).

    ``seq`` is the seq it had in the queue (a redrive gives it a new one);
    ``last_error`` the ``error`` of the last ``nack`` that gave one; ``dead_at`` the
    server time of the claim that moved it; ``reason`` why: ``"max_deliveries"`` or
    ``"retention"`` (None: moved by a release that did not record it).
    """

    seq: int
    group_id: str
    event: str
    priority: int
    deliveries: int
    last_error: str | None = None
    enqueued_at: float | None = None
    dead_at: float | None = None
    reason: str | None = None


@dataclass(frozen=True)
class QueuedMessage:
    """A message still in the queue, as ``peek`` shows it.

    ``state``: ``"ready"``, ``"leased"``, ``"parked"`` or ``"delayed"`` (a lapsed lease
    or park reads as ready; a delayed message at its group's head is parked until due,
    its ``lock_expiry``; one behind the head is delayed until its ``deliver_at``);
    ``deliveries``: how often it was claimed. A leased message has ``held_by`` (the
    ``worker_id`` that claimed it) and ``expires_in`` (seconds left, by the node's
    clock). ``deliver_at``: when a message published with a delay is (or was) due, on
    the lease clock (None: due when published).
    """

    seq: int
    group_id: str
    event: str
    state: str
    deliveries: int
    last_error: str | None = None
    lock_expiry: float | None = None
    held_by: str | None = None
    expires_in: float | None = None
    deliver_at: float | None = None


@dataclass(frozen=True)
class Stats:
    """The queue at one moment (see ``stats()``); counts by priority in ``by_priority``.

    ``oldest_ready_age``: seconds since the oldest message that is not in flight was
    published (or redriven), to within ``clock_tolerance`` + 0.09 s (how far the nodes'
    clocks may disagree, plus rqlite's rounding of its time; docs/rqueue.md); None when
    nothing is ready or the message has no enqueue time (a row written by another tool).
    ``ready`` (and the oldest ready message) include delayed messages waiting behind
    their group's head, not due yet: exact counters cannot tell when they come due
    (:mod:`rqueue._stats`); ``peek`` shows them as ``delayed``.
    """

    ready: int
    leased: int
    parked: int
    dead_lettered: int
    groups: int
    oldest_ready_age: float | None
    by_priority: dict[int, dict[str, int]] = field(default_factory=dict)

    @property
    def queued(self) -> int:
        """Messages in the queue: ready + leased + parked."""
        return self.ready + self.leased + self.parked

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (priorities as string keys)."""
        return {
            "queued": self.queued,
            "ready": self.ready,
            "leased": self.leased,
            "parked": self.parked,
            "dead_lettered": self.dead_lettered,
            "groups": self.groups,
            "oldest_ready_age": self.oldest_ready_age,
            "by_priority": {str(p): dict(c) for p, c in sorted(self.by_priority.items())},
        }
