"""``rqueue.Worker`` and ``rqueue.AsyncWorker`` on the real embedded cluster.

Each test runs a worker in the background (a thread; the async worker on its own
loop in that thread), waits for a condition with a deadline, stops it and checks what
the queue holds afterwards, read straight from the nodes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from rqueue import AsyncRqliteTransport, AsyncWorker, Lease, RqliteTransport, Worker
from rqueue._worker_core import Holdings, Options, Tracebacks, load_handler

from .polling import query, wait_for

BOUND = 30.0


def remaining(urls: list[str]) -> int:
    return query(urls, "SELECT count(*) FROM messages")[0][0]


def leased(urls: list[str]) -> int:
    return query(urls, "SELECT count(*) FROM messages WHERE locked_by IS NOT NULL")[0][0]


class Calls:
    """An observer: every queue call a worker makes, as ``(slot, f, outcome)``."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str, str]] = []
        self._lock = threading.Lock()

    def invoke(self, slot: int, f: str, value: dict[str, Any]) -> tuple[int, str]:
        return slot, f

    def complete(self, handle: tuple[int, str], result: Any, error: BaseException | None) -> None:
        with self._lock:
            self.seen.append((*handle, "ok" if error is None else type(error).__name__))

    def count(self, f: str) -> int:
        with self._lock:
            return sum(1 for _, g, outcome in self.seen if g == f and outcome == "ok")


