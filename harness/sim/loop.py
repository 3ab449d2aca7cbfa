"""The simulation's scheduler: virtual time, one heap of timed callbacks, tasks as
generators.

Nothing here reads a real clock or an unseeded random source: events at the same
virtual time run in the order they were scheduled (a counter breaks ties), so a run is a
pure function of its seed. A task is a generator that yields a number (sleep that many
virtual seconds) or a :class:`Future` (resume with its value, or have its exception
thrown in, once it is settled).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Generator
from typing import Any

#: what a task yields: seconds to sleep, or a future to wait for
Task = Generator["float | Future", Any, Any]


class Future:
    """A value that is settled once, later; its waiters are called when it is."""

    __slots__ = ("_waiters", "done", "error", "value")

    def __init__(self) -> None:
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None
        self._waiters: list[Callable[[Future], None]] = []

    def settle(self, value: Any = None, error: BaseException | None = None) -> bool:
        """Settle with ``value`` (or ``error``); False if it was settled already."""
        if self.done:
            return False
        self.done, self.value, self.error = True, value, error
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            w(self)
        return True

    def then(self, fn: Callable[[Future], None]) -> None:
        if self.done:
            fn(self)
        else:
            self._waiters.append(fn)


class Loop:
    """Virtual time and the events due at each instant."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = 0
        #: events run so far (the simulation's cost, for the benchmark)
        self.events = 0

    def clock(self) -> float:
        """The virtual time (what every simulated clock is built on)."""
        return self.now

    def at(self, t: float, fn: Callable[..., Any], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (max(t, self.now), self._seq, fn, args))

    def after(self, dt: float, fn: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + dt, fn, *args)

    def timeout(self, future: Future, dt: float, error: Callable[[], BaseException]) -> None:
        """Settle ``future`` with ``error()`` after ``dt`` unless settled before."""
        self.after(dt, lambda: future.done or future.settle(error=error()))

    def spawn(self, task: Task, on_error: Callable[[BaseException], None] | None = None) -> Future:
        """Run ``task`` from now on; its future settles with its return value."""
        done = Future()
        self.at(self.now, self._step, task, done, None, None, on_error)
        return done

    def _step(
        self,
        task: Task,
        done: Future,
        value: Any,
        error: BaseException | None,
        on_error: Callable[[BaseException], None] | None,
    ) -> None:
        try:
            got = task.throw(error) if error is not None else task.send(value)
        except StopIteration as stop:
            done.settle(stop.value)
            return
        except Exception as exc:  # a bug in a task: reported, the others go on
            if on_error is not None:
                on_error(exc)
            done.settle(error=exc)
            return
        if isinstance(got, Future):
            if got.done:
                self.at(self.now, self._step, task, done, got.value, got.error, on_error)
            else:  # resumed by the event that settles it, at its instant
                got.then(lambda f: self._step(task, done, f.value, f.error, on_error))
        else:
            self.at(self.now + max(0.0, float(got)), self._step, task, done, None, None, on_error)

    def run(self, until: float, stop: Callable[[], bool] | None = None) -> None:
        """Run the events due up to ``until`` (or until ``stop()`` says so)."""
        heap = self._heap
        while heap and heap[0][0] <= until:
            t, _, fn, args = heapq.heappop(heap)
            self.now = t
            self.events += 1
            fn(*args)
            if stop is not None and stop():
                return
        self.now = max(self.now, until)
