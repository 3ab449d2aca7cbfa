"""Timed concurrent load for ``python -m harness bench``: threads or asyncio tasks.

A *step* is one operation of one worker: it returns True when it did its work and False
when it found nothing to do (a claim on an empty queue), or, for a batch, how many items
it did (0: nothing to do). :func:`run_threads` and
:func:`run_tasks` run ``concurrency`` workers for a warm-up and then a measured window,
and count only the steps that both start and finish inside the window.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import HarnessError

if TYPE_CHECKING:
    from .cost import Meter

Step = Callable[[], bool | int]
AsyncStep = Callable[[], Awaitable[bool | int]]
#: worker index -> (step, close); opened before the clock starts
OpenWorker = Callable[[int], tuple[Step, Callable[[], None]]]
OpenTask = Callable[[int], Awaitable[tuple[AsyncStep, Callable[[], Awaitable[None]]]]]


class LoadError(HarnessError):
    """A load could not run (a worker failed to open, or every step failed)."""


@dataclass
class Load:
    """What one timed load did inside its measured window."""

    concurrency: int
    seconds: float
    latencies: list[float] = field(default_factory=list)  # seconds, steps that did work
    empty: int = 0  # steps that found nothing to do
    errors: int = 0
    first_error: str | None = None
    items: int = 0  # what the steps that did work did: one each, or a batch's count

    @property
    def ops(self) -> int:
        return len(self.latencies)

    @property
    def item_rate(self) -> float:
        """Items (messages of a batch, or one per operation) per second."""
        return self.items / self.seconds if self.seconds > 0 else 0.0

    @property
    def rate(self) -> float:
        """Completed operations per second."""
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    def percentile_ms(self, q: float) -> float | None:
        """The ``q``-th percentile (0-100) of the latencies, in milliseconds."""
        return percentile_ms(self.latencies, q)

    def __add__(self, other: Load) -> Load:
        """Two windows of the same load as one: their operations over their summed time."""
        if other.concurrency != self.concurrency:
            raise ValueError(
                f"cannot add loads at concurrency {self.concurrency} and {other.concurrency}"
            )
        return Load(
            self.concurrency,
            self.seconds + other.seconds,
            self.latencies + other.latencies,
            self.empty + other.empty,
            self.errors + other.errors,
            self.first_error or other.first_error,
            self.items + other.items,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "seconds": round(self.seconds, 3),
            "ops": self.ops,
            "per_second": round(self.rate, 1),
            "p50_ms": _round(self.percentile_ms(50)),
            "p99_ms": _round(self.percentile_ms(99)),
            "empty": self.empty,
            "errors": self.errors,
            "first_error": self.first_error,
        }


def percentile_ms(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100, inclusive method) of ``values`` seconds, in ms."""
    if not 0 < q < 100:
        raise ValueError(f"percentile: q must be strictly between 0 and 100, got {q}")
    if not values:
        return None
    if len(values) == 1:
        return values[0] * 1000.0
    cuts = statistics.quantiles(values, n=1000, method="inclusive")
    return cuts[round(q * 10) - 1] * 1000.0


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


class _Window:
    """The measured window and the tallies of every worker (thread-safe)."""

    def __init__(self, concurrency: int, warmup: float, seconds: float) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if seconds <= 0 or warmup < 0:
            raise ValueError(f"need seconds > 0 and warmup >= 0, got {seconds}, {warmup}")
        self.load = Load(concurrency, seconds)
        self.warmup, self.seconds = warmup, seconds
        self.start = self.end = 0.0
        self._lock = threading.Lock()

    def begin(self) -> None:
        self.start = time.perf_counter() + self.warmup
        self.end = self.start + self.seconds

    def record(self, t0: float, t1: float, worked: bool | int) -> None:
        if t0 < self.start or t1 > self.end:
            return
        with self._lock:
            if worked:
                self.load.latencies.append(t1 - t0)
                self.load.items += int(worked)
            else:
                self.load.empty += 1

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            self.load.errors += 1
            if self.load.first_error is None:
                self.load.first_error = f"{type(exc).__name__}: {exc}"[:300]


def run_threads(
    open_worker: OpenWorker,
    concurrency: int,
    seconds: float,
    warmup: float = 0.5,
    meter: Meter | None = None,
) -> Load:
    """Run ``concurrency`` threads, each repeating its step, for ``warmup + seconds``;
    ``meter`` reads the costs at the measured window's start and end."""
    window = _Window(concurrency, warmup, seconds)
    opened: list[tuple[Step, Callable[[], None]]] = []
    try:
        for i in range(concurrency):
            opened.append(open_worker(i))
        go = threading.Barrier(concurrency + 1)

        def work(step: Step) -> None:
            go.wait()
            while (t0 := time.perf_counter()) < window.end:
                try:
                    worked = step()
                except Exception as exc:
                    window.failed(exc)
                    continue
                window.record(t0, time.perf_counter(), worked)

        threads = [
            threading.Thread(target=work, args=(s,), name=f"bench-{i}", daemon=True)
            for i, (s, _) in enumerate(opened)
        ]
        for t in threads:
            t.start()
        window.begin()
        watcher = meter.watch(window.start, window.end) if meter else None
        go.wait()
        for t in threads:
            t.join()
        if watcher is not None:
            watcher.join()
    finally:
        for _, close in opened:
            close()
    return _checked(window.load)


def run_tasks(
    open_task: OpenTask,
    concurrency: int,
    seconds: float,
    warmup: float = 0.5,
    meter: Meter | None = None,
) -> Load:
    """Run ``concurrency`` asyncio tasks on one new event loop, like :func:`run_threads`."""
    return asyncio.run(_run_tasks(open_task, concurrency, seconds, warmup, meter))


async def _run_tasks(
    open_task: OpenTask, concurrency: int, seconds: float, warmup: float, meter: Meter | None
) -> Load:
    window = _Window(concurrency, warmup, seconds)
    opened: list[tuple[AsyncStep, Callable[[], Awaitable[None]]]] = []
    try:
        for i in range(concurrency):
            opened.append(await open_task(i))

        async def work(step: AsyncStep) -> None:
            while (t0 := time.perf_counter()) < window.end:
                try:
                    worked = await step()
                except Exception as exc:
                    window.failed(exc)
                    continue
                window.record(t0, time.perf_counter(), worked)

        window.begin()
        watcher = meter.watch(window.start, window.end) if meter else None
        await asyncio.gather(*(work(s) for s, _ in opened))
        if watcher is not None:
            await asyncio.to_thread(watcher.join)
    finally:
        for _, close in opened:
            await close()
    return _checked(window.load)


def _checked(load: Load) -> Load:
    if load.ops == 0 and load.errors:
        raise LoadError(f"every operation failed ({load.errors}); first: {load.first_error}")
    return load
