"""The client workload: publishers and claimers driving a subject, every call recorded.

Publishers (threads) each own a few groups and publish to them one message at a time;
every event carries a run-unique ``msg`` id. Claimers claim, "work" for a random time
and then ack, or nack (at once or with a delay), or stall past their visibility, or
extend their lease midway; with ``workload.ack_and_claim`` an ack is sometimes
``ack_and_claim``, whose lease is worked on next. Some claimers are threads with the
subject's sync client, the others are tasks on one asyncio loop with its async client;
both run the same claimer loop, written once as a generator of steps (:class:`Wait`,
:class:`Call`) that a thread or a task drives.

Every call becomes an ``invoke`` and one completion in the history
(docs/history-format.md): ``ok``; ``fail`` for rqueue's definite failures
(``Unavailable``, ``StatementError``, ``LeaseLost``, ``TransportClosed``); ``info`` for
``OutcomeUnknown`` and anything unexpected. A process that got ``info`` retires and its
worker carries on under a new process number. ``ack_and_claim`` becomes two overlapping
operations, the ack on the claimer's process and the claim on a companion process of the
same claimer, which then holds the lease it returned (:class:`Fused`, :class:`Processes`).

After the faults are healed, :meth:`Workload.drain` claims and acks until the queue's
``messages`` table is empty (waiting out parks and lapsed leases), within a deadline.

With ``workload.poison`` some messages are poison: every claimer nacks them (with an
error), the drain too, so only the queue's ``max_deliveries`` takes them out; the
claims record what they dead-lettered and the drain ends with one read of the
dead-letter queue (:mod:`harness.workload.deadletters`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from rqueue import (
    LeaseLost,
    OutcomeUnknown,
    StatementError,
    TransportClosed,
    Unavailable,
)

from ..errors import HarnessError
from ..scenario import Workload as WorkloadSpec
from ..subjects import LeaseLike, Subject, SubjectError
from . import deadletters

log = logging.getLogger(__name__)

DEFINITE = (Unavailable, StatementError, LeaseLost, TransportClosed)


class WorkloadError(HarnessError):
    """The workload could not start or stop; the message says what it waited for."""


# -- recording ------------------------------------------------------------------------------
def failure_kind(exc: BaseException) -> str:
    """The history type of a call that raised ``exc``: ``fail`` if definite, else ``info``."""
    return "fail" if isinstance(exc, DEFINITE) else "info"


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
        self._lock = threading.Lock()
        self._next_process = itertools.count()
        #: added to every claim's invoke value (the queue's ``max_deliveries``)
        self.claim_extra: dict[str, Any] = {}

    def new_process(self) -> int:
        with self._lock:
            return next(self._next_process)

    def _done(self, op: Any, f: str, kind: str, value: Any, error: str | None = None) -> None:
        self.recorder.complete(op, kind, value, error=error)
        with self._lock:
            self.counts[(f, kind)] += 1

    def start(self, process: int, f: str, value: Any) -> Any:
        return self.recorder.invoke(process, f, value)

    def finish(self, op: Any, f: str, value: Any, result: Any, ok_value: Callable) -> str:
        self._done(op, f, "ok", ok_value(value, result))
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
        self._done(op, f, kind, value, error=f"{type(exc).__name__}: {exc}")
        return kind


def _same(value: Any, _result: Any) -> Any:
    return value


def _published(value: dict, seq: Any) -> dict:
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


def _claimed(visibility: float) -> Callable[[Any, LeaseLike | None], dict | None]:
    def ok_value(_value: Any, lease: LeaseLike | None) -> dict | None:
        dead = deadletters.taken()
        if lease is None:
            return {"dead_lettered": dead} if dead else None
        value = {**lease_value(lease), "visibility": visibility}
        if dead:
            value["dead_lettered"] = dead
        expires = getattr(lease, "expires_at", None)
        if isinstance(expires, int | float):
            value["expires_at"] = expires  # the server's lease deadline (epoch seconds)
        return value

    return ok_value


class Single:
    """One call recorded as one history operation, invoked on construction."""

    def __init__(
        self, ops: Ops, process: int, f: str, value: Any, ok_value: Callable = _same
    ) -> None:
        if f == "claim":
            deadletters.begin()  # collect what this claim dead-letters
            value = {**value, **ops.claim_extra}
        self.ops, self.f, self.value, self.ok_value = ops, f, value, ok_value
        self.op = ops.start(process, f, value)

    @classmethod
    def claim(cls, ops: Ops, process: int, value: dict[str, Any]) -> Single:
        """A claim of ``value`` (``visibility``, ``min_priority``): its ok value is the lease."""
        return cls(ops, process, "claim", value, _claimed(value["visibility"]))

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


# -- what a claimer does with a lease ---------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """One lease's fate: work ``work`` seconds (extending midway?), then ack or nack."""

    action: str  # "ack" | "nack"
    work: float
    delay: float = 0.0
    extend: bool = False
    stalled: bool = False


