"""What the two workers (:class:`rqueue.Worker`, :class:`rqueue.AsyncWorker`) share: their
options, the leases they hold and when each is due a heartbeat, loading a handler from
``module:name``, the one-line text of a failure, the observer protocol, and
:class:`WorkerCore`: the constructor and the steps (claim, settle, give back, release,
beat) that decide which queue call to make and what to log and tally given its outcome.

No I/O here: a step is a generator of :class:`Call` s; the workers (:mod:`rqueue._worker`,
:mod:`rqueue._worker_async`) make each call on their transport (blocking or awaited),
wait, call the handler and take the locks.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import math
import os
import socket
import time
import traceback
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ._exceptions import LeaseLost, RqueueError
from ._models import Lease
from ._text import check as unicode_text

log = logging.getLogger("rqueue.worker")
T = TypeVar("T")

#: seconds each ``claim(wait=...)`` of an idle worker waits: a stop is noticed within one
CLAIM_WAIT = 1.0
#: seconds a worker slot pauses after a claim failed (the cluster unavailable, say)
PAUSE_AFTER_FAILURE = 1.0
#: seconds a stopping worker waits, after the grace period, for its claims in flight
SETTLE_BOUND = 15.0
#: a heartbeat extends a lease when a third of its visibility has passed
BEATS_PER_VISIBILITY = 3
#: a handler's failure is logged with its traceback at most once per this many seconds
#: for each kind of failure (its exception type and the line that raised it); the
#: failures in between log their one line
TRACEBACK_EVERY = 60.0
#: the kinds of failure remembered (then forgotten, all at once)
_KINDS_KEPT = 256


class Observer(Protocol):
    """Sees every queue call a worker makes (tracing, metrics, the harness's history).

    ``invoke`` is called just before the call with the worker slot that makes it (a
    heartbeat's extend counts as its lease's slot), ``f`` (``claim``, ``ack``, ``nack``
    or ``extend``) and its arguments; ``complete`` just after, with what ``invoke``
    returned and the call's result or error. Calls of one slot never overlap. Both run
    on the worker's threads (or its event loop): they must be quick.
    """

    def invoke(self, slot: int, f: str, value: dict[str, Any]) -> Any: ...

    def complete(self, handle: Any, result: Any, error: BaseException | None) -> None: ...


@dataclass(frozen=True)
class Options:
    """A worker's settings, checked (:class:`ValueError` naming the bad one)."""

    concurrency: int = 1
    visibility: float = 30.0
    grace: float = 30.0
    retry_delay: float = 0.0
    min_priority: int = 0
    worker_id: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int):
            raise ValueError(f"concurrency: must be an integer, got {self.concurrency!r}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency: must be >= 1, got {self.concurrency}")
        _seconds("visibility", self.visibility, positive=True)
        _seconds("grace", self.grace, positive=False)
        _seconds("retry_delay", self.retry_delay, positive=False)
        if isinstance(self.min_priority, bool) or not isinstance(self.min_priority, int):
            raise ValueError(f"min_priority: must be an integer, got {self.min_priority!r}")
        if not isinstance(self.worker_id, str):
            raise ValueError(f"worker_id: must be a string, got {self.worker_id!r}")
        unicode_text("worker_id", self.worker_id)
        if not self.worker_id:
            object.__setattr__(self, "worker_id", f"{socket.gethostname()}:{os.getpid()}")

    @property
    def heartbeat(self) -> float:
        """Seconds between two extends of one lease."""
        return self.visibility / BEATS_PER_VISIBILITY


def _seconds(name: str, value: Any, *, positive: bool) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name}: must be a number of seconds {bound}, got {value!r}")


@dataclass(eq=False)
class Holding:
    """A lease a worker slot holds while its handler runs. ``lease`` is the latest (an
    extend returns a new one); ``released``: the grace period ended and the message was
    given back, so the slot must not settle it."""

    slot: int
    lease: Lease
    next_beat: float
    released: bool = False
    lost: bool = False
    lock: Any = field(default=None, repr=False)


class Holdings:
    """The leases a worker holds and when each is due its next extend (monotonic times).
    Not thread-safe: the sync worker holds a lock around it."""

    def __init__(self, heartbeat: float) -> None:
        self.heartbeat = heartbeat
        self._held: list[Holding] = []

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, h: Holding) -> bool:
        return h in self._held

    def add(self, slot: int, lease: Lease, now: float, lock: Any = None) -> Holding:
        h = Holding(slot, lease, now + self.heartbeat, lock=lock)
        self._held.append(h)
        return h

    def remove(self, h: Holding) -> bool:
        """Stop holding ``h``; False if it was not held (already removed)."""
        if h in self._held:
            self._held.remove(h)
            return True
        return False

    def all(self) -> list[Holding]:
        return list(self._held)

    def due(self, now: float) -> list[Holding]:
        """The holdings whose extend is due, earliest first (lost ones are not)."""
        return sorted(
            (h for h in self._held if not h.lost and h.next_beat <= now),
            key=lambda h: h.next_beat,
        )

    def next_beat(self) -> float | None:
        """When the next extend is due (None: nothing held)."""
        return min((h.next_beat for h in self._held if not h.lost), default=None)

    def extended(self, h: Holding, lease: Lease, now: float) -> None:
        h.lease = lease
        h.next_beat = now + self.heartbeat

    def retry(self, h: Holding, now: float) -> None:
        """An extend failed without losing the lease: try again soon (within the lease)."""
        h.next_beat = now + min(self.heartbeat / 2, PAUSE_AFTER_FAILURE)


