"""Long polling on the real embedded cluster: ``claim(..., wait=)`` in both twins.

Requests are counted by the servers (every node's ``/debug/vars`` HTTP counters), not
by the client, so a claim that went out unmerged or a poll nobody meant is seen.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import requests

from rqueue import AsyncRqliteTransport, RqliteTransport
from rqueue._poll import MAX_BACKOFF

from .conftest import Connect

VIS = 30.0


def served(urls: list[str]) -> int:
    """The data requests (execute, query, request) all nodes have served so far."""
    total = 0
    for url in urls:
        http = requests.get(f"{url}/debug/vars", timeout=5).json()["http"]
        total += http["executions"] + http["queries"] + http["requests"]
    return total


def test_a_wait_on_an_empty_queue_returns_none_when_it_runs_out(
    connect: Connect, queue_urls: list[str]
) -> None:
    t = connect(",".join(queue_urls))
    started = time.monotonic()
    assert t.claim("w", VIS, wait=1.0) is None
    took = time.monotonic() - started
    assert 1.0 <= took < 3.0


def test_a_message_published_elsewhere_reaches_a_waiting_claim(
    connect: Connect, queue_urls: list[str]
) -> None:
    t = connect(",".join(queue_urls))
    other = RqliteTransport.from_url(",".join(queue_urls))
    got: list[Any] = []

    def publish_later() -> None:
        time.sleep(1.0)  # let the waiter's backoff reach its ceiling first
        got.append(time.monotonic())
        other.publish("g", '"late"')

    threading.Thread(target=publish_later, daemon=True).start()
    lease = t.claim("w", VIS, wait=20.0)
    arrived = time.monotonic()
    other.close()
    assert lease is not None and lease.event == '"late"'
    # found by the next cold poll: within the backoff ceiling (plus requests under load)
    assert arrived - got[0] < MAX_BACKOFF + 2.0


def test_a_claim_with_wait_takes_what_is_there_at_once(
    connect: Connect, queue_urls: list[str]
) -> None:
    t = connect(",".join(queue_urls))
    t.publish("g", '"now"')
    lease = t.claim("w", VIS, wait=30.0)
    assert lease is not None and lease.event == '"now"'
    t.ack(lease)


def test_wait_is_checked(connect: Connect, queue_urls: list[str]) -> None:
    t = connect(",".join(queue_urls))
    with pytest.raises(ValueError, match="wait"):
        t.claim("w", VIS, wait=-1)


def test_64_waiting_threads_cost_at_most_two_requests_a_second(queue_urls: list[str]) -> None:
    t = RqliteTransport.from_url(",".join(queue_urls))
    stop = threading.Event()
    results: list[Any] = []

    def waiter() -> None:
        while not stop.is_set():
            results.append(t.claim("w", VIS, wait=1.0))

    threads = [threading.Thread(target=waiter, daemon=True) for _ in range(64)]
    try:
        for th in threads:
            th.start()
        time.sleep(1.0)  # the ramp: 0.05 .. 0.4 s between the first polls
        before = served(queue_urls)
        window = 4.0
        time.sleep(window)  # the measured window: what the servers count in it
        after = served(queue_urls)
        # the counters' own reads are GETs of /debug/vars, not data requests
        assert after - before <= 2 * window  # the target: at most 2 requests/s
        t.publish("g", '"wake"')
        deadline = time.monotonic() + 10
        while not any(r is not None for r in results) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert any(r is not None for r in results), "no waiter got the message published"
    finally:
        stop.set()
        for th in threads:
            th.join(10)
        t.close()
    assert not any(th.is_alive() for th in threads)


def test_64_waiting_tasks_cost_at_most_two_requests_a_second(queue_urls: list[str]) -> None:
    async def main() -> None:
        t = await AsyncRqliteTransport.from_url(",".join(queue_urls))
        try:
            tasks = [asyncio.create_task(t.claim("w", VIS, wait=30.0)) for _ in range(64)]
            await asyncio.sleep(1.0)  # the ramp
            before = served(queue_urls)
            await asyncio.sleep(4.0)
            after = served(queue_urls)
            assert after - before <= 2 * 4.0
            # through the same transport: a kick makes the next poll due at once (the
            # schedule's own tests; the latency it gives: python -m harness bench-polling)
            await t.publish("g", '"wake"')
            done, _ = await asyncio.wait(tasks, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            assert done, "no waiting task got the message published"
            lease = next(iter(done)).result()
            assert lease is not None and lease.event == '"wake"'
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            assert t._poller.schedule.waiting == 0
        finally:
            await t.close()

    asyncio.run(main())


def test_waiting_threads_share_out_a_burst(queue_urls: list[str]) -> None:
    """Eight waiting threads, eight groups published at once elsewhere: each gets one."""
    t = RqliteTransport.from_url(",".join(queue_urls))
    other = RqliteTransport.from_url(",".join(queue_urls))
    got: list[Any] = []
    lock = threading.Lock()

    def waiter() -> None:
        lease = t.claim("w", VIS, wait=15.0)
        with lock:
            got.append(lease)

    threads = [threading.Thread(target=waiter, daemon=True) for _ in range(8)]
    try:
        for th in threads:
            th.start()
        other.publish_many([(f"g{i}", f'"{i}"') for i in range(8)])
        for th in threads:
            th.join(20)
    finally:
        other.close()
        t.close()
    assert len(got) == 8 and all(lease is not None for lease in got)
    assert sorted(lease.group_id for lease in got) == sorted(f"g{i}" for i in range(8))


def test_waiting_tasks_share_out_a_burst(queue_urls: list[str]) -> None:
    """The same with eight tasks of one event loop."""

    async def main() -> list[Any]:
        t = await AsyncRqliteTransport.from_url(",".join(queue_urls))
        other = await AsyncRqliteTransport.from_url(",".join(queue_urls))
        try:
            tasks = [asyncio.create_task(t.claim("w", VIS, wait=15.0)) for _ in range(8)]
            await other.publish_many([(f"g{i}", f'"{i}"') for i in range(8)])
            async with asyncio.timeout(20):
                return await asyncio.gather(*tasks)
        finally:
            await other.close()
            await t.close()

    got = asyncio.run(main())
    assert all(lease is not None for lease in got)
    assert sorted(lease.group_id for lease in got) == sorted(f"g{i}" for i in range(8))