def plan_lease(rng: random.Random, spec: WorkloadSpec, stall_probability: float) -> Plan:
    """Draw what to do with a fresh lease (pure given ``rng``)."""
    r = rng.random()
    work = rng.uniform(*spec.work)
    if r < stall_probability:
        stall = spec.visibility * rng.uniform(1.3, 2.0)
        return Plan("ack", stall, stalled=True)
    r -= stall_probability
    if r < spec.nack_probability:
        return Plan("nack", work)
    r -= spec.nack_probability
    if r < spec.nack_delay_probability:
        return Plan("nack", work, delay=rng.uniform(*spec.nack_delay))
    extend = rng.random() < spec.extend_probability
    if extend:
        work = max(work, spec.visibility * rng.uniform(0.5, 1.2))
    return Plan("ack", work, extend=extend)


def release_action(plan: Plan, stopping: bool, rng: random.Random, ack_and_claim: float) -> str:
    """How a worked lease is let go: ``nack``, ``ack`` or ``ack_and_claim``.

    A nack needs the workload running (a stopping claimer acks); an ack becomes
    ``ack_and_claim`` with probability ``ack_and_claim`` while running (``rng`` is drawn
    only when that is above 0, so runs without it keep their random streams).
    """
    if stopping:
        return "ack"
    if plan.action == "nack":
        return "nack"
    if ack_and_claim > 0 and rng.random() < ack_and_claim:
        return "ack_and_claim"
    return "ack"


@dataclass(frozen=True)
class Wait:
    """A claimer step: pause ``seconds`` or until the workload stops."""

    seconds: float


@dataclass(frozen=True)
class Call:
    """A claimer step: call ``method(*args)`` on the client, completing ``record``."""

    record: Single | Fused
    method: str
    args: tuple[Any, ...]


Steps = Generator[Wait | Call, Any, Any]


# -- the workload ---------------------------------------------------------------------------
class _Shared:
    """One sync client used by several claimer threads: closed when the last one is done."""

    def __init__(self, client: Any, users: int) -> None:
        self._client, self._users = client, users
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def close(self) -> None:
        with self._lock:
            self._users -= 1
            last = self._users <= 0
        if last:
            self._client.close()


