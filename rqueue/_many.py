"""The batch operations of the core: ``claim_many`` and ``ack_many``.

Each is an operation of :class:`~rqueue._core.QueueCore` (a generator of calls), driven
by both twins as the single operations are, and safe under faults the same way, on the
same ladder (:func:`rqueue._ladder.climb`):

* ``claim_many`` leases up to ``n`` heads of distinct groups in one request, each with a
  token of its own. The request is one transaction: after an unknown outcome the tokens
  are looked up, and none found, the same tokens are sent again (as a single claim's
  token is);
* ``ack_many`` acks every lease in one request, each fenced by its own token, and tells
  each outcome apart (acked, :class:`LeaseLost`, :class:`OutcomeUnknown`): after an
  unknown outcome it looks every undecided lease up and retries only those still live
  (:func:`~rqueue._decisions.decide_after_unknown`, as a single ``ack`` does).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import _dlq
from ._core import QueueCore, new_token
from ._decisions import UNSETTLED, Proof, decide_after_unknown, lease_lost
from ._exceptions import OutcomeUnknown, RqueueError, StatementError, Unavailable
from ._ladder import AGAIN, LOOK_UP, Known, Ladder, Lookup, Step, Tries, climb, look_up, sending
from ._models import Claim, DeadLetter, HttpCall, Lease, Op, Result, Stmt
from ._statements import ACKED, LEASE_RETURNING

#: most messages one ``claim_many`` or ``ack_many`` takes
MAX_BATCH = 100


def claim_many(
    core: QueueCore, worker_id: str, visibility: float, min_priority: int, n: int
) -> Op[list[Lease]]:
    """Lease up to ``n`` messages of ``n`` distinct groups in one request (one
    statement where the server's parser takes it, else one per lease), each with its
    own token; in claim order. After an unknown outcome the tokens are looked up (the
    request is one transaction: all of them or none took effect) and, none found, the
    same tokens are sent again (a token already in use takes its own row again)."""
    return (yield from core.with_clock(_claim_many(core, worker_id, visibility, min_priority, n)))


def _claim_many(
    core: QueueCore, worker_id: str, visibility: float, min_priority: int, n: int
) -> Op[list[Lease]]:
    s, one_request = core.statements, core.server.one_request_claim
    tokens = [new_token(worker_id) for _ in range(n)]
    dead: dict[int, DeadLetter] = {}
    move = core.dead.move(tokens[0])
    if core.fusing:
        claims = [s.claim_batch([Claim(t, visibility) for t in tokens], min_priority)]
    elif one_request:
        claims = [s.claim_returning(t, visibility, min_priority) for t in tokens]
    else:
        claims = [s.claim_lease(t, visibility, min_priority) for t in tokens]
    moved = core.dead.moved_by(tokens[0])
    lookup = _tokens_lookup(core, tokens, dead)

    def answered(results: Sequence[Result], tries: Tries) -> Op[Step[list[Lease]]]:
        _dlq.collect(dead, results[len(move) + len(claims) :])
        leased = results[len(move) : len(move) + len(claims)]
        if any(r.columns for r in leased):
            return Known(_leases(core, leased, tokens))
        # run as a plain write: read the leases back by token
        applied = OutcomeUnknown("claim_many: applied, but not read back")
        return Known((yield from look_up(lookup, applied)))

    claim = lambda: (  # noqa: E731
        core.request([*move, *claims, *moved], "claim_many", mergeable=True)
        if one_request
        else core.write([*move, *claims], "claim_many")
    )
    found = yield from climb(Ladder(sending(claim), answered, lookup))
    core.report_dead(dead)
    return found


def _tokens_lookup(
    core: QueueCore, tokens: Sequence[str], dead: dict[int, DeadLetter]
) -> Lookup[list[Lease]]:
    """The lookup of a batched claim: the leases of ``tokens`` (in their order), and what
    their claim moved (into ``dead``)."""
    marks = ", ".join("?" * len(tokens))
    stmt = Stmt(
        f'SELECT {LEASE_RETURNING}, locked_by AS token FROM "groups" WHERE locked_by IN ({marks})',
        tuple(tokens),
    )

    def found(results: Sequence[Result]) -> list[Lease]:
        res, *moved = results
        _dlq.collect(dead, moved)
        return _leases(core, [res], tokens)

    read = lambda: core.read([stmt, *core.dead.moved_by(tokens[0])], "claim: look up")  # noqa: E731
    return Lookup(read, found, "the tokens could not be looked up")


def _leases(core: QueueCore, results: Sequence[Result], tokens: Sequence[str]) -> list[Lease]:
    """The leases in ``results``, in the order of their ``tokens``: rows that name
    their token (a batched claim, a look-up), or else one result per token."""
    found: dict[str, Lease] = {}
    for i, res in enumerate(results):
        if "token" in res.columns:
            at = res.columns.index("token")
            for row in res.rows:
                lease = core.lease_of(Result(res.columns, (row,)), str(row[at]))
                if lease is not None:
                    found[lease.token] = lease
        elif res.columns:
            lease = core.lease_of(res, tokens[i])
            if lease is not None:
                found[lease.token] = lease
    return [found[t] for t in tokens if t in found]


def ack_many(core: QueueCore, leases: Sequence[Lease]) -> Op[list[RqueueError | None]]:
    """Ack every lease in one request, each fenced by its token; each outcome apart:
    None (acked), :class:`LeaseLost`, or :class:`OutcomeUnknown`."""
    return (yield from core.with_clock(_ack_many(core, leases)))


def _ack_many(core: QueueCore, leases: Sequence[Lease]) -> Op[list[RqueueError | None]]:
    if not leases:
        return []
    s, one_statement = core.statements, core.server.one_request_claim
    out: dict[int, RqueueError | None] = {}
    pending = list(range(len(leases)))  # the leases still undecided, sent each try
    tries = Tries()

    def outcomes() -> list[RqueueError | None]:
        return [out[i] for i in range(len(leases))]

    def acks() -> HttpCall:
        batch = [leases[i] for i in pending]
        stmts = s.ack_batch(batch) if one_statement else [st for x in batch for st in s.ack(x)]
        return core.write(stmts, f"ack_many({len(batch)})", mergeable=True)

    keyed = s.idempotency

    def settled(batch: Sequence[int]) -> list[Stmt]:
        return [s.settled(ACKED + leases[i].token) for i in batch] if keyed else []

    def answered(results: Sequence[Result], tries: Tries) -> Op[Step[list[RqueueError | None]]]:
        nonlocal pending
        applied = _applied_acks(results, [leases[i] for i in pending], one_statement)
        if applied is not None:
            missed = [i for i in pending if leases[i].token not in applied]
            if keyed and missed and tries.unknown is None:
                # changed nothing: applied before (a second application) if remembered
                try:
                    found = yield core.read(settled(missed), "ack_many: settled?")
                except (Unavailable, StatementError, OutcomeUnknown) as exc:
                    for i in missed:
                        out[i] = OutcomeUnknown(f"ack_many: changed nothing, unread: {exc}")
                    found = ()
                applied |= {leases[i].token for i, r in zip(missed, found, strict=False) if r.rows}
            for i in pending:
                if i in out:
                    continue
                if leases[i].token in applied:
                    out[i] = None
                elif tries.unknown is None:
                    out[i] = lease_lost("ack", leases[i])
            pending = [i for i in pending if i not in out]
            if not pending:
                return Known(outcomes())
        tries.unknown_from_here("ack_many: some acks were not told apart")
        return LOOK_UP

    def proves(proofs: list[Proof]) -> Step[list[RqueueError | None]]:
        nonlocal pending
        again = []
        for i, proof in zip(pending, proofs, strict=True):
            if proof is Proof.APPLIED:
                out[i] = None
            elif proof is Proof.RETRY:
                again.append(i)
            elif proof is Proof.LOST:
                out[i] = lease_lost("ack", leases[i])
            else:
                out[i] = OutcomeUnknown(f"{tries.unknown}; {UNSETTLED}")
        pending = again
        return AGAIN if pending else Known(outcomes())

    def gave_up(exc: RqueueError, unknown: OutcomeUnknown | None) -> list[RqueueError | None]:
        # one definite failure (the same error for each: the transport raises it), or
        # each undecided lease's own unknown outcome
        for i in pending:
            out[i] = exc if unknown is None else OutcomeUnknown(f"{unknown}; {exc}")
        return outcomes()

    def decided(found: Sequence[Result]) -> list[Proof]:
        rows, marks = found[: len(pending)], found[len(pending) :]
        return [
            Proof.APPLIED
            if keyed and marks[at].rows
            else decide_after_unknown("ack", leases[i].token, res.rows)
            for at, (i, res) in enumerate(zip(pending, rows, strict=True))
        ]

    lookup = Lookup(
        lambda: core.read(
            [*(s.lookup(leases[i]) for i in pending), *settled(pending)], "ack_many: look up"
        ),
        decided,
        "could not be looked up",
    )
    try:
        return (yield from climb(Ladder(sending(acks), answered, lookup, proves, gave_up), tries))
    except OutcomeUnknown as exc:  # the ladder ended unknown: so did each undecided ack
        for i in pending:
            out[i] = OutcomeUnknown(str(exc))
        return outcomes()


def _applied_acks(
    results: Sequence[Result], batch: Sequence[Lease], one_statement: bool
) -> set[str] | None:
    """The tokens of ``batch`` whose ack applied (None: the results do not tell)."""
    if not one_statement:  # each lease's ack and drop, in turn
        return {x.token for x, r in zip(batch, results[::2], strict=True) if r.rows_affected}
    first = results[0]
    if first.columns:
        return {row[0] for row in first.rows}
    if first.rows_affected in (0, len(batch)):
        return {x.token for x in batch} if first.rows_affected else set()
    return None
