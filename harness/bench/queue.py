"""Queue operations as benchmark steps, for any subject (rqueue or seed-reference).

Each ``*_worker`` function opens one client of a subject and returns ``(step, close)``
for :func:`harness.bench.load.run_threads` (the ``*_task`` twins do the same for
:func:`harness.bench.load.run_tasks`). :func:`fill` prepares a backlog quickly and
:func:`claim_latencies` samples one claimer's claim latency at a fixed backlog.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..subjects import Subject
from .store import Http, bulk_messages

#: leases are held far longer than any measurement, so none lapses mid-run
VISIBILITY = 600.0
#: one HTTP request's bound for the clients the benchmark opens
REQUEST_TIMEOUT = 20.0
EVENT = json.dumps({"kind": "bench", "pad": "x" * 32})


def open_client(subject: Subject, urls: Sequence[str]) -> Any:
    return subject.open_sync(list(urls), time.time, REQUEST_TIMEOUT)


async def open_async_client(subject: Subject, urls: Sequence[str]) -> Any:
    return await subject.open_async(list(urls), time.time, REQUEST_TIMEOUT)


def _nothing() -> None:
    pass


async def _nothing_async() -> None:
    pass


# -- steps (sync) ---------------------------------------------------------------------------
# Each worker opens its own client, or uses ``shared`` (one client for every worker: the
# caller opens and closes it).
def claim_worker(
    subject: Subject, urls: Sequence[str], i: int, shared: Any = None
) -> tuple[Callable, Callable]:
    """Claims alone: every claim leases a group's head and keeps it."""
    client = shared or open_client(subject, urls)
    name = f"bench-claimer-{i}"

    def step() -> bool:
        return client.claim(name, VISIBILITY) is not None

    return step, _nothing if shared else client.close


def cycle_worker(
    subject: Subject, urls: Sequence[str], i: int, shared: Any = None
) -> tuple[Callable, Callable]:
    """Claim+ack cycles: claim the next message, then ack it."""
    client = shared or open_client(subject, urls)
    name = f"bench-cycler-{i}"

    def step() -> bool:
        lease = client.claim(name, VISIBILITY)
        if lease is None:
            return False
        client.ack(lease)
        return True

    return step, _nothing if shared else client.close


def folded_cycle_worker(
    subject: Subject, urls: Sequence[str], i: int, shared: Any = None
) -> tuple[Callable, Callable]:
    """Claim+ack cycles with each ack folded into the next claim (``ack_and_claim``): one
    step acks the lease held and takes the next, so it is one cycle in one request. A
    claim is made alone only when nothing is held (the first step, or after a fold found
    nothing to claim)."""
    client = shared or open_client(subject, urls)
    if not hasattr(client, "ack_and_claim"):
        if not shared:
            client.close()
        raise ValueError(f"subject {subject.name!r} has no ack_and_claim")
    name = f"bench-folder-{i}"
    held: list[Any] = [None]

    def step() -> bool:
        lease = held[0] or client.claim(name, VISIBILITY)
        if lease is None:
            return False
        held[0] = client.ack_and_claim(lease, name, VISIBILITY)
        return True

    return step, _nothing if shared else client.close


def publish_worker(subject: Subject, urls: Sequence[str], i: int) -> tuple[Callable, Callable]:
    """One ``publish`` per step, over 16 groups per worker."""
    client = open_client(subject, urls)
    n = iter(range(1 << 62))

    def step() -> bool:
        client.publish(f"bench-pub-{i}-{next(n) % 16}", EVENT)
        return True

    return step, client.close


def publish_many_worker(
    subject: Subject, urls: Sequence[str], i: int, batch: int
) -> tuple[Callable, Callable]:
    """One ``publish_many`` of ``batch`` messages per step (rqueue only)."""
    client = open_client(subject, urls)
    if not hasattr(client, "publish_many"):
        client.close()
        raise ValueError(f"subject {subject.name!r} has no publish_many")
    items = [(f"bench-pub-{i}-{k % 16}", EVENT) for k in range(batch)]

    def step() -> bool:
        client.publish_many(items)
        return True

    return step, client.close


# -- steps (async) --------------------------------------------------------------------------
async def cycle_task(
    subject: Subject, urls: Sequence[str], i: int, shared: Any = None
) -> tuple[Callable, Callable]:
    """The asyncio twin of :func:`cycle_worker`."""
    client = shared or await open_async_client(subject, urls)
    name = f"bench-task-{i}"

    async def step() -> bool:
        lease = await client.claim(name, VISIBILITY)
        if lease is None:
            return False
        await client.ack(lease)
        return True

    return step, _nothing_async if shared else client.close


# -- backlog --------------------------------------------------------------------------------
def fill(
    subject: Subject,
    urls: Sequence[str],
    http: Http,
    *,
    prefix: str,
    groups: int,
    messages: int,
    bulk_batch: int = 100_000,
    publish_batch: int = 500,
) -> None:
    """Queue ``messages`` messages over ``groups`` groups named ``{prefix}0...``.

    Each group's first message goes through the subject's own publish statements (so
    its group row is exactly what the subject would write); the rest are bulk INSERTs.
    """
    if not 1 <= groups <= messages:
        raise ValueError(f"fill: need 1 <= groups <= messages, got {groups}, {messages}")
    client = open_client(subject, urls)
    try:
        firsts = [(f"{prefix}{g}", EVENT) for g in range(groups)]
        if hasattr(client, "publish_many"):
            for k in range(0, groups, publish_batch):
                client.publish_many(firsts[k : k + publish_batch])
        else:
            _publish_firsts_seed(http, firsts, publish_batch)
    finally:
        client.close()
    bulk_messages(http, prefix, groups, groups, messages - groups, bulk_batch)


def _publish_firsts_seed(http: Http, firsts: list[tuple[str, str]], batch: int) -> None:
    from ..subjects.seed_reference import publish_statements

    for k in range(0, len(firsts), batch):
        stmts = [s for g, e in firsts[k : k + batch] for s in publish_statements(g, e, 0)]
        http.execute(stmts)


def claim_latencies(subject: Subject, urls: Sequence[str], samples: int) -> list[float]:
    """Claim latencies (seconds) of one claimer; each lease is given back untimed (nack 0),
    so the backlog stays the same size throughout."""
    if samples < 1:
        raise ValueError(f"claim_latencies: samples must be >= 1, got {samples}")
    client = open_client(subject, urls)
    out: list[float] = []
    try:
        for _ in range(samples):
            t0 = time.perf_counter()
            lease = client.claim("bench-latency", VISIBILITY)
            t1 = time.perf_counter()
            if lease is None:
                raise RuntimeError("claim latency: the queue is empty, nothing to claim")
            out.append(t1 - t0)
            client.nack(lease)
    finally:
        client.close()
    return out
