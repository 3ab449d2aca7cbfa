"""Group commit on the real embedded cluster: many threads (or tasks) share ONE transport,
their claims and fenced writes go out merged, and the queue keeps its promises.

The shared cluster (``queue_urls``: empty tables) serves every test but the leader kill,
which breaks a cluster of its own (``make_cluster``). Waits are bounded polls on the
condition under test.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from rqueue import (
    AsyncRqliteTransport,
    Lease,
    OutcomeUnknown,
    RqliteTransport,
    RqueueError,
)
from rqueue._batch import Coalescer
from rqueue._version import ONE_REQUEST_CLAIM

from .polling import query

VIS = 30.0
#: every test's whole workload must end well inside this
BOUND = 40.0


def remaining(urls: list[str]) -> int:
    return query(urls, "SELECT count(*) FROM messages")[0][0]


def coalescer_of(transport: Any) -> Coalescer:
    return transport._merger.coalescer


def run_threads(target: Callable[[int], None], n: int, stop: threading.Event) -> None:
    """Run ``target(k)`` in ``n`` threads at once; re-raise the first failure. Any
    failure sets ``stop`` so the others end too; every thread is joined."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def guarded(k: int) -> None:
        try:
            barrier.wait(10)
            target(k)
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=guarded, args=(k,), daemon=True) for k in range(n)]
    for th in threads:
        th.start()
    deadline = time.monotonic() + BOUND
    for th in threads:
        th.join(max(0.0, deadline - time.monotonic()))
    stop.set()
    for th in threads:
        th.join(10)
    assert not any(th.is_alive() for th in threads), "workers still running past the bound"
    if errors:
        raise errors[0]


class Ledger:
    """What the workers saw, recorded under a lock: who holds which group, the order of
    each group's leases, and every ack that succeeded.

    A group is held from its claim's answer until just before its ack is sent (after
    that the server may free it): a lease of a held group answered in that window would
    be two live leases for one group.
    """

    def __init__(self, seqs: list[int], groups: int) -> None:
        self.lock = threading.Lock()
        self.index = {seq: i for i, seq in enumerate(seqs)}  # seq -> the item's i
        self.groups = groups
        self.held: dict[str, str] = {}
        self.order: dict[str, list[int]] = {}
        self.acks: Counter[int] = Counter()
        self.problems: list[str] = []

    def leased(self, lease: Lease, who: str) -> None:
        with self.lock:
            if lease.group_id in self.held:
                self.problems.append(
                    f"{who} leased {lease.seq} of {lease.group_id}, "
                    f"held by {self.held[lease.group_id]}"
                )
            self.held[lease.group_id] = who
            self.order.setdefault(lease.group_id, []).append(lease.seq)
            i = self.index.get(lease.seq)
            if i is None or json.loads(lease.event) != {"i": i}:
                self.problems.append(f"{who} got seq {lease.seq} with event {lease.event}")

    def releasing(self, lease: Lease) -> None:
        with self.lock:
            del self.held[lease.group_id]

    def acked(self, lease: Lease) -> None:
        with self.lock:
            self.acks[lease.seq] += 1

    def done(self) -> bool:
        with self.lock:
            return len(self.acks) == len(self.index)

    def check(self) -> None:
        assert not self.problems, self.problems[:10]
        twice = [seq for seq, n in self.acks.items() if n > 1]
        assert not twice, f"acked more than once: {twice}"
        assert set(self.acks) == set(self.index), "not every message was acked"
        # FIFO: each group's messages leased exactly once each, in seq order
        expected: dict[str, list[int]] = {}
        for seq, i in sorted(self.index.items()):
            expected.setdefault(f"g{i % self.groups}", []).append(seq)
        assert self.order == expected


def items(count: int, groups: int) -> list[tuple[str, dict[str, int]]]:
    return [(f"g{i % groups}", {"i": i}) for i in range(count)]


# -- claim + ack, many workers on one transport ------------------------------------------


def test_threads_sharing_one_transport_ack_everything_once_in_fifo_order(queue_urls) -> None:
    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        ledger = Ledger(t.publish_many(items(400, 20)), 20)
        stop = threading.Event()

        def work(k: int) -> None:
            who = f"w{k}"
            while not stop.is_set() and not ledger.done():
                lease = t.claim(who, VIS)
                if lease is None:
                    continue  # every group in flight: claim again (merged with the acks)
                ledger.leased(lease, who)
                ledger.releasing(lease)
                t.ack(lease)
                ledger.acked(lease)

        run_threads(work, 8, stop)
        ledger.check()
        coalescer = coalescer_of(t)
        assert coalescer.merged_requests > 0
        assert coalescer.in_flight == 0
    assert remaining(queue_urls) == 0