class Workload:
    """Publishers and claimers against one subject; start, stop, then drain."""

    def __init__(
        self,
        spec: WorkloadSpec,
        subject: Subject,
        urls: Sequence[str],
        recorder: Any,
        *,
        seed: int = 0,
        timeout: float = 5.0,
    ) -> None:
        self.spec, self.subject, self.urls = spec, subject, list(urls)
        self.ops = Ops(recorder)
        self.seed, self.timeout = seed, timeout
        self.stop_event = threading.Event()
        self.stall_probability = spec.stall_probability
        self.clock_offsets: dict[str, float] = {}
        self.outstanding = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._astop: asyncio.Event | None = None
        self.sync_names = [f"s{i}" for i in range(spec.sync_claimers)]
        self.async_names = [f"a{i}" for i in range(spec.async_claimers)]
        self.errors: list[BaseException] = []
        #: options the subject's clients are opened with (the queue's max_deliveries)
        self.options = {"max_deliveries": spec.max_deliveries} if spec.max_deliveries else {}
        self.ops.claim_extra = dict(self.options)

    @property
    def claimer_names(self) -> list[str]:
        return self.sync_names + self.async_names

    # -- knobs the nemesis turns --------------------------------------------------------------
    def clock(self, worker: str) -> Callable[[], float]:
        """The wall clock ``worker`` sees: real time plus its current offset."""
        return lambda: time.time() + self.clock_offsets.get(worker, 0.0)

    def set_clock_offset(self, worker: str, seconds: float) -> None:
        self.clock_offsets[worker] = seconds

    def set_stall_probability(self, probability: float | None) -> None:
        """Make claimers stall past visibility this often (None: the scenario's own rate)."""
        self.stall_probability = self.spec.stall_probability if probability is None else probability

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, ready_timeout: float = 60.0) -> None:
        """Open every client, then start publishers and claimers together."""
        opened = threading.Event()
        go = threading.Event()
        clients: list[Any] = []
        opened_now: list[Any] = []  # what to close if opening fails part way
        try:
            for p in range(self.spec.publishers):
                clients.append(self._open(f"p{p}"))
                opened_now.append(clients[-1])
            if self.spec.shared_transport and self.sync_names:
                one = self._open("sync-claimers")
                opened_now.append(one)
                shared = _Shared(one, len(self.sync_names))
                clients.extend(shared for _ in self.sync_names)
            else:
                for name in self.sync_names:
                    clients.append(self._open(name))
                    opened_now.append(clients[-1])
        except BaseException:
            for c in opened_now:
                c.close()
            raise
        for p in range(self.spec.publishers):
            self._spawn(f"publisher-p{p}", self._publisher, p, clients[p], go)
        for i, name in enumerate(self.sync_names):
            self._spawn(
                f"claimer-{name}", self._claimer, name, clients[self.spec.publishers + i], go
            )
        try:
            if self.async_names:
                self._spawn("claimers-async", self._async_main, opened, go)
                if not opened.wait(ready_timeout):
                    raise WorkloadError(
                        f"async clients did not open within {ready_timeout:g}s at {self.urls}"
                    )
                if self.errors:
                    if isinstance(self.errors[0], SubjectError):
                        raise self.errors[0]  # its own one-line reason
                    raise WorkloadError(f"async clients failed to open: {self.errors[0]}")
        except BaseException:  # also Ctrl-C: the workers waiting for go must end
            self.stop_event.set()
            go.set()
            raise
        go.set()

    def _open(self, name: str) -> Any:
        return self.subject.open_sync(self.urls, self.clock(name), self.timeout, **self.options)

    def _spawn(self, name: str, target: Callable, *args: Any) -> None:
        def run() -> None:
            try:
                target(*args)
            except BaseException as e:  # recorded, the runner reports it
                log.exception("workload thread %s died", name)
                self.errors.append(e)

        t = threading.Thread(target=run, name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop every worker after its current call and wait for them (bounded)."""
        self.stop_event.set()
        if self._loop is not None and self._astop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already finished
                self._loop.call_soon_threadsafe(self._astop.set)
        bound = timeout if timeout is not None else 3 * self.timeout + 10
        deadline = time.monotonic() + bound
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            raise WorkloadError(f"workers still running {bound:g}s after stop: {alive}")

    # -- publishers ---------------------------------------------------------------------------
    def _publisher(self, p: int, client: Any, go: threading.Event) -> None:
        rng = random.Random(f"{self.seed}-p{p}")
        spec = self.spec
        groups = [
            (f"g{p}-{k}", spec.priorities[k % len(spec.priorities)])
            for k in range(spec.groups_per_publisher)
        ]
        process = self.ops.new_process()
        go.wait()
        try:
            for n in itertools.count():
                if self.stop_event.is_set():
                    return
                if self.outstanding >= spec.max_outstanding:
                    self.stop_event.wait(spec.idle_pause)
                    continue
                group, priority = rng.choice(groups)
                msg = f"m{p}-{n}"
                value: dict[str, Any] = {"group": group, "msg": msg, "priority": priority}
                doc: dict[str, Any] = {"msg": msg, "group": group}
                poison = spec.poison > 0 and rng.random() < spec.poison
                if poison:  # never acked: not outstanding work
                    value["poison"] = doc["poison"] = True
                event = json.dumps(doc)
                op = self.ops.start(process, "publish", value)
                try:
                    seq = client.publish(group, event, priority)
                except Exception as e:
                    if self.ops.failed(op, "publish", value, e) == "info":
                        self._count(0 if poison else 1)
                        process = self.ops.new_process()
                else:
                    self.ops.finish(op, "publish", value, seq, _published)
                    self._count(0 if poison else 1)
                self.stop_event.wait(rng.uniform(*spec.publish_pause))
        finally:
            client.close()

    def _count(self, delta: int) -> None:
        with self._lock:
            self.outstanding += delta

    # -- claimers: one sans-IO loop of steps, driven by a thread or by a task ---------------
    def _min_priority(self, rng: random.Random) -> int:
        if rng.random() < self.spec.min_priority_probability:
            return rng.choice(self.spec.priorities)
        return 0

    def _idle(self, kind: str) -> float:
        """The pause after a claim that leased nothing (completed as ``kind``)."""
        return self.spec.idle_pause if kind == "ok" else 0.1

    def _claimer_steps(self, name: str) -> Steps:
        """Claim, work, let go, repeat until stopped; a held lease is always let go."""
        rng = random.Random(f"{self.seed}-{name}")
        procs = Processes(self.ops)
        lease: LeaseLike | None = None
        while lease is not None or not self.stop_event.is_set():
            if lease is None:
                lease = yield from self._claim_steps(name, rng, procs)
            else:
                lease = yield from self._lease_steps(name, rng, procs, lease)

    def _claim_steps(self, name: str, rng: random.Random, procs: Processes) -> Steps:
        """One claim; returns its lease (after an idle pause when there is none)."""
        vis, mp = self.spec.visibility, self._min_priority(rng)
        value = {"visibility": vis, "min_priority": mp}
        record = Single.claim(self.ops, procs.main, value)
        kind, lease = yield Call(record, "claim", (name, vis, mp))
        procs.after(kind)
        if lease is None:
            yield Wait(self._idle(kind))
        return lease

    def _lease_steps(
        self, name: str, rng: random.Random, procs: Processes, lease: LeaseLike
    ) -> Steps:
        """Work on ``lease`` as planned and let it go; returns the next lease, if any."""
        plan = plan_lease(rng, self.spec, self.stall_probability)
        lv = lease_value(lease)
        if plan.extend:
            yield Wait(plan.work / 2)
            if not self.stop_event.is_set():
                vis = self.spec.visibility
                record = Single(self.ops, procs.main, "extend", {**lv, "visibility": vis})
                kind, _ = yield Call(record, "extend", (lease, vis))
                procs.after(kind)
            yield Wait(plan.work / 2)
        else:
            yield Wait(plan.work)
        poison = deadletters.is_poison(lease.event)
        stopping = self.stop_event.is_set()
        how = "nack" if poison else release_action(plan, stopping, rng, self.spec.ack_and_claim)
        if how == "ack_and_claim":
            return (yield from self._ack_and_claim_steps(name, rng, procs, lease))
        if how == "nack":
            nv, args = {**lv, "delay": plan.delay}, (lease, plan.delay)
            if poison:
                nv, args = {**nv, "error": "poison"}, (*args, "poison")
            kind, _ = yield Call(Single(self.ops, procs.main, "nack", nv), "nack", args)
        else:
            kind, _ = yield Call(Single(self.ops, procs.main, "ack", lv), "ack", (lease,))
            if kind == "ok":
                self._count(-1)
        procs.after(kind)
        return None

    def _ack_and_claim_steps(
        self, name: str, rng: random.Random, procs: Processes, lease: LeaseLike
    ) -> Steps:
        """Ack ``lease`` and claim the next in one call; returns that lease (or None)."""
        vis, mp = self.spec.visibility, self._min_priority(rng)
        value = {"visibility": vis, "min_priority": mp}
        record = Fused(self.ops, procs.main, procs.spare, lease, value)
        (ack, claim), nxt = yield Call(record, "ack_and_claim", (lease, name, vis, mp))
        if ack == "ok":
            self._count(-1)
        procs.after_fused(ack, claim, nxt is not None)
        if nxt is None:
            yield Wait(self._idle(claim))
        return nxt

    @staticmethod
    def _run(record: Single | Fused, fn: Callable, *args: Any) -> Any:
        """Call ``fn(*args)`` and complete ``record`` from its result or exception."""
        try:
            result = fn(*args)
        except Exception as e:
            return record.done(None, e)
        return record.done(result, None)

    @staticmethod
    async def _arun(record: Single | Fused, fn: Callable, *args: Any) -> Any:
        """:meth:`_run` for a coroutine function."""
        try:
            result = await fn(*args)
        except Exception as e:
            return record.done(None, e)
        return record.done(result, None)

    def _drive(self, steps: Steps, client: Any) -> None:
        """Run a claimer's steps on this thread with a sync client."""
        reply: Any = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration:
                return
            if isinstance(step, Wait):
                self.stop_event.wait(step.seconds)
                reply = None
            else:
                reply = self._run(step.record, getattr(client, step.method), *step.args)

    async def _adrive(self, steps: Steps, client: Any) -> None:
        """Run a claimer's steps as a task with an async client."""
        reply: Any = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration:
                return
            if isinstance(step, Wait):
                await self._wait(step.seconds)
                reply = None
            else:
                reply = await self._arun(step.record, getattr(client, step.method), *step.args)

    def _claimer(self, name: str, client: Any, go: threading.Event) -> None:
        go.wait()
        try:
            self._drive(self._claimer_steps(name), client)
        finally:
            client.close()

    def _call(self, process: int, f: str, value: Any, fn: Callable, ok_value=_same):
        """Invoke, run ``fn``, complete; returns ``(type, result, process to use next)``."""
        kind, result = self._run(Single(self.ops, process, f, value, ok_value), fn)
        return kind, result, (self.ops.new_process() if kind == "info" else process)

    # -- async claimers ----------------------------------------------------------------------
    def _async_main(self, opened: threading.Event, go: threading.Event) -> None:
        asyncio.run(self._async_claimers(opened, go))

    async def _async_claimers(self, opened: threading.Event, go: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._astop = asyncio.Event()
        clients = []
        try:
            if self.spec.shared_transport:
                one = await self.subject.open_async(
                    self.urls, self.clock("async-claimers"), self.timeout, **self.options
                )
                clients = [one] * len(self.async_names)
            else:
                for name in self.async_names:
                    clients.append(
                        await self.subject.open_async(
                            self.urls, self.clock(name), self.timeout, **self.options
                        )
                    )
        except Exception as e:
            self.errors.append(e)
            opened.set()
            for c in {id(c): c for c in clients}.values():
                await c.close()
            return
        opened.set()
        await asyncio.to_thread(go.wait)
        try:
            await asyncio.gather(
                *(self._async_claimer(n, c) for n, c in zip(self.async_names, clients, strict=True))
            )
        finally:
            for c in {id(c): c for c in clients}.values():
                await c.close()

    async def _wait(self, seconds: float) -> None:
        """Sleep ``seconds`` or until the workload stops, whichever is first."""
        assert self._astop is not None
        if seconds <= 0 or self._astop.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._astop.wait(), timeout=seconds)

    async def _async_claimer(self, name: str, client: Any) -> None:
        await self._adrive(self._claimer_steps(name), client)

    # -- drain --------------------------------------------------------------------------------
    def drain(self, timeout: float | None = None, workers: int = 3) -> DrainResult:
        """Claim and ack until no message is left (or ``timeout`` passes)."""
        bound = timeout if timeout is not None else self.spec.drain_timeout
        deadline = time.monotonic() + bound
        started = time.monotonic()
        done = threading.Event()
        acked = collections.Counter()
        errors: list[BaseException] = []
        pending = self.subject.pending or pending_messages

        def drainer(i: int) -> None:
            name = f"d{i}"
            try:
                client = self._open(name)
            except BaseException as e:  # reported below, like a failure while draining
                errors.append(e)
                return
            process = self.ops.new_process()
            try:
                while not done.is_set() and time.monotonic() < deadline:
                    vis = self.spec.visibility
                    kind, lease, process = self._call(
                        process,
                        "claim",
                        {"visibility": vis, "min_priority": 0},
                        lambda vis=vis: client.claim(name, vis, 0),
                        _claimed(vis),
                    )
                    if lease is not None and deadletters.is_poison(lease.event):
                        _, _, process = self._call(
                            process,
                            "nack",
                            {**lease_value(lease), "delay": 0, "error": "poison"},
                            lambda lease=lease: client.nack(lease, 0, "poison"),
                        )
                        continue
                    if lease is not None:
                        k, _, process = self._call(
                            process,
                            "ack",
                            lease_value(lease),
                            lambda lease=lease: client.ack(lease),
                        )
                        acked[k] += 1
                        continue
                    if kind == "ok" and pending(self.urls, self.timeout) == 0:
                        done.set()
                        return
                    done.wait(self.spec.idle_pause * 2)
            except BaseException as e:
                errors.append(e)
            finally:
                client.close()

        threads = [threading.Thread(target=drainer, args=(i,), daemon=True) for i in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()) + 3 * self.timeout)
        done.set()  # a drainer still in a call stops after it
        if errors:
            raise WorkloadError(f"drain failed: {type(errors[0]).__name__}: {errors[0]}")
        if self.options.get("max_deliveries"):
            deadletters.read_queue(self._open("dead-letters"), self._call, self.ops.new_process())
        left = pending(self.urls, self.timeout)
        return DrainResult(
            complete=left == 0,
            remaining=left,
            acked=acked["ok"],
            seconds=time.monotonic() - started,
        )


@dataclass(frozen=True)
class DrainResult:
    complete: bool
    remaining: int | None  # None: no node answered the count
    acked: int
    seconds: float


def pending_messages(urls: Sequence[str], timeout: float = 5.0) -> int | None:
    """``SELECT COUNT(*) FROM messages`` through the leader (None if no node answers)."""
    import requests

    for url in urls:
        try:
            r = requests.post(
                f"{url.rstrip('/')}/db/query?level=strong",
                json=[["SELECT COUNT(*) FROM messages"]],
                timeout=timeout,
            )
            result = r.json()["results"][0]
            if r.status_code == 200 and "error" not in result:
                return int(result["values"][0][0])
        except (requests.RequestException, ValueError, KeyError, IndexError):
            continue
    return None
