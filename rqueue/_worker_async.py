"""``rqueue.AsyncWorker``: runs a handler per message on tasks of one asyncio transport.

The asyncio twin of :class:`rqueue.Worker` (:mod:`rqueue._worker`), with the same
behaviour: ``concurrency`` tasks claim (long polling) and run the handler, a heartbeat
task extends the leases held, a stop ends the claiming and gives the running handlers
``grace`` seconds, after which they are cancelled and what they held is given back.
A coroutine handler is awaited; a plain function runs in a daemon thread of its own
(not the loop's executor, whose threads the loop's shutdown waits for: a handler that
outlived the grace period would hold the process). The queue calls, what is logged and
tallied are :class:`rqueue._worker_core.WorkerCore`'s steps, awaited here by :meth:`_do`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from ._models import Lease
from ._worker_core import PAUSE_AFTER_FAILURE, SETTLE_BOUND, Run, Step, T, Tally, WorkerCore


class AsyncWorker(WorkerCore):
    """Run ``handler(lease)`` for each message of the queue behind ``transport`` (an
    :class:`~rqueue.AsyncRqliteTransport`), on ``concurrency`` tasks. The options are
    :class:`~rqueue.Worker`'s."""

    coroutines = True

    def _setup(self) -> None:
        self._coroutine = inspect.iscoroutinefunction(self.handler)
        self._stopping = asyncio.Event()
        self._hurry = asyncio.Event()
        self._changed = asyncio.Event()
        #: the slots whose handler is running
        self._working: set[int] = set()

    def stop(self) -> None:
        """Stop claiming; a second call also ends the grace period. Call it on the
        worker's event loop (``loop.call_soon_threadsafe(worker.stop)`` from elsewhere)."""
        if self._stopping.is_set():
            self._hurry.set()
        self._stopping.set()

    async def run(self, *, install_signals: bool = False) -> Tally:
        """Work until :meth:`stop` (or SIGTERM/SIGINT with ``install_signals``); then
        finish or release what is held. Returns the tally."""
        loop = asyncio.get_running_loop()
        installed = []
        if install_signals:
            for s in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(s, self.stop)
                installed.append(s)
        slots = [asyncio.create_task(self._slot(k)) for k in range(self.options.concurrency)]
        beat = asyncio.create_task(self._heartbeat())
        try:
            await self._stopping.wait()
            finished = asyncio.gather(*slots, return_exceptions=True)
            hurry = asyncio.create_task(self._hurry.wait())
            await asyncio.wait(
                [finished, hurry], timeout=self.options.grace, return_when=asyncio.FIRST_COMPLETED
            )
            hurry.cancel()
            for k, task in enumerate(slots):
                if k in self._working:
                    task.cancel()  # its handler outlived the grace period
            # the others end after their claim in flight (cancelling a claim could leave
            # a message leased to nobody until its lease lapses)
            await asyncio.wait([finished], timeout=SETTLE_BOUND)
            for task in slots:
                task.cancel()
            await asyncio.gather(*slots, return_exceptions=True)
            await self._release_all()
        finally:
            beat.cancel()
            await asyncio.gather(beat, return_exceptions=True)
            for s in installed:
                loop.remove_signal_handler(s)
        return self.tally

    async def _do(self, step: Step[T]) -> T:
        """Make the queue calls of ``step`` (:mod:`rqueue._worker_core`); its outcome."""
        run = Run(step)
        for call in run:
            with call.catching():
                call.result = await call.on(self.transport)
        return run.value

    # -- the slots ------------------------------------------------------------------------
    async def _slot(self, slot: int) -> None:
        while not self._stopping.is_set():
            lease, failed = await self._do(self._claim(slot))
            if failed:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(PAUSE_AFTER_FAILURE):
                        await self._stopping.wait()
            if lease is None:
                continue
            if self._stopping.is_set():
                await self._do(self._give_back(slot, lease, "stopping"))
                return
            await self._work(slot, lease)

    async def _work(self, slot: int, lease: Lease) -> None:
        h = self._holdings.add(slot, lease, time.monotonic(), lock=asyncio.Lock())
        self._changed.set()  # the heartbeat's next beat may be earlier now
        error: BaseException | None = None
        self._working.add(slot)
        try:
            if self._coroutine:
                await self.handler(lease)
            else:
                await _in_thread(self.handler, lease)
        except Exception as exc:
            error = exc
        finally:
            self._working.discard(slot)
        async with h.lock:  # after an extend in flight: one call of a slot at a time
            if not self._holdings.remove(h) or h.released:
                return
            await self._do(self._settle(slot, h.lease, error))

    async def _release_all(self) -> None:
        """The grace period ended (the slots are cancelled): give back what is held."""
        for h in self._holdings.all():
            async with h.lock:
                if self._holdings.remove(h):
                    await self._do(self._release(h))

    async def _heartbeat(self) -> None:
        while True:
            now = time.monotonic()
            due = self._holdings.due(now)
            if not due:
                nxt = self._holdings.next_beat()
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(None if nxt is None else max(0.0, nxt - now)):
                        await self._changed.wait()
                continue
            for h in due:
                async with h.lock:  # one call of a slot at a time
                    await self._do(self._beat(h, contextlib.nullcontext()))


async def _in_thread(fn: Callable[[Lease], Any], lease: Lease) -> Any:
    """``fn(lease)`` in a daemon thread; its result or error, awaited."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def target() -> None:
        try:
            result = fn(lease)
        except BaseException as exc:
            error: BaseException | None = exc
            result = None
        else:
            error = None
        # the loop may have closed meanwhile: nobody waits for this handler any more
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=target, name="rqueue-handler", daemon=True).start()
    return await done
