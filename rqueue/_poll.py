"""Long polling: ``claim(..., wait=seconds)`` callers of one transport share their polls.

A caller that waits for a message does not poll on its own. The callers waiting on one
transport form a :class:`PollSchedule`, which decides who claims next, and when:

* **cold** (the last poll found nothing): one waiter polls for all of them, the one with
  the lowest ``min_priority`` (it sees every message the others could take; the oldest
  among equals), after a backoff that starts at :data:`FIRST_BACKOFF` and doubles up to
  :data:`MAX_BACKOFF`. However many threads or tasks wait, an idle transport sends one
  claim per :data:`MAX_BACKOFF` (under 2 requests/s): the idle waiters share that
  claim's answer;
* **hot** (a poll found a message, so more may be there): every waiter claims at once,
  and group commit (:mod:`rqueue._batch`) sends their claims as one or two requests; a
  waiter whose claim found nothing waits for news (or for the cold schedule);
* **news** (:meth:`PollSchedule.kick`: this transport published, acked or gave a message
  back): the backoff starts over and the next poll is due now, so a message published
  through the transport reaches its waiters within one request. A message published
  elsewhere is found by the next cold poll: within :data:`MAX_BACKOFF`.

:class:`PollSchedule` is sans-IO (pure decisions, tested alone); :class:`AsyncPoller` and
:class:`Poller` wait on it, on an event loop or with threads. A transport's ``claim``
hands its one claim attempt to its poller's ``run``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

#: seconds between a poll that found nothing and the next, at first; doubling up to
#: MAX_BACKOFF while the transport stays idle
FIRST_BACKOFF = 0.05
#: under the 0.5 s that makes 2 requests/s: a measured window holds one poll more than
#: its length divided by the period (and the period runs from a poll's answer)
MAX_BACKOFF = 0.55


@dataclass(eq=False)
class Waiter:
    """One waiting ``claim``: its ``min_priority``, when its wait ends (monotonic), and
    the schedule's generation of news when its last claim found nothing."""

    min_priority: int
    deadline: float
    order: int
    dry: int = -1
    started: int = -1
    polling: bool = field(default=False, repr=False)


#: what :meth:`PollSchedule.turn` says: claim now, or wait until a time (monotonic);
#: a waiter whose deadline passed gets :data:`DONE`
POLL = "poll"
DONE = "done"


class PollSchedule:
    """Who of a transport's waiting callers claims next, and when (see the module).

    Not thread-safe: the sync poller holds a lock around every method, the async one
    runs them on its loop. Times are monotonic seconds, given by the caller.
    """

    def __init__(self, first: float = FIRST_BACKOFF, ceiling: float = MAX_BACKOFF) -> None:
        if not 0 < first <= ceiling:
            raise ValueError(f"backoff: need 0 < first <= ceiling, got {first}, {ceiling}")
        self.first = first
        self.ceiling = ceiling
        self.backoff = 0.0
        #: when the next cold poll is due (-inf: now, nothing is known)
        self.next_poll = float("-inf")
        #: a poll found a message since the last poll that found nothing
        self.hot = False
        #: bumped by each piece of news (a poll that found a message, a kick)
        self.generation = 0
        self.in_flight = 0
        self._waiters: list[Waiter] = []
        self._arrivals = 0
        #: polls started, by kind (for tests and the bench)
        self.polls = 0

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def join(self, min_priority: int, deadline: float) -> Waiter:
        """A caller starts waiting until ``deadline``."""
        self._arrivals += 1
        w = Waiter(min_priority, deadline, self._arrivals)
        self._waiters.append(w)
        return w

    def leave(self, w: Waiter) -> None:
        """A caller stops waiting (it got a message, its wait ran out, or it failed)."""
        if w.polling:
            self.polled(w, None)
        self._waiters.remove(w)

    def chosen(self) -> Waiter | None:
        """The waiter that makes the cold polls: lowest ``min_priority``, then oldest."""
        return min(self._waiters, key=lambda w: (w.min_priority, w.order), default=None)

    def turn(self, w: Waiter, now: float) -> str | float:
        """:data:`POLL` (claim now, then report with :meth:`polled`), :data:`DONE` (the
        wait ran out), or the time until which to wait unless woken."""
        if w.polling:
            raise RuntimeError("turn: this waiter's poll is still in flight")
        if now >= w.deadline:
            return DONE
        if self.hot and w.dry != self.generation:
            return self._start(w)
        if w is self.chosen() and self.in_flight == 0:
            if now >= self.next_poll:
                return self._start(w)
            return min(w.deadline, self.next_poll)
        return w.deadline

    def _start(self, w: Waiter) -> str:
        w.polling = True
        w.started = self.generation
        self.in_flight += 1
        self.polls += 1
        return POLL

    def polled(self, w: Waiter, found: bool | None, now: float = 0.0) -> None:
        """``w``'s claim returned: ``found`` a message, or not, or None (it failed: its
        error goes to its caller, and the schedule goes on as if it had not polled)."""
        if not w.polling:
            raise RuntimeError("polled: this waiter was not polling")
        w.polling = False
        self.in_flight -= 1
        if found is None:
            return
        if found:
            self.generation += 1
            self.hot = True
            self.backoff = 0.0
            return
        w.dry = w.started
        if w is not self.chosen():
            return  # a waiter with a higher min_priority: says nothing of the others
        self.hot = False
        if w.started != self.generation:
            self.backoff = 0.0  # news since the poll began: look again at once
        elif self.backoff > 0:
            self.backoff = min(self.ceiling, self.backoff * 2)
        else:
            self.backoff = self.first
        self.next_poll = now + self.backoff

    def kick(self, now: float) -> None:
        """News: a message may have become deliverable (published, acked, given back
        through this transport): the next poll is due now, the backoff starts over."""
        self.generation += 1
        self.backoff = 0.0
        self.next_poll = now