def test_threads_folding_each_ack_into_the_next_claim_keep_every_promise(queue_urls) -> None:
    """``ack_and_claim`` merged with other workers' calls: one transaction per batch, each
    call's claim chained to its own ack by ``changes()``, still exclusive and FIFO."""
    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        ledger = Ledger(t.publish_many(items(400, 20)), 20)
        stop = threading.Event()

        def work(k: int) -> None:
            who = f"w{k}"
            lease: Lease | None = None
            while not stop.is_set() and not ledger.done():
                if lease is None:
                    lease = t.claim(who, VIS)
                    if lease is None:
                        continue
                    ledger.leased(lease, who)
                ledger.releasing(lease)
                nxt = t.ack_and_claim(lease, who, VIS)
                ledger.acked(lease)
                if nxt is not None:
                    ledger.leased(nxt, who)
                lease = nxt

        run_threads(work, 8, stop)
        ledger.check()
        assert coalescer_of(t).merged_requests > 0
    assert remaining(queue_urls) == 0


def test_tasks_sharing_one_transport_ack_everything_once_in_fifo_order(queue_urls) -> None:
    async def main() -> Coalescer:
        t = await AsyncRqliteTransport.from_url(",".join(queue_urls))
        async with t:
            ledger = Ledger(await t.publish_many(items(400, 20)), 20)

            async def work(k: int) -> None:
                who = f"t{k}"
                while not ledger.done():
                    lease = await t.claim(who, VIS)
                    if lease is None:
                        continue
                    ledger.leased(lease, who)
                    ledger.releasing(lease)
                    await t.ack(lease)
                    ledger.acked(lease)

            await asyncio.wait_for(asyncio.gather(*(work(k) for k in range(16))), BOUND)
            ledger.check()
            return coalescer_of(t)

    coalescer = asyncio.run(main())
    assert coalescer.merged_requests > 0
    assert coalescer.in_flight == 0
    assert remaining(queue_urls) == 0


# -- claims alone, then nack and extend, through one transport ----------------------------

GROUPS = 64
CLAIMERS = 8
EACH = 4  # leases per claimer in the first round: 32 of the 64 groups


def check_first_round(urls: list[str], leases: list[Lease | None]) -> list[Lease]:
    """All 32 claims leased, each a different group, and each holds the row it names (so
    every claim got its own slice of the merged answers)."""
    assert all(lease is not None for lease in leases), "a claim found nothing"
    held = [lease for lease in leases if lease is not None]
    assert len({lease.group_id for lease in held}) == len(held) == CLAIMERS * EACH
    rows = dict(query(urls, "SELECT head_seq, locked_by FROM groups WHERE locked_by IS NOT NULL"))
    assert rows == {lease.seq: lease.token for lease in held}
    return held


def check_settled(urls: list[str], nacked: list[Lease], extended: list[Lease]) -> None:
    rows = {seq: (by, expiry) for seq, by, expiry in query(urls, SEQ_LOCK)}
    for lease in nacked:
        assert rows[lease.seq][0] is None, f"nack of {lease.seq} did not free it"
    for lease in extended:
        by, expiry = rows[lease.seq]
        assert by == lease.token
        assert expiry > lease.expires_at + 60, f"extend of {lease.seq} did not apply"


SEQ_LOCK = "SELECT head_seq, locked_by, lock_expiry FROM groups"


def check_second_round(leases: list[Lease], extended: list[Lease]) -> None:
    """The rest: every group but the extended ones, each once (the nacked ones again)."""
    groups = [lease.group_id for lease in leases]
    assert len(set(groups)) == len(groups)
    assert set(groups) == {f"g{i}" for i in range(GROUPS)} - {x.group_id for x in extended}


def test_claims_alone_then_nack_and_extend_through_one_shared_transport(queue_urls) -> None:
    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        t.publish_many([(f"g{i}", {"i": i}) for i in range(GROUPS)])
        first: list[Lease | None] = []
        stop = threading.Event()
        run_threads(
            lambda k: first.extend(t.claim(f"w{k}", VIS) for _ in range(EACH)), CLAIMERS, stop
        )
        held = check_first_round(queue_urls, first)

        # each claimer nacks half of its leases and extends the other half, at once
        nacked, extended = held[0::2], held[1::2]

        def settle(k: int) -> None:
            for lease in nacked[k::CLAIMERS]:
                t.nack(lease)
            for lease in extended[k::CLAIMERS]:
                t.extend(lease, 4 * VIS)

        run_threads(settle, CLAIMERS, threading.Event())
        check_settled(queue_urls, nacked, extended)

        second: list[Lease] = []

        def claim_the_rest(k: int) -> None:
            while (lease := t.claim(f"v{k}", VIS)) is not None:
                second.append(lease)

        run_threads(claim_the_rest, CLAIMERS, threading.Event())
        check_second_round(second, extended)

        everything = second + extended
        run_threads(
            lambda k: [t.ack(lease) for lease in everything[k::CLAIMERS]],
            CLAIMERS,
            threading.Event(),
        )
        assert remaining(queue_urls) == 0
        assert coalescer_of(t).merged_requests > 0
        assert coalescer_of(t).in_flight == 0


