"""Calls turned into history operations (docs/history-format.md).

Every call becomes an ``invoke`` and one completion: ``ok``; ``fail`` for rqueue's
definite failures (``Unavailable``, ``StatementError``, ``LeaseLost``,
``TransportClosed``); ``info`` for ``OutcomeUnknown`` and anything unexpected. A process
that got ``info`` retires and its worker carries on under a new process number.
``ack_and_claim`` becomes two overlapping operations, the ack on the claimer's process
and the claim on a companion process of the same claimer, which then holds the lease it
returned (:class:`Fused`, :class:`Processes`).
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from rqueue import (
    LeaseLost,
    OutcomeUnknown,
    StatementError,
    TransportClosed,
    Unavailable,
)

from ..errors import HarnessError
from ..history import ACK_MANY, CLAIM_MANY
from ..subjects import LeaseLike
from . import deadletters, text

log = logging.getLogger(__name__)

DEFINITE = (Unavailable, StatementError, LeaseLost, TransportClosed)
#: rqueue's errors (by class name) that refuse a call on purpose, for a cause the queue
#: detected and names in the message: recorded as a ``fail`` marked ``refused``
#: (docs/history-format.md, *Refusals*). ``ZoneRefused``: every node rewrites 'now' off UTC
REFUSALS = frozenset({"ZoneRefused"})
#: the operations that claim (and may dead-letter)
CLAIMS = ("claim", CLAIM_MANY)


class WorkloadError(HarnessError):
    """The workload could not start or stop; the message says what it waited for."""


def failure_kind(exc: BaseException) -> str:
    """The history type of a call that raised ``exc``: ``fail`` if definite, else ``info``."""
    return "fail" if isinstance(exc, DEFINITE) else "info"


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` refuses the call on purpose (its class, or a base of it, is one of
    :data:`REFUSALS`): certainly not applied, and said why."""
    return any(c.__name__ in REFUSALS for c in type(exc).__mro__)


def fused_kinds(exc: BaseException | None) -> tuple[str, str]:
    """The history types ``(ack, claim)`` of an ``ack_and_claim`` that raised ``exc``.

    ``None`` (it returned): both ``ok``. Otherwise the claim is ``fail``/``info`` by the
    exception's class; the ack is ``ok`` when ``exc.acked`` says it took effect, and else
    completes as a plain ack raising ``exc`` would.
    """
    if exc is None:
        return "ok", "ok"
    kind = failure_kind(exc)
    return ("ok" if getattr(exc, "acked", False) else kind), kind