@contextmanager
def running(kind: str, urls: list[str], handler: Callable, **kw: Any) -> Iterator[Any]:
    """A worker of ``kind`` ("sync" or "async") working in a background thread; stopped
    and joined on exit. Yields ``(worker, stop, result)``: ``stop()`` asks it to stop,
    ``result`` gets its tally."""
    result: dict[str, Any] = {}
    ready = threading.Event()
    holder: dict[str, Any] = {}

    def sync_main() -> None:
        t = RqliteTransport.from_url(",".join(urls))
        try:
            w = Worker(t, handler, **kw)
            holder["worker"], holder["stop"] = w, w.stop
            ready.set()
            result["tally"] = w.run(install_signals=False)
        finally:
            t.close()

    def async_main() -> None:
        async def main() -> None:
            t = await AsyncRqliteTransport.from_url(",".join(urls))
            try:
                w = AsyncWorker(t, handler, **kw)
                loop = asyncio.get_running_loop()
                holder["worker"] = w
                holder["stop"] = lambda: loop.call_soon_threadsafe(w.stop)
                ready.set()
                result["tally"] = await w.run()
            finally:
                await t.close()

        asyncio.run(main())

    def guarded() -> None:
        try:
            (sync_main if kind == "sync" else async_main)()
        except BaseException as exc:
            result["error"] = exc
            ready.set()

    th = threading.Thread(target=guarded, daemon=True)
    th.start()
    assert ready.wait(BOUND), "the worker did not start"
    if "error" in result:
        raise result["error"]
    asked: list[bool] = []

    def stop() -> None:
        asked.append(True)
        holder["stop"]()

    try:
        yield holder["worker"], stop, result
    finally:
        if not asked:  # a second stop would end the grace period at once
            stop()
        th.join(BOUND)
        assert not th.is_alive(), "the worker did not stop within the bound"
    if "error" in result:
        raise result["error"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_every_message_is_handled_once_in_group_order(kind: str, queue_urls: list[str]) -> None:
    handled: list[tuple[str, int]] = []
    lock = threading.Lock()

    def handler(lease: Lease) -> None:
        with lock:
            handled.append((lease.group_id, json.loads(lease.event)["n"]))

    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        t.publish_many([(f"g{n % 4}", {"n": n}) for n in range(24)])
    calls = Calls()
    with running(kind, queue_urls, handler, concurrency=4, observer=calls) as (_, _, result):
        wait_for("24 messages handled and acked", lambda: calls.count("ack") == 24, BOUND)
    assert result["tally"].handled == 24
    assert remaining(queue_urls) == 0
    assert sorted(n for _, n in handled) == list(range(24))
    for g in range(4):
        mine = [n for group, n in handled if group == f"g{g}"]
        assert mine == sorted(mine)  # FIFO within the group


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_failing_handler_nacks_with_its_error_and_logs_one_line(
    kind: str, queue_urls: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    def handler(lease: Lease) -> None:
        raise ValueError("no such customer\nsecond line")

    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        t.publish("g", {"n": 1})
    calls = Calls()
    caplog.set_level(logging.WARNING, logger="rqueue.worker")
    kw = dict(observer=calls, retry_delay=60.0)
    with running(kind, queue_urls, handler, **kw) as (_, _, result):
        wait_for("the failed message nacked", lambda: calls.count("nack") == 1, BOUND)
    [(error,)] = query(queue_urls, "SELECT last_error FROM messages")
    assert error == "ValueError: no such customer second line"
    failures = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(failures) == 1 and "\n" not in failures[0].getMessage()
    assert failures[0].levelno == logging.WARNING
    assert failures[0].exc_info is not None and failures[0].exc_info[0] is ValueError
    assert "in handler" in logging.Formatter().format(failures[0])  # the handler's frame
    assert result["tally"].failed == 1


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_handler_failing_in_a_loop_logs_its_traceback_once(
    kind: str, queue_urls: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Every message fails alike: one line each, the traceback with the first alone."""

    def handler(lease: Lease) -> None:
        raise KeyError("customer")

    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        t.publish_many([(f"g{n}", {"n": n}) for n in range(4)])
    calls = Calls()
    caplog.set_level(logging.WARNING, logger="rqueue.worker")
    with running(kind, queue_urls, handler, observer=calls, retry_delay=60.0):
        wait_for("4 failed messages nacked", lambda: calls.count("nack") == 4, BOUND)
    failures = [r for r in caplog.records if "failed: KeyError" in r.getMessage()]
    assert len(failures) == 4
    assert [r.exc_info is not None for r in failures] == [True, False, False, False]
    assert all(
        "its traceback was logged less than 60 s ago" in r.getMessage() for r in failures[1:]
    )


def test_tracebacks_are_shown_once_a_minute_per_kind_of_failure() -> None:
    now = [0.0]
    shown = Tracebacks(every=60.0, clock=lambda: now[0])

    def failure(n: int) -> BaseException:
        try:
            if n == 1:
                raise ValueError("one place")
            raise ValueError("another place")
        except ValueError as exc:
            return exc

    assert shown.take(failure(1)) == 0  # the first of its kind
    assert shown.take(failure(1)) is None
    assert shown.take(failure(2)) == 0  # raised elsewhere: a kind of its own
    now[0] = 59.0
    assert shown.take(failure(1)) is None
    now[0] = 60.0
    assert shown.take(failure(1)) == 2  # two left out since the last one shown
    assert shown.take(failure(1)) is None


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_lease_is_extended_while_the_handler_runs(kind: str, queue_urls: list[str]) -> None:
    release = threading.Event()
    calls = Calls()

    def handler(lease: Lease) -> None:
        assert release.wait(BOUND)

    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        t.publish("g", {"n": 1})
        with running(kind, queue_urls, handler, visibility=1.2, observer=calls):
            wait_for("two extends", lambda: calls.count("extend") >= 2, BOUND)
            # past the first visibility: still held, so another claimer gets nothing
            assert t.claim("other", 5.0) is None
            release.set()
            wait_for("the ack", lambda: calls.count("ack") == 1, BOUND)
    assert remaining(queue_urls) == 0


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_stop_releases_what_outlives_the_grace_period(kind: str, queue_urls: list[str]) -> None:
    started = threading.Event()
    release = threading.Event()

    def handler(lease: Lease) -> None:
        started.set()
        release.wait(BOUND)

    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        t.publish("g", {"n": 1})
    try:
        with running(kind, queue_urls, handler, grace=0.3) as (_, stop, result):
            assert started.wait(BOUND)
            stopped = time.monotonic()
            stop()
        assert time.monotonic() - stopped < 0.3 + 10  # the grace, the release's request
    finally:
        release.set()
    assert result["tally"].released == 1
    assert remaining(queue_urls) == 1 and leased(queue_urls) == 0  # ready again


def test_a_stop_lets_a_running_handler_finish_within_the_grace(queue_urls: list[str]) -> None:
    started = threading.Event()

    def handler(lease: Lease) -> None:
        started.set()
        time.sleep(0.5)  # a short job that the grace period covers

    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        t.publish("g", {"n": 1})
    with running("sync", queue_urls, handler, grace=20.0) as (_, stop, result):
        assert started.wait(BOUND)
        stop()
    assert result["tally"].handled == 1 and result["tally"].released == 0
    assert remaining(queue_urls) == 0


def test_an_async_worker_awaits_coroutine_handlers(queue_urls: list[str]) -> None:
    seen: list[int] = []

    async def handler(lease: Lease) -> None:
        await asyncio.sleep(0.01)
        seen.append(lease.seq)

    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        t.publish_many([(f"g{n}", {"n": n}) for n in range(6)])
    with running("async", queue_urls, handler, concurrency=3):
        wait_for("six handled", lambda: len(seen) == 6, BOUND)
    assert remaining(queue_urls) == 0


def test_bad_options_and_handlers_are_refused() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        Options(concurrency=0)
    with pytest.raises(ValueError, match="visibility"):
        Options(visibility=0)
    with pytest.raises(ValueError, match="grace"):
        Options(grace=float("nan"))

    async def coro(lease: Lease) -> None: ...

    with pytest.raises(TypeError, match="AsyncWorker"):
        Worker(object(), coro)
    with pytest.raises(ValueError, match="MODULE:NAME"):
        load_handler("nocolon")
    with pytest.raises(ValueError, match="cannot import"):
        load_handler("no_such_module_xyz:f")
    with pytest.raises(ValueError, match="has no"):
        load_handler("json:nothing_here")
    with pytest.raises(ValueError, match="not callable"):
        load_handler("tests.rqueue.worker_handlers:not_callable")


def test_holdings_say_which_lease_is_due_a_heartbeat() -> None:
    h = Holdings(heartbeat=10.0)
    a = h.add(0, Lease(1, "g", "{}", "t1"), now=0.0)
    b = h.add(1, Lease(2, "g2", "{}", "t2"), now=5.0)
    assert h.next_beat() == 10.0 and h.due(9.9) == []
    assert h.due(15.0) == [a, b]
    h.extended(a, Lease(1, "g", "{}", "t1", expires_at=99.0), 10.0)
    assert a.lease.expires_at == 99.0 and h.next_beat() == 15.0
    h.retry(b, 15.0)
    assert b.next_beat == 16.0
    b.lost = True
    assert h.due(100.0) == [a]
    assert h.remove(a) and not h.remove(a)