def test_async_claims_alone_then_nack_and_extend_through_one_shared_transport(
    queue_urls,
) -> None:
    async def gather(fns: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
        return await asyncio.wait_for(asyncio.gather(*(f() for f in fns)), BOUND)

    async def main() -> Coalescer:
        t = await AsyncRqliteTransport.from_url(",".join(queue_urls))
        async with t:
            await t.publish_many([(f"g{i}", {"i": i}) for i in range(GROUPS)])
            claims = [lambda k=k: t.claim(f"t{k}", VIS) for k in range(CLAIMERS * EACH)]
            held = check_first_round(queue_urls, await gather(claims))

            nacked, extended = held[0::2], held[1::2]
            await gather(
                [lambda x=x: t.nack(x) for x in nacked]
                + [lambda x=x: t.extend(x, 4 * VIS) for x in extended]
            )
            check_settled(queue_urls, nacked, extended)

            second: list[Lease] = []

            async def claim_the_rest(k: int) -> None:
                while (lease := await t.claim(f"v{k}", VIS)) is not None:
                    second.append(lease)

            await gather([lambda k=k: claim_the_rest(k) for k in range(CLAIMERS)])
            check_second_round(second, extended)

            await gather([lambda x=x: t.ack(x) for x in second + extended])
            return coalescer_of(t)

    coalescer = asyncio.run(main())
    assert remaining(queue_urls) == 0
    assert coalescer.merged_requests > 0
    assert coalescer.in_flight == 0


# -- a cancelled task does not strand the others -------------------------------------------


#: claims merge only where a claim is one request (/db/request); older servers get three
MERGED_CLAIMS = "merging claims (one /db/request each)"


async def until(what: str, condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Yield to the loop until ``condition()`` holds; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0)


@pytest.mark.needs_rqlite(ONE_REQUEST_CLAIM, MERGED_CLAIMS)
def test_cancelled_tasks_waiting_in_the_coalescer_do_not_strand_the_others(queue_urls) -> None:
    """Claims queue behind a merged request in flight; some are cancelled while they wait,
    the oldest among them (whose task would otherwise be handed the next batch), and the
    next sender just as its batch is handed to it. Every other claim still returns a
    lease, and the coalescer ends empty and idle."""
    n = 24

    async def main() -> None:
        t = await AsyncRqliteTransport.from_url(",".join(queue_urls))
        async with t:
            await t.publish_many([(f"g{i}", {"i": i}) for i in range(GROUPS)])
            coalescer = coalescer_of(t)
            waiting = coalescer._queue  # the calls waiting for the flight in progress

            tasks = [asyncio.create_task(t.claim(f"t{k}", VIS)) for k in range(n)]
            await until("all but the first claim to wait", lambda: len(waiting) == n - 1)
            assert coalescer.in_flight == 1
            items = list(waiting)  # tasks 1..n-1, in arrival order
            cancelled = {1} | {k for k in range(2, n) if k % 3 == 0}
            for k in cancelled:
                tasks[k].cancel()
            # the first flight ends and hands the oldest call still waiting the next batch
            # (task 2's, once the cancelled ones withdrew): cancel its task right then
            await until("the first flight to end", lambda: any(w.batch for w in items))
            sender = 1 + next(i for i, w in enumerate(items) if w.batch)
            if sender not in cancelled:
                tasks[sender].cancel()
                cancelled.add(sender)

            _, pending = await asyncio.wait(tasks, timeout=20)
            assert not pending, f"{len(pending)} claims stranded"
            leases = []
            for k, task in enumerate(tasks):
                if task.cancelled():
                    assert k in cancelled
                    continue
                # not cancelled (a cancellation can come too late to stop a task):
                # result() raises whatever the claim raised
                leases.append(task.result())
            assert len(leases) >= n - len(cancelled)
            assert all(isinstance(x, Lease) for x in leases)
            assert len({x.group_id for x in leases}) == len(leases)
            assert coalescer.in_flight == 0 and not waiting

            # and the transport still merges: a new wave of claims goes through
            merged = coalescer.merged_requests
            more = await asyncio.wait_for(
                asyncio.gather(*(t.claim(f"u{k}", VIS) for k in range(8))), BOUND
            )
            assert all(isinstance(x, Lease) for x in more)
            assert coalescer.merged_requests > merged
            assert coalescer.in_flight == 0 and not waiting

    asyncio.run(main())


@pytest.mark.needs_rqlite(ONE_REQUEST_CLAIM, MERGED_CLAIMS)
def test_a_task_cancelled_as_it_is_handed_a_batch_ends_cancelled(queue_urls) -> None:
    """The turn passes to a waiting task and it is cancelled before it runs: it must end
    cancelled (``_Merger._abandon``: its batch goes alone), the others still get leases.

    (With ``asyncio.wait_for`` in ``_Merger._wait``, Python 3.11 swallowed exactly this
    cancellation: the task went on to send the batch and its claim returned a lease.)"""
    n = 6

    async def main() -> None:
        t = await AsyncRqliteTransport.from_url(",".join(queue_urls))
        async with t:
            await t.publish_many([(f"g{i}", {"i": i}) for i in range(n)])
            coalescer = coalescer_of(t)
            waiting = coalescer._queue
            tasks = [asyncio.create_task(t.claim(f"t{k}", VIS)) for k in range(n)]
            await until("all but the first claim to wait", lambda: len(waiting) == n - 1)
            next_sender = waiting[0]
            await until("the first flight to end", lambda: next_sender.batch is not None)
            tasks[1].cancel()
            _, pending = await asyncio.wait(tasks, timeout=BOUND)
            assert not pending, f"{len(pending)} claims stranded"
            others = [task.result() for k, task in enumerate(tasks) if k != 1]
            assert all(isinstance(x, Lease) for x in others)
            assert coalescer.in_flight == 0 and not waiting
            assert tasks[1].cancelled(), f"the cancelled claim returned {tasks[1].result()}"

    asyncio.run(main())


# -- the leader killed under merged traffic ------------------------------------------------


def test_leader_killed_while_threads_share_one_transport(make_cluster) -> None:
    """No message is acked twice, and once a new leader is up everything left (leases
    stranded by unknown outcomes lapse after 3 s) is claimed and acked."""
    cluster = make_cluster(nodes=3)
    urls = list(cluster.urls)
    leader = cluster.wait_for_leader(20.0)
    lock = threading.Lock()
    acks: Counter[int] = Counter()
    unknown: set[int] = set()  # acks whose outcome stayed unknown
    errors: list[RqueueError] = []
    killed, stop = threading.Event(), threading.Event()
    after_kill = [0]

    # the leader first: the transport talks to it, so the kill cuts merged requests off
    order = [leader.url] + [u for u in urls if u != leader.url]
    with RqliteTransport.from_url(",".join(order), timeout=20.0, request_timeout=3.0) as t:
        seqs = t.publish_many(items(400, 20))

        def work(k: int) -> None:
            while not stop.is_set():
                try:
                    lease = t.claim(f"w{k}", 3.0)
                except RqueueError as exc:
                    errors.append(exc)
                    continue
                if lease is None:
                    stop.wait(0.02)  # poll: every group in flight or stranded for now
                    continue
                try:
                    t.ack(lease)
                except OutcomeUnknown as exc:
                    unknown.add(lease.seq)
                    errors.append(exc)
                except RqueueError as exc:  # LeaseLost: it lapsed during the failover
                    errors.append(exc)
                else:
                    with lock:
                        acks[lease.seq] += 1
                        after_kill[0] += killed.is_set()

        def kill_then_drain() -> None:
            deadline = time.monotonic() + BOUND
            while sum(acks.values()) < 40:
                assert time.monotonic() < deadline, "no progress before the kill"
                time.sleep(0.01)
            cluster.kill(leader.id)
            killed.set()
            while after_kill[0] < 40 and remaining_or_none(urls) != 0:
                assert time.monotonic() < deadline, f"no progress after the kill: {errors[-3:]}"
                time.sleep(0.05)
            cluster.wait_for_leader(20.0)
            while remaining_or_none(urls) != 0:
                assert time.monotonic() < deadline, (
                    f"{remaining_or_none(urls)} messages never drained: {errors[-3:]}"
                )
                time.sleep(0.1)

        def guarded_control(k: int) -> None:
            if k == 0:
                try:
                    kill_then_drain()
                finally:
                    stop.set()
            else:
                work(k)

        run_threads(guarded_control, 9, stop)
        assert coalescer_of(t).merged_requests > 0

    twice = [seq for seq, n in acks.items() if n > 1]
    assert not twice, f"acked twice: {twice}"
    assert set(seqs) <= set(acks) | unknown, "a message vanished without any ack"
    kinds = Counter(type(e).__name__ for e in errors)
    print(f"{sum(acks.values())} acks, {len(unknown)} unknown; rqueue errors: {dict(kinds)}")


def remaining_or_none(urls: list[str]) -> int | None:
    """Messages left, or None while no node can answer a strong read."""
    try:
        return remaining(urls)
    except AssertionError:
        return None