class AsyncPoller:
    """A transport's waiting claims on one event loop (see :class:`PollSchedule`)."""

    def __init__(self, schedule: PollSchedule | None = None) -> None:
        self.schedule = schedule or PollSchedule()
        self._changed = asyncio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def kick(self) -> None:
        """News (see :meth:`PollSchedule.kick`): wake the waiters if there are any."""
        self.schedule.kick(time.monotonic())
        if self.schedule.waiting:
            self._notify()

    async def run(
        self, attempt: Callable[[], Awaitable[T | None]], min_priority: int, wait: float
    ) -> T | None:
        """Call ``attempt`` (one claim) when the schedule says, until it returns a
        message or ``wait`` seconds pass (then None). An attempt's error is raised."""
        s = self.schedule
        w = s.join(min_priority, time.monotonic() + wait)
        try:
            while True:
                step = s.turn(w, time.monotonic())
                if step == DONE:
                    return None
                if step == POLL:
                    found: T | None = None
                    ok = False
                    try:
                        found = await attempt()
                        ok = True
                    finally:
                        s.polled(w, (found is not None) if ok else None, time.monotonic())
                        self._notify()
                    if found is not None:
                        return found
                    continue
                assert isinstance(step, float)
                changed = self._changed
                try:
                    async with asyncio.timeout(max(0.0, step - time.monotonic())):
                        await changed.wait()
                except TimeoutError:
                    pass
        finally:
            s.leave(w)
            self._notify()


class Poller:
    """A transport's waiting claims from threads (see :class:`PollSchedule`)."""

    def __init__(self, schedule: PollSchedule | None = None) -> None:
        self.schedule = schedule or PollSchedule()
        self._cond = threading.Condition()

    def kick(self) -> None:
        """News (see :meth:`PollSchedule.kick`): wake the waiters if there are any."""
        with self._cond:
            self.schedule.kick(time.monotonic())
            if self.schedule.waiting:
                self._cond.notify_all()

    def run(self, attempt: Callable[[], T | None], min_priority: int, wait: float) -> T | None:
        """Call ``attempt`` (one claim) when the schedule says, until it returns a
        message or ``wait`` seconds pass (then None). An attempt's error is raised."""
        s = self.schedule
        with self._cond:
            w = s.join(min_priority, time.monotonic() + wait)
        try:
            while True:
                with self._cond:
                    step = s.turn(w, time.monotonic())
                    if step == DONE:
                        return None
                    if step != POLL:
                        assert isinstance(step, float)
                        self._cond.wait(max(0.0, step - time.monotonic()))
                        continue
                found: T | None = None
                ok = False
                try:
                    found = attempt()
                    ok = True
                finally:
                    with self._cond:
                        s.polled(w, (found is not None) if ok else None, time.monotonic())
                        self._cond.notify_all()
                if found is not None:
                    return found
        finally:
            with self._cond:
                s.leave(w)
                self._cond.notify_all()
