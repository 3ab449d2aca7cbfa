"""Group commit: concurrent writes through one transport share one HTTP request.

While a transport has a merged request in flight, the mergeable calls that other threads
(or tasks) start wait in a :class:`Coalescer`; when the request returns, all of them go
as the next request: one HTTP exchange, one Raft entry, one fsync for all. Each call
gets its own slice of the results back, exactly as if it had been sent alone.

Only calls that settle an unknown outcome on their own are mergeable (claims, fenced
``ack``/``nack``/``extend``, publishes with a ``dedup_id``), because a merged request
shares one fate: a timeout, a dropped connection or a leader change makes the outcome of
every call in it unknown, and each call's operation then resolves it as it would alone
(look its token or row up, retry). The merged request is one transaction, so no call in
it is applied without the others.

One exchange is tried for a merged request; whatever certainly did not reach the store
(a node that refused the connection, HTTP 503, a redirect, a rejected body) sends each
call back to go *alone*, through the transport's normal failover path. So merging adds
no retry loop of its own: the worst case is one extra try.

This module is sans-IO: the queue of waiting calls, merging and splitting, and what one
exchange means for each call. The sync and async transports wait and send.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from ._endpoints import Endpoints
from ._exceptions import OutcomeUnknown, RqueueError, StatementError, Unavailable
from ._models import Fuse, HttpCall, Result, Stmt
from ._text import wire
from ._wire import Outcome, Verdict, classify_response
from ._zone import ZoneGuard, is_guard_failure

#: most calls in one merged request, and most statements
MAX_CALLS = 64
MAX_STATEMENTS = 512
#: seconds merging pauses after a statement failed inside a merged request
PAUSE_AFTER_FAILURE = 1.0
#: how much longer than one request's timeout a call taken into a batch waits for the
#: outcome its sender reports (the sender's one exchange is bounded by that timeout)
SETTLE_MARGIN = 5.0
#: merged requests a transport keeps in flight at once: one measured best (bigger
#: batches); the calls that wait meanwhile go together in the next
MAX_IN_FLIGHT = 1


@dataclass(frozen=True)
class Done:
    """A call's results from a merged exchange."""

    results: tuple[Result, ...]


@dataclass(frozen=True)
class Failed:
    """A call's exception from a merged exchange (raise it in the call's operation).

    ``poisoned``: a statement failed inside the merged transaction; merging pauses for
    a moment so that a call whose statement keeps failing fails alone, with its own error.
    """

    error: RqueueError
    poisoned: bool = False


@dataclass(frozen=True)
class Alone:
    """The merged exchange certainly did not apply the call: send it alone.

    ``poisoned``: a statement failed, so merging pauses (see :class:`Failed`)."""

    reason: str
    poisoned: bool = False


Settled = Done | Failed | Alone


@dataclass(eq=False)
class Waiting:
    """One call in the coalescer. ``batch`` is set when its owner must send that batch;
    ``settled`` when another owner's exchange decided it. ``handle`` is the I/O layer's
    (an event or a future) to wake the owner."""

    call: HttpCall
    deadline: float
    handle: Any = None
    #: the call's statements as JSON list items, encoded by its own thread before it
    #: waits: the sender only joins them (see :func:`merged_body`)
    fragment: str = ""
    batch: list[Waiting] | None = None
    settled: Settled | None = None
    taken: bool = False


#: a twin's one exchange of a batch (its ``_send_merged``), which its merger calls
SendBatch = Callable[[list[Waiting], float], list[Settled]]
AsyncSendBatch = Callable[[list[Waiting], float], Awaitable[list[Settled]]]