class Ops:
    """Records operations into the history and counts them by ``(f, type)``."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()
        #: the calls refused on purpose (``is_refusal``), per error line
        self.refusals: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._next_process = itertools.count()
        #: added to every claim's invoke value (the queue's ``max_deliveries``)
        self.claim_extra: dict[str, Any] = {}

    def new_process(self) -> int:
        with self._lock:
            return next(self._next_process)

    def done(
        self,
        op: Any,
        f: str,
        kind: str,
        value: Any,
        error: str | None = None,
        refused: bool = False,
    ) -> None:
        """Complete ``op`` as ``kind`` with ``value`` (also a completion reported from
        elsewhere: a worker process, :mod:`harness.workload.processes`)."""
        extra = {"refused": True} if refused else {}  # only then: any recorder fits
        self.recorder.complete(op, kind, value, error=error, **extra)
        with self._lock:
            self.counts[(f, kind)] += 1
            if refused:
                self.refusals[error or "refused"] += 1

    def start(self, process: int, f: str, value: Any) -> Any:
        return self.recorder.invoke(process, f, value)

    def finish(self, op: Any, f: str, value: Any, result: Any, ok_value: Callable) -> str:
        self.done(op, f, "ok", ok_value(value, result))
        return "ok"

    def failed(
        self,
        op: Any,
        f: str,
        value: Any,
        exc: BaseException,
        kind: str | None = None,
        warn: bool = True,
    ) -> str:
        """Complete ``op`` from an exception (as ``kind``, by default by its class); an
        unexpected exception is logged unless ``warn`` is False (already logged)."""
        kind = kind or failure_kind(exc)
        if warn and not isinstance(exc, (*DEFINITE, OutcomeUnknown)):
            log.warning("unexpected %s from %s: %s", type(exc).__name__, f, exc)
        refused = kind == "fail" and is_refusal(exc)
        self.done(op, f, kind, value, error=f"{type(exc).__name__}: {exc}", refused=refused)
        return kind


def same(value: Any, _result: Any) -> Any:
    return value


def published(value: dict, seq: Any) -> dict:
    return {**value, "seq": seq} if isinstance(seq, int) else value


def msg_of(lease: LeaseLike) -> str | None:
    """The ``msg`` id carried inside a leased event (None if the event has none)."""
    try:
        doc = json.loads(lease.event)
    except (TypeError, ValueError):
        return None
    return doc.get("msg") if isinstance(doc, dict) else None


def lease_value(lease: LeaseLike) -> dict[str, Any]:
    return {"group": lease.group_id, "msg": msg_of(lease), "seq": lease.seq, "token": lease.token}


def leased(lease: LeaseLike, visibility: float) -> dict[str, Any]:
    """A lease as a claim's ok value records it."""
    value = {**lease_value(lease), "visibility": visibility}
    body = text.digest(getattr(lease, "event", None))
    if body is not None:
        value["digest"] = body  # of the body as delivered
    expires = getattr(lease, "expires_at", None)
    if isinstance(expires, int | float):
        value["expires_at"] = expires  # the server's lease deadline (epoch seconds)
    return value


def claimed(visibility: float) -> Callable[[Any, LeaseLike | None], dict | None]:
    def ok_value(_value: Any, lease: LeaseLike | None) -> dict | None:
        dead = deadletters.taken()
        if lease is None:
            return {"dead_lettered": dead} if dead else None
        value = leased(lease, visibility)
        if dead:
            value["dead_lettered"] = dead
        return value

    return ok_value


def claimed_many(visibility: float) -> Callable[[Any, Any], dict]:
    """The ok value of a ``claim-many``: ``leases`` (and what it dead-lettered)."""

    def ok_value(_value: Any, leases: Any) -> dict:
        value: dict[str, Any] = {"leases": [leased(x, visibility) for x in leases or ()]}
        dead = deadletters.taken()
        if dead:
            value["dead_lettered"] = dead
        return value

    return ok_value


def outcome_kind(outcome: BaseException | None) -> str:
    """The history outcome of one lease of ``ack_many``: None acked, else by its class."""
    return "ok" if outcome is None else failure_kind(outcome)


def acked_many(value: dict[str, Any], outcomes: Any) -> dict[str, Any]:
    """The ok value of an ``ack-many``: its leases and one outcome per lease."""
    return {**value, "outcomes": [outcome_kind(o) for o in outcomes]}


