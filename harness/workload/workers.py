"""The workload's workers: publisher threads, claimer threads and tasks, and the drain.

Publishers (threads) each own a few groups and publish to them one message at a time;
every event carries a run-unique ``msg`` id. Claimers claim, "work" for a random time
and then ack, or nack (at once or with a delay), or stall past their visibility, or
extend their lease midway; with ``workload.ack_and_claim`` an ack is sometimes
``ack_and_claim``, whose lease is worked on next. With ``workload.batch`` some claimers
take batches (``claim_many``) and settle them one lease at a time or with ``ack_many``;
with ``workload.delay`` some publishes are delayed. Some claimers are threads with the
subject's sync client, the others are tasks on one asyncio loop with its async client;
both run the same claimer loop of steps (:mod:`harness.workload.plans`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import itertools
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..scenario import WorkloadSpec
from ..subjects import LeaseLike, Subject, SubjectError
from . import deadletters, text
from .drain import DrainResult, drain, pending_messages
from .plans import ClientCall, Steps, Wait, plan_lease, release_action
from .processes import WorkerPool
from .record import (
    Fused,
    Ops,
    Processes,
    Single,
    WorkloadError,
    aperform,
    lease_value,
    outcome_kind,
    perform,
    published,
)

log = logging.getLogger(__name__)

#: share of a batch's leases to be acked that a batch claimer acks on their own (the
#: rest go into one ``ack_many``)
SINGLE_ACK_IN_BATCH = 0.2


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
        reply_proxies: Any = None,
        leader_url: str | None = None,
    ) -> None:
        self.spec, self.subject, self.urls = spec, subject, list(urls)
        #: the harness's proxies in front of the nodes (:mod:`harness.cluster.reply_proxy`),
        #: when ``urls`` are theirs: each client then starts at a follower of its own
        #: (:meth:`urls_for`), the leader last, so that writes are forwarded
        self.reply_proxies = reply_proxies
        #: the URL (of the urls) of the node that led when the workload was made
        self.leader_url = leader_url
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
        #: the claimers that long-poll (``workload.long_poll``), drawn per claimer
        self.long_pollers = {
            n
            for n in self.claimer_names
            if spec.long_poll > 0
            and random.Random(f"{seed}-{n}-long-poll").random() < spec.long_poll
        }
        #: the claimers that take batches (``workload.batch``), drawn per claimer (at
        #: least one when the share is above 0); they do not long-poll
        self.batchers = drawn(self.claimer_names, spec.batch, f"{seed}-{{}}-batch")
        self.long_pollers -= self.batchers
        #: the groups whose ids are adversarial text (``workload.adversarial_text``),
        #: drawn per group, at least one when the share is above 0
        groups = [
            f"g{p}-{k}" for p in range(spec.publishers) for k in range(spec.groups_per_publisher)
        ]
        self.adversarial_groups = drawn(groups, spec.adversarial_text, f"{seed}-{{}}-text")
        #: the ``python -m rqueue worker`` processes (``workload.worker_processes``)
        self.pool: WorkerPool | None = None
        #: worker processes disrupted by the pool, per signal (SIGKILL, SIGTERM), kept
        #: when the pool stops
        self.worker_disruptions: dict[str, int] = {}

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
            if self.spec.worker_processes:
                pool = WorkerPool(
                    self.spec,
                    self.urls,
                    self.ops,
                    seed=self.seed,
                    timeout=self.timeout,
                    on_acked=lambda: self._count(-1),
                )
                pool.start(self.spec.worker_processes)  # stops what it started if it fails
                self.pool = pool
        except BaseException:  # also Ctrl-C: the workers waiting for go must end
            self.stop_event.set()
            go.set()
            raise
        # the history's time 0: the work starts now, however long opening the clients took
        # (10 s seen on a loaded host), so the fault schedule counts from here too
        rebase = getattr(self.ops.recorder, "rebase", None)
        if rebase is not None:
            rebase()
        go.set()

    def urls_for(self, name: str) -> list[str]:
        """The URLs client ``name`` is opened with: :attr:`urls`, or behind the reply
        proxies the followers' turned to start at the next follower in turn (the
        workload's clients in their order, from one drawn from the seed; any other name:
        drawn), and the leader's last. A client keeps to the node it is on until that
        fails (rqueue's stickiness), so its writes are forwarded, as the forward-path
        faults need; the leader stays in its list, so a client can always go on."""
        if self.reply_proxies is None:
            return self.urls
        followers = [u for u in self.urls if u != self.leader_url] or self.urls
        last = [self.leader_url] if self.leader_url in self.urls and followers != self.urls else []
        names = [f"p{p}" for p in range(self.spec.publishers)]
        names += [*self.sync_names, *self.async_names, "sync-claimers", "async-claimers"]
        k = random.Random(f"{self.seed}-{name}-first-node").randrange(len(followers))
        if name in names:
            k = names.index(name) + random.Random(f"{self.seed}-first-node").randrange(999)
        k %= len(followers)
        return followers[k:] + followers[:k] + last

    def _open(self, name: str) -> Any:
        return self.subject.open_sync(
            self.urls_for(name), self.clock(name), self.timeout, **self.options
        )

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
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.stop()
            self.worker_disruptions = dict(pool.disruptions)
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            raise WorkloadError(f"workers still running {bound:g}s after stop: {alive}")

    # -- publishers ---------------------------------------------------------------------------
    def _publisher(self, p: int, client: Any, go: threading.Event) -> None:
        delays = self.spec.delay > 0 and takes_delay(client)
        if self.spec.delay > 0 and not delays:
            log.warning("publisher p%d: the subject's publish takes no delay: not delaying", p)
        go.wait()
        try:
            self._drive(self._publisher_steps(p, delays), client)
        finally:
            client.close()

    def _publisher_steps(self, p: int, delays: bool) -> Steps:
        """Publish to ``p``'s groups one message at a time until stopped (``delays``: the
        client's publish takes a delay); a publisher process that got ``info`` retires."""
        rng = random.Random(f"{self.seed}-p{p}")
        spec = self.spec
        groups = [
            (self._group_id(p, k), spec.priorities[k % len(spec.priorities)])
            for k in range(spec.groups_per_publisher)
        ]
        process = self.ops.new_process()
        for n in itertools.count():
            if self.stop_event.is_set():
                return
            if self.outstanding >= spec.max_outstanding:
                yield Wait(spec.idle_pause)
                continue
            group, priority = rng.choice(groups)
            msg = f"m{p}-{n}"
            value: dict[str, Any] = {"group": group, "msg": msg, "priority": priority}
            doc: dict[str, Any] = {"msg": msg, "group": group}
            poison = spec.poison > 0 and rng.random() < spec.poison
            if poison:  # never acked: not outstanding work
                value["poison"] = doc["poison"] = True
            if spec.adversarial_text and rng.random() < spec.adversarial_text:
                doc["text"] = text.body_text(rng)
            event = json.dumps(doc, ensure_ascii=False)
            value["digest"] = text.digest(event)
            kwargs: dict[str, Any] = {}
            if delays and rng.random() < spec.delay:
                kwargs["delay"] = value["delay"] = round(rng.uniform(*spec.delay_range), 3)
            record = Single(self.ops, process, "publish", value, published)
            kind, _ = yield ClientCall(record, "publish", (group, event, priority), kwargs)
            if kind != "fail":
                self._count(0 if poison else 1)
            if kind == "info":
                process = self.ops.new_process()
            yield Wait(rng.uniform(*spec.publish_pause))

    def _group_id(self, p: int, k: int) -> str:
        """Publisher ``p``'s group ``k``: adversarial text when drawn (see
        ``adversarial_groups``), else ``g{p}-{k}``."""
        if f"g{p}-{k}" in self.adversarial_groups:
            return text.group_id(p, k, self.spec.groups_per_publisher)
        return f"g{p}-{k}"

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
            if name in self.batchers:
                yield from self._batch_steps(name, rng, procs)
            elif lease is None:
                lease = yield from self._claim_steps(name, rng, procs)
            else:
                lease = yield from self._lease_steps(name, rng, procs, lease)

    def _claim_steps(self, name: str, rng: random.Random, procs: Processes) -> Steps:
        """One claim; returns its lease (after an idle pause when there is none; a long
        poll waited in the claim itself)."""
        vis, mp = self.spec.visibility, self._min_priority(rng)
        value: dict[str, Any] = {"visibility": vis, "min_priority": mp}
        kwargs: dict[str, Any] = {}
        if name in self.long_pollers:
            kwargs["wait"] = value["wait"] = self.spec.long_poll_wait
        record = Single.claim(self.ops, procs.main, value)
        kind, lease = yield ClientCall(record, "claim", (name, vis, mp), kwargs)
        procs.after(kind)
        if lease is None and not (kwargs and kind == "ok"):
            yield Wait(self._idle(kind))
        return lease

    def _lease_steps(
        self, name: str, rng: random.Random, procs: Processes, lease: LeaseLike
    ) -> Steps:
        """Work on ``lease`` as planned and let it go; returns the next lease, if any.

        An extend of unknown outcome retires the holder's process, and a new process is
        not the lease's holder in the history (its ack would not end the lease there, and
        a later lease of the group would read as a duplicate): the lease is left to lapse,
        as a batch claimer leaves its leases (found by the simulation, docs/simulation.md).
        """
        plan = plan_lease(rng, self.spec, self.stall_probability)
        if plan.extend:
            yield Wait(plan.work / 2)
            if not self.stop_event.is_set():
                holder = procs.main
                yield from self._extend_steps(procs, holder, lease)
                if procs.main != holder:
                    return None
            yield Wait(plan.work / 2)
        else:
            yield Wait(plan.work)
        poison = deadletters.is_poison(lease.event)
        stopping = self.stop_event.is_set()
        how = "nack" if poison else release_action(plan, stopping, rng, self.spec.ack_and_claim)
        if how == "ack_and_claim":
            return (yield from self._ack_and_claim_steps(name, rng, procs, lease))
        yield from self._let_go_steps(procs, lease, how, plan.delay)
        return None

    def _extend_steps(self, procs: Processes, holder: int, lease: LeaseLike) -> Steps:
        """``extend`` one lease by the visibility, recorded as ``holder``'s operation."""
        vis = self.spec.visibility
        record = Single(self.ops, holder, "extend", {**lease_value(lease), "visibility": vis})
        kind, _ = yield ClientCall(record, "extend", (lease, vis))
        procs.after(kind)

    def _let_go_steps(self, procs: Processes, lease: LeaseLike, how: str, delay: float) -> Steps:
        """``nack`` (a poison message's with an error) or ``ack`` one lease."""
        lv = lease_value(lease)
        if how == "nack":
            nv, args = {**lv, "delay": delay}, (lease, delay)
            if deadletters.is_poison(lease.event):
                nv, args = {**nv, "error": "poison"}, (*args, "poison")
            kind, _ = yield ClientCall(Single(self.ops, procs.main, "nack", nv), "nack", args)
        else:
            kind, _ = yield ClientCall(Single(self.ops, procs.main, "ack", lv), "ack", (lease,))
            if kind == "ok":
                self._count(-1)
        procs.after(kind)

    def _batch_steps(self, name: str, rng: random.Random, procs: Processes) -> Steps:
        """One batch: ``claim_many``, work (extending the leases midway), then let each
        lease go: a planned ``nack`` and some acks one by one, the other acks in one
        ``ack_many``. Once a call's outcome is unknown its process is retired, and the
        leases it still held are left to lapse (a new process is not their holder)."""
        spec = self.spec
        vis, mp, most = spec.visibility, self._min_priority(rng), spec.batch_size
        value = {"visibility": vis, "min_priority": mp, "max_messages": most}
        record = Single.claim_many(self.ops, procs.main, value)
        kwargs = {"max_messages": most, "min_priority": mp}
        kind, leases = yield ClientCall(record, "claim_many", (name, vis), kwargs)
        procs.after(kind)
        if not leases:
            yield Wait(self._idle(kind))
            return
        holder = procs.main
        plans = [plan_lease(rng, spec, self.stall_probability) for _ in leases]
        work = max(plan.work for plan in plans)
        # a long batch (one lease's plan extends) extends every lease, so none lapses
        extended = leases if any(plan.extend for plan in plans) else []
        yield Wait(work / 2 if extended else work)
        for lease in extended:
            if self.stop_event.is_set():
                break
            yield from self._extend_steps(procs, holder, lease)
            if procs.main != holder:
                return
        if extended:
            yield Wait(work / 2)
        stopping = self.stop_event.is_set()
        together = []
        for lease, plan in zip(leases, plans, strict=True):
            poison = deadletters.is_poison(lease.event)
            how = "nack" if poison else release_action(plan, stopping, rng, 0.0)
            if how == "ack" and rng.random() >= SINGLE_ACK_IN_BATCH:
                together.append(lease)
                continue
            yield from self._let_go_steps(procs, lease, how, plan.delay)
            if procs.main != holder:
                return
        if not together:
            return
        record = Single.ack_many(self.ops, holder, together)
        kind, outcomes = yield ClientCall(record, "ack_many", (together,))
        if kind == "ok":
            kinds = [outcome_kind(o) for o in outcomes]
            self._count(-kinds.count("ok"))
            kind = "info" if "info" in kinds else "ok"
        procs.after(kind)

    def _ack_and_claim_steps(
        self, name: str, rng: random.Random, procs: Processes, lease: LeaseLike
    ) -> Steps:
        """Ack ``lease`` and claim the next in one call; returns that lease (or None)."""
        vis, mp = self.spec.visibility, self._min_priority(rng)
        value = {"visibility": vis, "min_priority": mp}
        record = Fused(self.ops, procs.main, procs.spare, lease, value)
        (ack, claim), nxt = yield ClientCall(record, "ack_and_claim", (lease, name, vis, mp))
        if ack == "ok":
            self._count(-1)
        procs.after_fused(ack, claim, nxt is not None)
        if nxt is None:
            yield Wait(self._idle(claim))
        return nxt

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
                reply = perform(step.record, _method(client, step), *step.args)

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
                reply = await aperform(step.record, _method(client, step), *step.args)

    def _can_long_poll(self, name: str, client: Any) -> None:
        """A long poller whose client's ``claim`` takes no ``wait`` claims as the others do."""
        if name in self.long_pollers and not takes_wait(client):
            log.warning("claimer %s: the subject's claim takes no wait: not long-polling", name)
            self.long_pollers.discard(name)

    def _can_batch(self, name: str, client: Any) -> None:
        """A batch claimer whose client lacks ``claim_many`` or ``ack_many`` claims one
        message at a time."""
        if name in self.batchers and not takes_batches(client):
            log.warning("claimer %s: the subject has no claim_many/ack_many: not batching", name)
            self.batchers.discard(name)

    def _claimer(self, name: str, client: Any, go: threading.Event) -> None:
        self._can_long_poll(name, client)
        self._can_batch(name, client)
        go.wait()
        try:
            self._drive(self._claimer_steps(name), client)
        finally:
            client.close()

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
                    self.urls_for("async-claimers"),
                    self.clock("async-claimers"),
                    self.timeout,
                    **self.options,
                )
                clients = [one] * len(self.async_names)
            else:
                for name in self.async_names:
                    clients.append(
                        await self.subject.open_async(
                            self.urls_for(name), self.clock(name), self.timeout, **self.options
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
        self._can_long_poll(name, client)
        self._can_batch(name, client)
        await self._adrive(self._claimer_steps(name), client)

    def drain(self, timeout: float | None = None, workers: int = 3) -> DrainResult:
        """Claim and ack until no message is left (or ``timeout`` passes): see
        :func:`harness.workload.drain.drain`."""
        return drain(
            self.ops,
            self._open,
            self.spec,
            self.urls,
            timeout=self.timeout,
            pending=self.subject.pending or pending_messages,
            dead_letters=bool(self.options.get("max_deliveries")),
            bound=timeout if timeout is not None else self.spec.drain_timeout,
            workers=workers,
        )


def _method(client: Any, step: ClientCall) -> Callable[..., Any]:
    """The client's method for ``step``, with its keyword arguments bound."""
    method = getattr(client, step.method)
    return functools.partial(method, **step.kwargs) if step.kwargs else method


def drawn(names: Sequence[str], share: float, seed: str) -> set[str]:
    """The names whose draw (``random.Random(seed.format(name))``) falls below ``share``;
    the one with the lowest draw when none does and ``share`` is above 0."""
    if share <= 0 or not names:
        return set()
    draws = {n: random.Random(seed.format(n)).random() for n in names}
    return {n for n, x in draws.items() if x < share} or {min(draws, key=draws.__getitem__)}


def takes_keyword(method: Any, name: str) -> bool:
    """Whether ``method`` (a client's bound method, or None) takes the keyword ``name``."""
    try:
        return name in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def takes_delay(client: Any) -> bool:
    """Whether ``client.publish`` delays messages (takes ``delay``)."""
    return takes_keyword(getattr(client, "publish", None), "delay")


def takes_batches(client: Any) -> bool:
    """Whether the client claims and acks in batches (``claim_many`` and ``ack_many``)."""
    return callable(getattr(client, "claim_many", None)) and callable(
        getattr(client, "ack_many", None)
    )


def takes_wait(client: Any) -> bool:
    """Whether ``client.claim`` long-polls (takes ``wait``)."""
    return takes_keyword(getattr(client, "claim", None), "wait")