class Coalescer:
    """Who sends next, and what. Not thread-safe: the sync transport holds a lock around
    every method, the async one runs them on its loop.

    A call that arrives while nothing is in flight is sent at once, alone in its batch;
    calls that arrive during a flight queue up, and when it ends the oldest of them sends
    them all (up to :data:`MAX_CALLS` calls and :data:`MAX_STATEMENTS` statements).
    """

    def __init__(
        self,
        max_calls: int = MAX_CALLS,
        max_statements: int = MAX_STATEMENTS,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        if max_calls < 1 or max_statements < 1 or max_in_flight < 1:
            raise ValueError("a batch needs room for at least one call and one statement")
        self.max_calls = max_calls
        self.max_statements = max_statements
        self.max_in_flight = max_in_flight
        self._queue: list[Waiting] = []
        self._in_flight = 0
        self._paused_until = float("-inf")
        #: batches of two or more calls handed to a sender, and the calls in them (a batch
        #: whose sender is cancelled, or that goes alone for want of a trusted node, counts)
        self.merged_requests = 0
        self.merged_calls = 0

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def accepting(self, now: float) -> bool:
        """Whether calls may be merged now (not paused after a failed statement)."""
        return now >= self._paused_until

    def pause(self, now: float, seconds: float = PAUSE_AFTER_FAILURE) -> None:
        """Send every call alone for ``seconds``."""
        self._paused_until = max(self._paused_until, now + seconds)

    def arrive(self, item: Waiting) -> list[Waiting] | None:
        """A call is ready: the batch to send now (its owner sends), or None (wait)."""
        if self._in_flight >= self.max_in_flight:
            self._queue.append(item)
            return None
        self._in_flight += 1
        item.taken = True
        return [item]

    def finished(self) -> list[Waiting] | None:
        """The flight ended: the next batch (its first call's owner sends it), or None."""
        if not self._queue:
            self._in_flight -= 1
            return None
        batch: list[Waiting] = []
        statements = 0
        while self._queue and len(batch) < self.max_calls:
            n = len(self._queue[0].call.statements)
            if batch and statements + n > self.max_statements:
                break
            item = self._queue.pop(0)
            item.taken = True
            batch.append(item)
            statements += n
        batch[0].batch = batch
        if len(batch) > 1:
            self.merged_requests += 1
            self.merged_calls += len(batch)
        return batch

    def conclude(
        self, batch: Sequence[Waiting], settled: Sequence[Settled], own: Waiting, now: float
    ) -> list[Waiting]:
        """A flight ended: give each call of ``batch`` but ``own`` its outcome, pause after a
        failed statement, and return whom to wake, in order: the next batch's sender first
        (the next request is on the critical path), then the settled callers."""
        if any(isinstance(s, Failed | Alone) and s.poisoned for s in settled):
            self.pause(now)
        following = self.finished()
        wake = [following[0]] if following is not None else []
        for w, s in zip(batch, settled, strict=True):
            if w is not own:
                w.settled = s
                wake.append(w)
        return wake

    def withdraw(self, item: Waiting) -> bool:
        """A waiting call gives up (its time ran out): True if it was not taken yet."""
        if item.taken:
            return False
        self._queue.remove(item)
        return True


def merge(calls: Sequence[HttpCall]) -> HttpCall:
    """One call carrying every statement of ``calls``, as one transaction.

    The calls' time stamps become one, at the front: every statement of the merged
    request is applied in the same transaction, so one stamped time serves them all, and
    each stamp left out is a statement fewer to send, replicate and apply.

    Where the calls share a fuser (their :class:`~rqueue.Statements`, see
    :attr:`~rqueue.Statements.fuser`), the statements that say how they fuse
    (``Stmt.fuse``) become one statement per kind: first every other statement in call
    order, then one fenced ack of all the acks, one claim per priority floor leasing
    one group to each claim (highest floor first), and one drop of the emptied groups.
    The calls are concurrent, so any order of them is one they could have run in; a
    claim chained to its call's ack reads that ack's mark, not its neighbour's
    ``changes()``.
    """
    if len(calls) == 1:
        return calls[0]
    first = calls[0]
    if any(c.query != first.query or c.text_as_bytes != first.text_as_bytes for c in calls):
        raise ValueError("merge: calls with different query parameters or wire forms")
    path = "/db/request" if any(c.path == "/db/request" for c in calls) else "/db/execute"
    stamps = [c.statements[0] for c in calls if c.stamped]
    head: tuple[Stmt, ...] = (stamps[0],) if stamps else ()
    what = f"{len(calls)} merged calls"
    as_bytes = first.text_as_bytes
    fuser = first.fuser
    fusing = fuser is not None and all(c.fuser is fuser for c in calls)
    if not fusing or not any(s.fuse for c in calls for s in _own(c)):
        statements = head + tuple(s for c in calls for s in _own(c))
        return HttpCall(
            path, statements, first.query, what=what, stamped=bool(stamps), text_as_bytes=as_bytes
        )
    out = list(head)
    places: list[list[tuple[int, Fuse | None]]] = []
    kinds: dict[tuple[int, int], list[tuple[list[tuple[int, Fuse | None]], int, Fuse]]] = {}
    for c in calls:
        mine: list[tuple[int, Fuse | None]] = []
        for s in _own(c):
            if s.fuse is None:
                mine.append((len(out), None))
                out.append(s)
            else:
                mine.append((-1, s.fuse))
                kinds.setdefault(_rank(s.fuse), []).append((mine, len(mine) - 1, s.fuse))
        places.append(mine)
    for key in sorted(kinds):
        items = kinds[key]
        at = len(out)
        out.append(fuser.fused([f for _, _, f in items]))
        for mine, i, f in items:
            mine[i] = (at, f)
    layout = tuple(tuple(m) for m in places)
    return HttpCall(
        path,
        tuple(out),
        first.query,
        what=what,
        stamped=bool(stamps),
        layout=layout,
        text_as_bytes=as_bytes,
    )


def _rank(fuse: Fuse) -> tuple[int, int]:
    """Where a fused statement goes: acks, then claims (highest floor first), then drops."""
    if fuse.kind == "ack":
        return (0, 0)
    if fuse.kind == "claim":
        return (1, -fuse.min_priority)
    return (2, 0)


def _own(call: HttpCall) -> tuple[Stmt, ...]:
    """The call's statements without its time stamp."""
    return call.statements[1:] if call.stamped else call.statements


def split_results(
    calls: Sequence[HttpCall], merged: HttpCall, results: tuple[Result, ...]
) -> list[tuple[Result, ...] | RqueueError]:
    """Each call's slice of the merged request's results, as if it had been sent alone:
    a stamped call gets the one shared stamp's result first. A fused statement's result
    is cut down to the call's own rows (:func:`_own_part`); a call whose part of it cannot
    be told gets an :class:`OutcomeUnknown` instead."""
    if len(calls) == 1:
        return [results]
    i = 1 if merged.stamped else 0
    stamp = results[:i]
    out: list[tuple[Result, ...] | RqueueError] = []
    if merged.layout is None:
        for c in calls:
            k = len(_own(c))
            out.append((stamp if c.stamped else ()) + results[i : i + k])
            i += k
        return out
    counts: dict[int, int] = {}
    for mine in merged.layout:
        for at, fuse in mine:
            if fuse is not None and fuse.kind == "ack":
                counts[at] = counts.get(at, 0) + len(fuse.leases)
    for c, mine in zip(calls, merged.layout, strict=True):
        try:
            own = tuple(
                results[at] if fuse is None else _own_part(results[at], fuse, counts.get(at, 0))
                for at, fuse in mine
            )
        except OutcomeUnknown as exc:
            out.append(OutcomeUnknown(f"{c.what}: {exc}"))
            continue
        out.append((stamp if c.stamped else ()) + own)
    return out


def _own_part(res: Result, fuse: Fuse, acks: int) -> Result:
    """A call's part of a fused statement's result: its acks' and claims' rows (found by
    token), as its own statement would have returned them."""
    if fuse.kind == "drop":
        return Result()
    if fuse.kind == "ack":
        tokens = {x.token for x in fuse.leases}
        if res.columns:
            rows = tuple(r for r in res.rows if r[0] in tokens)
            return Result(res.columns, rows, rows_affected=len(rows))
        if res.rows_affected in (0, acks):  # none or all applied: each one's is known
            return Result(rows_affected=len(tokens) if res.rows_affected else 0)
        raise OutcomeUnknown(
            f"{res.rows_affected} of {acks} merged acks applied, and the server did not "
            "say which (no RETURNING rows)"
        )
    if not res.columns:
        return Result()  # run as a plain write: the claim reads its lease back by token
    col = res.columns.index("token")
    tokens = {c.token for c in fuse.claims}
    rows = tuple(r for r in res.rows if r[col] in tokens)
    return Result(res.columns, rows, rows_affected=len(rows))


def _named(call: HttpCall, count: int) -> str:
    return call.what if count == 1 else f"{call.what} (merged with {count - 1} other calls)"


def send_failed(
    calls: Sequence[HttpCall], url: str, reason: str, sent: bool, endpoints: Endpoints
) -> list[Settled]:
    """The exchange failed in the client library; ``sent``: it may have reached a node."""
    endpoints.failed(url)
    if not sent:
        return [Alone(f"{url}: {reason}") for _ in calls]
    return [
        Failed(OutcomeUnknown(f"{_named(c, len(calls))}: outcome unknown: {url}: {reason}"))
        for c in calls
    ]


def answered(
    calls: Sequence[HttpCall],
    merged: HttpCall,
    url: str,
    status: int,
    text: str,
    endpoints: Endpoints,
    zone: ZoneGuard | None = None,
) -> list[Settled]:
    """What a node's answer to the ``merged`` request means for each of ``calls``."""
    verdict = classify_response(merged, status, text)
    n = len(calls)
    zone = zone if merged.stamped else None
    if verdict.outcome is Outcome.OK:
        endpoints.succeeded(url)
        if zone is not None:
            zone.observed(verdict.results[0])
        return [
            Done(r) if isinstance(r, tuple) else Failed(r)
            for r in split_results(calls, merged, verdict.results)
        ]
    failure = f"{url}: {verdict.reason}"
    if zone is not None and is_guard_failure(verdict.reason):
        # the stamp refused the node's time: nothing applied; each call goes alone, and
        # the node is checked again before its next timed call
        zone.forget(url)
        return [Alone(failure) for _ in calls]
    if verdict.outcome is Outcome.RETRY:
        endpoints.failed(url)
        return [Alone(failure) for _ in calls]
    if verdict.outcome is Outcome.UNKNOWN and not verdict.statement_failed:
        endpoints.failed(url)
        return [
            Failed(OutcomeUnknown(f"{_named(c, n)}: outcome unknown: {failure}")) for c in calls
        ]
    if verdict.auth_failed:
        return [Failed(Unavailable(f"{c.what}: {failure}")) for c in calls]
    if n == 1:
        return [Failed(_alone_error(calls[0], verdict, failure))]
    if verdict.outcome is Outcome.FAILED:
        # nothing ran (a body refused, or a statement's error that rolled everything
        # back): each call goes alone, and one whose statement keeps failing fails with
        # its own error (merging pauses meanwhile)
        return [Alone(failure, poisoned=status == 200) for _ in calls]
    # A statement failed where rqlite may have committed the others (/db/request commits
    # around a statement that fails to prepare): each call's operation looks its own
    # outcome up, and may go alone again (the culprit's statement may not be its own).
    why = f"outcome unknown: a statement of the merged request failed: {failure}"
    return [Failed(OutcomeUnknown(f"{_named(c, n)}: {why}"), poisoned=True) for c in calls]


def _alone_error(call: HttpCall, verdict: Verdict, failure: str) -> RqueueError:
    """The error of a call that was alone in its merged exchange, as sent alone."""
    if verdict.outcome is Outcome.FAILED:
        return StatementError(f"{call.what}: {failure}")
    unknown = OutcomeUnknown(f"{call.what}: outcome unknown: {failure}")
    unknown.statement_failed = True
    return unknown


@dataclass(frozen=True)
class Exchange:
    """The one try of a merged request: where it goes, what it carries, and what its
    answer (or failure) means for each call. The I/O layers send it and report back."""

    calls: list[HttpCall]
    merged: HttpCall
    endpoints: Endpoints
    url: str
    timeout: float
    path: str
    body: bytes
    zone: ZoneGuard | None = None

    def failed(self, reason: str, sent: bool) -> list[Settled]:
        return send_failed(self.calls, self.url, reason, sent, self.endpoints)

    def answered(self, status: int, text: str) -> list[Settled]:
        return answered(self.calls, self.merged, self.url, status, text, self.endpoints, self.zone)


def exchange(
    batch: Sequence[Waiting],
    endpoints: Endpoints,
    request_timeout: float,
    time_left: float,
    zone: ZoneGuard | None = None,
) -> Exchange | list[Settled]:
    """The try of ``batch`` at the node that answered last; or, when there is no such node
    (the last call failed: failover needs probing; or its time zone is to be checked
    again, see rqueue._zone) or no time, every call alone."""
    calls = [w.call for w in batch]
    url = endpoints.current
    timeout = min(request_timeout, time_left)
    if not endpoints.trusted(url) or timeout <= 0:
        return [Alone("no node to send a merged request to") for _ in calls]
    merged = merge(calls)
    stamp = None
    if zone is not None and merged.stamped:
        if zone.check_due(url) or zone.refused(url):
            return [Alone(f"{url}: its time zone is to be checked") for _ in calls]
        stamp = zone.stamp()  # the reference of the moment
    if merged.layout is None:
        body = merged_body(batch, stamp)
    else:
        body = json.dumps(merged.body(stamp)).encode()
    return Exchange(calls, merged, endpoints, url, timeout, request_path(merged), body, zone)


def fragment(call: HttpCall) -> str:
    """``call``'s statements but its time stamp, as the items of a JSON list (no brackets).

    Always ``[sql, *params]``: merged fragments must share one form (rqlite < 8.24.8
    refuses a body that mixes plain and parameterized statements); through
    :func:`rqueue._text.wire`, as :meth:`HttpCall.body` does.
    """
    return json.dumps([wire(s.sql, s.params, call.text_as_bytes) for s in _own(call)])[1:-1]


def merged_body(batch: Sequence[Waiting], stamp: Stmt | None = None) -> bytes:
    """The JSON body of the merged request of ``batch``: one time stamp first if any call
    is stamped (see :func:`merge`; ``stamp``, or the first stamped call's), then its
    calls' statements, in order."""
    parts = [w.fragment or fragment(w.call) for w in batch]
    stamped = next((w.call for w in batch if w.call.stamped), None)
    if stamped is not None:
        first = stamp or stamped.statements[0]
        parts.insert(0, json.dumps(wire(first.sql, first.params, stamped.text_as_bytes)))
    return ("[" + ",".join(p for p in parts if p) + "]").encode()


def request_path(call: HttpCall) -> str:
    """The path of ``call``'s POST, with its query."""
    return f"{call.path}?{urlencode(call.query)}" if call.query else call.path


def request_target(call: HttpCall) -> tuple[str, bytes]:
    """The path (with query) and JSON body of ``call``'s POST."""
    return request_path(call), json.dumps(call.body()).encode()


def deadline_of(batch: Sequence[Waiting]) -> float:
    """The earliest deadline among a batch's calls: its one exchange must fit them all."""
    return min(w.deadline for w in batch)


def no_word(item: Waiting, waited: float) -> Failed:
    """The outcome of a call whose sender never reported back within ``waited`` seconds."""
    return Failed(
        OutcomeUnknown(
            f"{item.call.what}: outcome unknown: no word from the sender of its merged "
            f"request after {waited:g} s"
        )
    )


def stopped_sender(batch: Sequence[Waiting], sent: bool) -> list[Settled]:
    """Outcomes when the thread or task sending ``batch`` stopped (interrupted, cancelled)
    before the answer came: unknown if the request may have gone out, else alone."""
    if not sent:
        return [Alone("the merged request was not sent: its sender stopped") for _ in batch]
    return [
        Failed(
            OutcomeUnknown(
                f"{w.call.what}: outcome unknown: the sender of its merged request stopped"
            )
        )
        for w in batch
    ]
