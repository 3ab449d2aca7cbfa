"""The batch operations of the core: ``claim_many`` and ``ack_many``.

Each is an operation of :class:`~rqueue._core.QueueCore` (a generator of calls), driven
by both twins as the single operations are, and safe under faults the same way:

* ``claim_many`` leases up to ``n`` heads of distinct groups in one request, each with a
  token of its own. The request is one transaction: after an unknown outcome the tokens
  are looked up, and none found, the same tokens are sent again (the loop that
  :meth:`QueueCore.claim_until_known` shares with the single claim);
* ``ack_many`` acks every lease in one request, each fenced by its own token, and tells
  each outcome apart (acked, :class:`LeaseLost`, :class:`OutcomeUnknown`): after an
  unknown outcome it looks every undecided lease up and retries only those still live
  (:func:`~rqueue._decisions.decide_after_unknown`, as a single ``ack`` does).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import _dlq
from ._core import QueueCore, new_token
from ._decisions import decide_after_unknown, lease_lost
from ._exceptions import OutcomeUnknown, RqueueError, StatementError, Unavailable
from ._models import Claim, DeadLetter, Lease, Op, Result, Stmt
from ._statements import LEASE_RETURNING

#: most messages one ``claim_many`` or ``ack_many`` takes
MAX_BATCH = 100


def claim_many(
    core: QueueCore, worker_id: str, visibility: float, min_priority: int, n: int
) -> Op[list[Lease]]:
    """Lease up to ``n`` messages of ``n`` distinct groups in one request (one
    statement where the server's parser takes it, else one per lease), each with its
    own token; in claim order. After an unknown outcome the tokens are looked up (the
    request is one transaction: all of them or none took effect) and, none found, the
    same tokens are sent again (a token already in use leases nothing)."""
    return (yield from core.with_clock(_claim_many(core, worker_id, visibility, min_priority, n)))


def _claim_many(
    core: QueueCore, worker_id: str, visibility: float, min_priority: int, n: int
) -> Op[list[Lease]]:
    s, one_request = core.statements, core.server.one_request_claim
    tokens = [new_token(worker_id) for _ in range(n)]
    dead: dict[int, DeadLetter] = {}
    move = core.dead.move(tokens[0])
    if s.fusing:
        claims = [s.claim_batch([Claim(t, visibility) for t in tokens], min_priority)]
    elif one_request:
        claims = [s.claim_returning(t, visibility, min_priority) for t in tokens]
    else:
        claims = [s.claim_lease(t, visibility, min_priority) for t in tokens]
    moved = core.dead.moved_by(tokens[0])

    def answered(results: Sequence[Result]) -> Op[list[Lease]]:
        _dlq.collect(dead, results[len(move) + len(claims) :])
        leased = results[len(move) : len(move) + len(claims)]
        if any(r.columns for r in leased):
            return _leases(core, leased, tokens)
        # run as a plain write: read the leases back by token
        applied = OutcomeUnknown("claim_many: applied, but not read back")
        return (yield from _look_up_tokens(core, tokens, applied, dead))

    found = yield from core.claim_until_known(
        lambda: (
            core.request([*move, *claims, *moved], "claim_many", mergeable=True)
            if one_request
            else core.write([*move, *claims], "claim_many")
        ),
        answered,
        lambda unknown: _look_up_tokens(core, tokens, unknown, dead),
    )
    core.report_dead(dead)
    return found


def _look_up_tokens(
    core: QueueCore, tokens: Sequence[str], unknown: OutcomeUnknown, dead: dict[int, DeadLetter]
) -> Op[list[Lease]]:
    """The leases of ``tokens`` (in their order), and what their claim moved."""
    marks = ", ".join("?" * len(tokens))
    stmt = Stmt(
        f'SELECT {LEASE_RETURNING}, locked_by AS token FROM "groups" WHERE locked_by IN ({marks})',
        tuple(tokens),
    )
    try:
        res, *moved = yield core.read([stmt, *core.dead.moved_by(tokens[0])], "claim: look up")
    except (Unavailable, StatementError) as exc:
        raise OutcomeUnknown(f"{unknown}; the tokens could not be looked up: {exc}") from exc
    _dlq.collect(dead, moved)
    return _leases(core, [res], tokens)


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
    s, one_statement = core.statements, core.server.one_request_claim
    out: dict[int, RqueueError | None] = {}
    pending = list(range(len(leases)))
    unknown: OutcomeUnknown | None = None
    while pending:
        batch = [leases[i] for i in pending]
        stmts = s.ack_batch(batch) if one_statement else [st for x in batch for st in s.ack(x)]
        try:
            results = yield core.write(stmts, f"ack_many({len(batch)})", mergeable=True)
        except OutcomeUnknown as exc:
            unknown = unknown or exc
            applied: set[str] | None = None
        except (Unavailable, StatementError) as exc:
            for i in pending:
                out[i] = exc if unknown is None else OutcomeUnknown(f"{unknown}; {exc}")
            break
        else:
            applied = _applied_acks(results, batch, one_statement)
        if applied is not None:
            for i in pending:
                if leases[i].token in applied:
                    out[i] = None
                elif unknown is None:
                    out[i] = lease_lost("ack", leases[i])
            pending = [i for i in pending if i not in out]
            if not pending:
                break
            unknown = unknown or OutcomeUnknown("ack_many: some acks were not told apart")
        lookups = [s.lookup(leases[i]) for i in pending]
        try:
            found = yield core.read(lookups, "ack_many: look up")
        except (Unavailable, StatementError) as exc:
            for i in pending:
                out[i] = OutcomeUnknown(f"{unknown}; could not be looked up: {exc}")
            break
        again = []
        for i, res in zip(pending, found, strict=True):
            decision = decide_after_unknown("ack", leases[i].token, res.rows)
            if decision == "retry":
                again.append(i)
            elif decision == "lost":
                out[i] = lease_lost("ack", leases[i])
            else:
                out[i] = OutcomeUnknown(f"{unknown}; the message's state does not settle it")
        pending = again
    return [out[i] for i in range(len(leases))]


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