def load_handler(spec: str) -> Callable[..., Any]:
    """The callable named by ``module:name`` (``name`` may be dotted); a
    :class:`ValueError` with a one-line reason otherwise."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"handler {spec!r}: expected MODULE:NAME (for example tasks:handle)")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"handler {spec!r}: cannot import {module_name!r}: {exc}") from exc
    except Exception as exc:  # the module's own code failed while importing
        raise ValueError(
            f"handler {spec!r}: importing {module_name!r} failed: {failure_text(exc)}"
        ) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"handler {spec!r}: {module_name!r} has no {attr!r}") from None
    if not callable(obj):
        raise ValueError(f"handler {spec!r}: {attr!r} is not callable")
    return obj


def failure_text(exc: BaseException, limit: int = 500) -> str:
    """``Type: message`` on one line, at most ``limit`` characters."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Tracebacks:
    """Which handler failures are logged with their traceback: the first of each kind,
    then at most one per :data:`TRACEBACK_EVERY` seconds of that kind, so a handler that
    fails on every message in a loop does not flood the log with the same traceback."""

    def __init__(
        self, every: float = TRACEBACK_EVERY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.every = every
        self._clock = clock
        self._shown: dict[tuple[str, ...], float] = {}
        self._left_out: dict[tuple[str, ...], int] = {}

    @staticmethod
    def kind(exc: BaseException) -> tuple[str, ...]:
        """The exception's type and the place that raised it (its innermost frame)."""
        frames = traceback.extract_tb(exc.__traceback__)
        where = (frames[-1].filename, str(frames[-1].lineno)) if frames else ()
        return (type(exc).__qualname__, *where)

    def take(self, exc: BaseException) -> int | None:
        """None: leave this failure's traceback out; else show it, and this many failures
        of its kind had theirs left out since the last one shown."""
        kind, now = self.kind(exc), self._clock()
        last = self._shown.get(kind)
        if last is not None and now - last < self.every:
            self._left_out[kind] = self._left_out.get(kind, 0) + 1
            return None
        if len(self._shown) >= _KINDS_KEPT and kind not in self._shown:
            self._shown.clear()
            self._left_out.clear()
        self._shown[kind] = now
        return self._left_out.pop(kind, 0)


@dataclass
class Tally:
    """What a worker did: messages handled (acked), failed (nacked), released at stop."""

    handled: int = 0
    failed: int = 0
    released: int = 0


# -- the steps: generators of queue calls ---------------------------------------------
@dataclass(eq=False)
class Call:
    """One queue call a step asks for: ``transport.<f>(*args, **kwargs)``. The driver
    makes it inside :meth:`catching` and stores its ``result`` (or its ``error``)."""

    f: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    result: Any = None
    error: BaseException | None = None

    def on(self, transport: Any) -> Any:
        """Make the call on ``transport`` (what it returns: a result or an awaitable)."""
        return getattr(transport, self.f)(*self.args, **self.kwargs)

    @contextlib.contextmanager
    def catching(self) -> Iterator[None]:
        """Store the error of the call made inside (any: the step sees it, then decides)."""
        try:
            yield
        except BaseException as exc:
            self.error = exc


#: a step: yields the calls to make, is sent each one back done, returns its outcome
Step = Generator[Call, Call, T]


class Run:
    """Drives a step: iterate it for the calls to make (each is sent back, done, when
    the iteration goes on); ``value`` is the step's outcome. An error of a call the
    step does not handle (a cancellation, say) is raised by the iteration."""

    def __init__(self, step: Step[Any]) -> None:
        self._step = step
        self._done: Call | None = None
        self.value: Any = None

    def __iter__(self) -> Iterator[Call]:
        return self

    def __next__(self) -> Call:
        done, self._done = self._done, None
        try:
            call = next(self._step) if done is None else self._step.send(done)
        except StopIteration as stop:
            self.value = stop.value
            raise StopIteration from None
        self._done = call
        return call


class WorkerCore:
    """The part of a worker its two forms share: its arguments, checked (``ValueError``
    naming the bad option, ``TypeError`` for the handler), its state, and the steps.
    A subclass sets ``coroutines`` (may the handler be a coroutine function) and adds its
    concurrency machinery in :meth:`_setup`."""

    coroutines = False

    def __init__(
        self,
        transport: Any,
        handler: Callable[[Lease], Any],
        *,
        concurrency: int = 1,
        visibility: float = 30.0,
        grace: float = 30.0,
        retry_delay: float = 0.0,
        min_priority: int = 0,
        worker_id: str = "",
        observer: Observer | None = None,
    ) -> None:
        if not self.coroutines and inspect.iscoroutinefunction(handler):
            raise TypeError("handler is a coroutine function: run it with rqueue.AsyncWorker")
        if not callable(handler):
            raise TypeError(f"handler: must be callable, got {handler!r}")
        self.options = Options(concurrency, visibility, grace, retry_delay, min_priority, worker_id)
        self.transport = transport
        self.handler = handler
        self.observer = observer
        self.tally = Tally()
        self.tracebacks = Tracebacks()
        self._holdings = Holdings(self.options.heartbeat)
        self._setup()

    def _setup(self) -> None:
        """The subclass's own state (events, locks)."""

    def _call(self, slot: int, f: str, value: dict[str, Any], *args: Any, **kwargs: Any) -> Step:
        """``transport.<f>(*args, **kwargs)``, seen by the observer (as ``f`` and ``value``)."""
        obs = self.observer
        handle = None if obs is None else obs.invoke(slot, f, value)
        done = yield Call(f, args, kwargs)
        if obs is not None:
            obs.complete(handle, done.result, done.error)
        if done.error is not None:
            raise done.error
        return done.result

    def _claim(self, slot: int) -> Step[tuple[Lease | None, bool]]:
        """The lease claimed (None: none within the wait) and whether the claim failed
        (the slot then pauses)."""
        o = self.options
        value = {"visibility": o.visibility, "min_priority": o.min_priority, "wait": CLAIM_WAIT}
        try:
            call = self._call(
                slot, "claim", value, o.worker_id, o.visibility, o.min_priority, wait=CLAIM_WAIT
            )
            return (yield from call), False
        except RqueueError as exc:
            log.warning("claim failed: %s", failure_text(exc))
            return None, True

    def _settle(self, slot: int, lease: Lease, error: BaseException | None) -> Step[None]:
        """Ack the message (its handler returned) or nack it with ``error``."""
        try:
            if error is None:
                yield from self._call(slot, "ack", {"lease": lease}, lease)
                self.tally.handled += 1
                return
            text = failure_text(error)
            self._log_failure(lease, error, text)
            self.tally.failed += 1
            delay = self.options.retry_delay
            value = {"lease": lease, "delay": delay, "error": text}
            yield from self._call(slot, "nack", value, lease, delay, error=text)
        except RqueueError as exc:
            what = "ack" if error is None else "nack"
            log.warning("%s of message %s failed: %s", what, lease.seq, failure_text(exc))

    def _log_failure(self, lease: Lease, error: BaseException, text: str) -> None:
        """One warning per failure; its traceback too, unless one of its kind was shown
        less than :data:`TRACEBACK_EVERY` seconds ago (:class:`Tracebacks`)."""
        left_out = self.tracebacks.take(error)
        if left_out is None:
            every = f"{self.tracebacks.every:g}"
            line = f"{text} (its traceback was logged less than {every} s ago)"
            log.warning("message %s of group %r failed: %s", lease.seq, lease.group_id, line)
            return
        more = f" ({left_out} more like it since its last traceback)" if left_out else ""
        log.warning(
            "message %s of group %r failed: %s%s",
            lease.seq,
            lease.group_id,
            text,
            more,
            exc_info=(type(error), error, error.__traceback__),
        )

    def _give_back(self, slot: int, lease: Lease, why: str) -> Step[None]:
        """Nack (delay 0) a message this worker will not handle."""
        try:
            yield from self._call(slot, "nack", {"lease": lease, "delay": 0}, lease, 0)
            self.tally.released += 1
        except RqueueError as exc:
            log.warning("releasing message %s (%s) failed: %s", lease.seq, why, failure_text(exc))

    def _release(self, h: Holding) -> Step[None]:
        """Give back ``h`` (no longer held): its handler outlived the grace period."""
        h.released = True
        log.warning(
            "message %s of group %r released: its handler outlived the grace period",
            h.lease.seq,
            h.lease.group_id,
        )
        yield from self._give_back(h.slot, h.lease, "grace period over")

    def _beat(self, h: Holding, guard: contextlib.AbstractContextManager[Any]) -> Step[None]:
        """Extend ``h``'s lease unless it is no longer held; ``guard`` (a lock, or none)
        is held around each use of the holdings."""
        with guard:
            if h not in self._holdings or h.released:
                return
        visibility = self.options.visibility
        value = {"lease": h.lease, "visibility": visibility}
        try:
            lease = yield from self._call(h.slot, "extend", value, h.lease, visibility)
        except LeaseLost as exc:
            h.lost = True
            log.warning("lease of message %s lost: %s", h.lease.seq, failure_text(exc))
            return
        except RqueueError as exc:
            with guard:
                self._holdings.retry(h, time.monotonic())
            log.warning("extend of message %s failed: %s", h.lease.seq, failure_text(exc))
            return
        with guard:
            self._holdings.extended(h, lease, time.monotonic())
