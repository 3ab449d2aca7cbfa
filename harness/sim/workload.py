"""The harness's own workload, driven as simulation tasks.

Publishers and claimers are the real workload's loops of steps
(:meth:`harness.workload.Workload._publisher_steps` and ``_claimer_steps``: the same
draws from the same seed, the same history values); here each step's call is a
:class:`~harness.sim.client.SimClient` task instead of a blocking call. Each worker runs
in a :class:`contextvars.Context` of its own, as each real one runs on its own thread
or task (a claim's dead letters are collected per context). The drain claims and acks
until the leader's ``messages`` table is empty, as :mod:`harness.workload.drain` does.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Generator
from typing import Any

from ..history import READ_DEAD_LETTERS
from ..scenario import WorkloadSpec
from ..subjects import Subject
from ..workload import Workload, deadletters
from ..workload.plans import ClientCall, Steps, Wait
from ..workload.record import Single, lease_value
from ..workload.workers import takes_delay
from .client import SimClient
from .loop import Task

#: drainers, as the real drain runs
DRAINERS = 3


def in_context(task: Task, ctx: contextvars.Context) -> Task:
    """``task`` with every one of its steps run inside ``ctx``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            got = ctx.run(task.throw, error) if error is not None else ctx.run(task.send, value)
        except StopIteration as stop:
            return stop.value
        try:
            value, error = (yield got), None
        except BaseException as exc:  # a future's error: into the task
            value, error = None, exc


def perform(step: ClientCall, client: SimClient) -> Generator[Any, Any, Any]:
    """Run one step's call and complete its record (what a real driver does)."""
    try:
        result = yield from getattr(client, step.method)(*step.args, **step.kwargs)
    except Exception as exc:
        return step.record.done(None, exc)
    return step.record.done(result, None)


def run_steps(steps: Steps, client: SimClient) -> Task:
    """Drive a worker's steps: a :class:`Wait` sleeps virtual seconds, a call runs."""
    reply: Any = None
    while True:
        try:
            step = steps.send(reply)
        except StopIteration:
            return
        if isinstance(step, Wait):
            yield step.seconds
            reply = None
        else:
            reply = yield from perform(step, client)


class SimWorkload:
    """The workload of one simulated run: its :class:`Workload` (not started: only its
    steps and its records are used) and a client per worker."""

    def __init__(
        self,
        spec: WorkloadSpec,
        subject: Subject,
        urls: list[str],
        recorder: Any,
        seed: int,
        timeout: float,
        open_client: Callable[[list[str], str], Any],
    ) -> None:
        self.real = Workload(spec, subject, urls, recorder, seed=seed, timeout=timeout)
        self.real.long_pollers.clear()  # long polling is not simulated: they claim plainly
        self.spec = spec
        self.open_client = open_client
        self.urls = urls

    @property
    def ops(self) -> Any:
        return self.real.ops

    def workers(self) -> list[tuple[Steps, SimClient]]:
        """Every worker's steps and client: publishers first, then claimers, as the real
        ones start."""
        wl, out = self.real, []
        for p in range(self.spec.publishers):
            client = self.open_client(wl.urls_for(f"p{p}"), f"p{p}")
            delays = self.spec.delay > 0 and takes_delay(client)
            out.append((wl._publisher_steps(p, delays), client))
        shared: dict[str, Any] = {}  # workload.shared_transport: one per kind of claimer
        for name in wl.claimer_names:
            kind = "sync-claimers" if name in wl.sync_names else "async-claimers"
            if not self.spec.shared_transport:
                client = self.open_client(wl.urls_for(name), name)
            elif kind not in shared:
                client = shared[kind] = self.open_client(wl.urls_for(kind), kind)
            else:
                client = shared[kind]
            wl._can_batch(name, client)
            out.append((wl._claimer_steps(name), client))
        return out

    @staticmethod
    def task(steps: Steps, client: SimClient) -> Task:
        """A worker's steps as a task, in a context of its own."""
        return in_context(run_steps(steps, client), contextvars.Context())

    @staticmethod
    def _opened(client: SimClient, task: Task) -> Task:
        """``task`` once ``client`` opened (its ``open``: schema, queue registry)."""
        yield from client.open()
        return (yield from task)

    def stop(self) -> None:
        self.real.stop_event.set()

    # -- the drain -------------------------------------------------------------------------
    def drainer(self, i: int, empty: Callable[[], bool], stop: Callable[[], bool]) -> Task:
        """One drain worker (as :func:`harness.workload.drain.drain`'s): claim, ack (or
        nack a poison message), until the queue is empty or ``stop()``."""
        client = self.open_client(self.urls, f"d{i}")
        return in_context(
            self._opened(client, self._drain_steps(i, client, empty, stop)), contextvars.Context()
        )

    def read_dead_letters(self) -> Task:
        """Record the whole dead-letter queue once (``read-dead-letters``), as the real
        drain ends when the queue dead-letters (:func:`harness.workload.deadletters.read_queue`)."""
        client = self.open_client(self.urls, "dead-letters")

        def read_all() -> Task:
            found: list[Any] = []
            while True:
                after = found[-1].seq if found else 0
                page = yield from client.dead_letters(after=after, limit=1000)
                found.extend(page)
                if len(page) < 1000:
                    return found

        def ok_value(_value: Any, found: list[Any]) -> dict[str, Any]:
            return {"messages": [deadletters.describe(d) for d in found]}

        record = Single(self.ops, self.ops.new_process(), READ_DEAD_LETTERS, {}, ok_value)
        try:
            found = yield from self._opened(client, read_all())
        except Exception as exc:
            record.done(None, exc)
        else:
            record.done(found, None)

    def _drain_steps(
        self, i: int, client: SimClient, empty: Callable[[], bool], stop: Callable[[], bool]
    ) -> Task:
        ops, spec, name = self.ops, self.spec, f"d{i}"
        process = ops.new_process()
        while not stop():
            vis = spec.visibility
            record = Single.claim(ops, process, {"visibility": vis, "min_priority": 0})
            step = ClientCall(record, "claim", (name, vis, 0))
            kind, lease = yield from perform(step, client)
            process = ops.new_process() if kind == "info" else process
            if lease is not None:
                poison = deadletters.is_poison(lease.event)
                value = lease_value(lease)
                if poison:
                    value = {**value, "delay": 0, "error": "poison"}
                f = "nack" if poison else "ack"
                args = (lease, 0, "poison") if poison else (lease,)
                kind, _ = yield from perform(
                    ClientCall(Single(ops, process, f, value), f, args), client
                )
                process = ops.new_process() if kind == "info" else process
                continue
            if kind == "ok" and empty():
                return
            yield spec.idle_pause * 2