class Single:
    """One call recorded as one history operation, invoked on construction."""

    def __init__(
        self, ops: Ops, process: int, f: str, value: Any, ok_value: Callable = same
    ) -> None:
        if f in CLAIMS:
            deadletters.begin()  # collect what this claim dead-letters
            value = {**value, **ops.claim_extra}
        self.ops, self.f, self.value, self.ok_value = ops, f, value, ok_value
        self.op = ops.start(process, f, value)

    @classmethod
    def claim(cls, ops: Ops, process: int, value: dict[str, Any]) -> Single:
        """A claim of ``value`` (``visibility``, ``min_priority``): its ok value is the lease."""
        return cls(ops, process, "claim", value, claimed(value["visibility"]))

    @classmethod
    def claim_many(cls, ops: Ops, process: int, value: dict[str, Any]) -> Single:
        """A batch claim (``visibility``, ``min_priority``, ``max_messages``)."""
        return cls(ops, process, CLAIM_MANY, value, claimed_many(value["visibility"]))

    @classmethod
    def ack_many(cls, ops: Ops, process: int, leases: list[LeaseLike]) -> Single:
        """A batch ack of ``leases``: its ok value adds each lease's outcome."""
        return cls(ops, process, ACK_MANY, {"leases": [lease_value(x) for x in leases]}, acked_many)

    def complete(
        self, kind: str, result: Any, exc: BaseException | None, warn: bool = True
    ) -> None:
        """Complete the operation as ``kind`` (``exc``: the error, unless it returned)."""
        if kind == "ok":
            self.ops.finish(self.op, self.f, self.value, result, self.ok_value)
        else:
            assert exc is not None
            self.ops.failed(self.op, self.f, self.value, exc, kind, warn)

    def done(self, result: Any, exc: BaseException | None) -> tuple[str, Any]:
        """Complete from the call's result or exception; returns ``(type, result)``."""
        kind = "ok" if exc is None else failure_kind(exc)
        self.complete(kind, result, exc)
        return kind, result


class Fused:
    """``ack_and_claim`` recorded as two overlapping operations on two processes.

    The claim (on ``claim_process``) is invoked first, so the window of the lease it
    returns starts no later than the call; the ack (on the lease holder's process) right
    after. Both complete when the call returns, typed by :func:`fused_kinds`.
    """

    def __init__(
        self,
        ops: Ops,
        ack_process: int,
        claim_process: int,
        lease: LeaseLike,
        claim_value: dict[str, Any],
    ) -> None:
        self.claim = Single.claim(ops, claim_process, claim_value)
        self.ack = Single(ops, ack_process, "ack", lease_value(lease))

    def done(
        self, result: LeaseLike | None, exc: BaseException | None
    ) -> tuple[tuple[str, str], LeaseLike | None]:
        """Complete both; returns ``((ack type, claim type), the claimed lease or None)``."""
        ack, claim = fused_kinds(exc)
        self.ack.complete(ack, None, exc)
        self.claim.complete(claim, result, exc, warn=ack == "ok")  # one warning per call
        return (ack, claim), result


class Processes:
    """A claimer's history processes: ``main`` makes its calls and holds its lease;
    ``spare`` records the claim half of ``ack_and_claim`` (a process has one operation
    open at a time). Whoever got ``info`` is replaced, never reused."""

    def __init__(self, ops: Ops) -> None:
        self._ops = ops
        self.main = ops.new_process()
        self._spare: int | None = None

    @property
    def spare(self) -> int:
        if self._spare is None:
            self._spare = self._ops.new_process()
        return self._spare

    def after(self, kind: str) -> None:
        """After a call on ``main`` completed as ``kind``."""
        if kind == "info":
            self.main = self._ops.new_process()

    def after_fused(self, ack: str, claim: str, leased: bool) -> None:
        """After ``ack_and_claim``: the spare that claimed a lease becomes its holder."""
        self.after(ack)
        if claim == "info":
            self._spare = None
        if leased:
            self.main, self._spare = self.spare, self.main


def call(
    ops: Ops, process: int, f: str, value: Any, fn: Callable, ok_value: Callable = same
) -> tuple[str, Any, int]:
    """Invoke, run ``fn``, complete; returns ``(type, result, process to use next)``."""
    kind, result = perform(Single(ops, process, f, value, ok_value), fn)
    return kind, result, (ops.new_process() if kind == "info" else process)


def perform(record: Single | Fused, fn: Callable, *args: Any) -> Any:
    """Call ``fn(*args)`` and complete ``record`` from its result or exception."""
    try:
        result = fn(*args)
    except Exception as e:
        return record.done(None, e)
    return record.done(result, None)


async def aperform(record: Single | Fused, fn: Callable, *args: Any) -> Any:
    """:func:`perform` for a coroutine function."""
    try:
        result = await fn(*args)
    except Exception as e:
        return record.done(None, e)
    return record.done(result, None)
