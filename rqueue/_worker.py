"""``rqueue.Worker``: runs a handler per message on threads of one blocking transport.

Each of ``concurrency`` threads claims (long polling, :mod:`rqueue._poll`), calls the
handler with the :class:`~rqueue.Lease`, and acks when it returns, or nacks with the
error (one log line) when it raises. A heartbeat thread extends every lease held while
its handler runs. :meth:`Worker.stop` (or SIGTERM/SIGINT, when :meth:`Worker.run`
installed its handlers) stops the claiming; the handlers running get ``grace`` seconds
to finish, then what is still held is given back (``nack``, delay 0) and ``run``
returns. A second stop ends the grace period at once. The queue calls, what is logged
and tallied are :class:`rqueue._worker_core.WorkerCore`'s steps, made here by :meth:`_do`.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ._models import Lease
from ._worker_core import (
    PAUSE_AFTER_FAILURE,
    SETTLE_BOUND,
    Run,
    Step,
    T,
    Tally,
    WorkerCore,
    log,
)

__all__ = ["Worker", "log"]


class Worker(WorkerCore):
    """Run ``handler(lease)`` for each message of the queue behind ``transport`` (an
    :class:`~rqueue.RqliteTransport`), on ``concurrency`` threads.

    ``visibility``: seconds of each lease, extended every third of it while the handler
    runs; ``grace``: seconds the running handlers get after a stop; ``retry_delay``:
    the nack delay after a handler raised; ``observer`` sees every queue call
    (:class:`rqueue._worker_core.Observer`). For coroutine handlers use
    :class:`~rqueue.AsyncWorker`.
    """

    def _setup(self) -> None:
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._hurry = threading.Event()
        self._active = 0

    # -- control ------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop claiming; a second call also ends the grace period. Safe from signal
        handlers and other threads."""
        if self._stopping.is_set():
            self._hurry.set()
        self._stopping.set()
        # no lock here: a signal handler may run while this thread holds it
        threading.Thread(target=self._notify, daemon=True).start()

    def _notify(self) -> None:
        with self._lock:
            self._lock.notify_all()

    def run(self, *, install_signals: bool | None = None) -> Tally:
        """Work until :meth:`stop` (or SIGTERM/SIGINT: ``install_signals`` defaults to
        True in the main thread); then finish or release what is held. Returns the tally."""
        if install_signals is None:
            install_signals = threading.current_thread() is threading.main_thread()
        with self._signals(install_signals):
            slots = [
                threading.Thread(target=self._slot, args=(k,), name=f"rqueue-worker-{k}")
                for k in range(self.options.concurrency)
            ]
            beat = threading.Thread(target=self._heartbeat, name="rqueue-heartbeat")
            self._active = len(slots)
            for th in [*slots, beat]:
                th.daemon = True
                th.start()
            self._stopping.wait()
            deadline = time.monotonic() + self.options.grace
            with self._lock:
                while self._active and not self._hurry.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._lock.wait(left)
            released = self._release_all()
            with self._lock:
                self._hurry.set()  # ends the heartbeat thread
                self._lock.notify_all()
                # the slots not stuck in a handler end after their claim in flight: wait
                # for them, so that no claim of this worker returns after run() does
                deadline = time.monotonic() + SETTLE_BOUND
                while self._active > released and (left := deadline - time.monotonic()) > 0:
                    self._lock.wait(left)
            beat.join(self.options.visibility)
        return self.tally

    @contextmanager
    def _signals(self, install: bool) -> Iterator[None]:
        if not install:
            yield
            return
        previous = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
        for s in previous:
            signal.signal(s, lambda *_: self.stop())
        try:
            yield
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    def _do(self, step: Step[T]) -> T:
        """Make the queue calls of ``step`` (:mod:`rqueue._worker_core`); its outcome."""
        run = Run(step)
        for call in run:
            with call.catching():
                call.result = call.on(self.transport)
        return run.value

    # -- the slots ------------------------------------------------------------------------
    def _slot(self, slot: int) -> None:
        try:
            while not self._stopping.is_set():
                lease, failed = self._do(self._claim(slot))
                if failed:
                    self._stopping.wait(PAUSE_AFTER_FAILURE)
                if lease is None:
                    continue
                if self._stopping.is_set():
                    self._do(self._give_back(slot, lease, "stopping"))
                    break
                self._work(slot, lease)
        finally:
            with self._lock:
                self._active -= 1
                self._lock.notify_all()

    def _work(self, slot: int, lease: Lease) -> None:
        with self._lock:
            h = self._holdings.add(slot, lease, time.monotonic(), lock=threading.Lock())
            self._lock.notify_all()  # the heartbeat's next beat may be earlier now
        error: BaseException | None = None
        try:
            self.handler(lease)
        except Exception as exc:
            error = exc
        with h.lock:  # after an extend in flight: one call of a slot at a time
            with self._lock:
                self._holdings.remove(h)
            if h.released:
                return
            self._do(self._settle(slot, h.lease, error))

    def _release_all(self) -> int:
        """The grace period ended: give back every lease still held; how many."""
        with self._lock:
            held = self._holdings.all()
        released = 0
        for h in held:
            with h.lock:
                with self._lock:
                    if not self._holdings.remove(h):
                        continue  # its handler finished meanwhile and settled it
                released += 1
                self._do(self._release(h))
        return released

    def _heartbeat(self) -> None:
        while True:
            with self._lock:
                if self._hurry.is_set():
                    return
                now = time.monotonic()
                due = self._holdings.due(now)
                if not due:
                    nxt = self._holdings.next_beat()
                    self._lock.wait(None if nxt is None else max(0.0, nxt - now))
                    continue
            for h in due:
                with h.lock:  # one call of a slot at a time
                    self._do(self._beat(h, self._lock))
