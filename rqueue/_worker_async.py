"""``rqueue.AsyncWorker``: runs a handler per message on tasks of one asyncio transport.

The asyncio twin of :class:`rqueue.Worker` (:mod:`rqueue._worker`), with the same
behaviour: ``concurrency`` tasks claim (long polling) and run the handler, a heartbeat
task extends the leases held, a stop ends the claiming and gives the running handlers
``grace`` seconds, after which they are cancelled and what they held is given back.
A coroutine handler is awaited; a plain function runs in a daemon thread of its own
(not the loop's executor, whose threads the loop's shutdown waits for: a handler that
outlived the grace period would hold the process).
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

from ._exceptions import LeaseLost, RqueueError
from ._models import Lease
from ._worker import log
from ._worker_core import (
    CLAIM_WAIT,
    PAUSE_AFTER_FAILURE,
    SETTLE_BOUND,
    Holding,
    Holdings,
    Observer,
    Options,
    Tally,
    failure_text,
)


class AsyncWorker:
    """Run ``handler(lease)`` for each message of the queue behind ``transport`` (an
    :class:`~rqueue.AsyncRqliteTransport`), on ``concurrency`` tasks. The options are
    :class:`~rqueue.Worker`'s."""

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
        if not callable(handler):
            raise TypeError(f"handler: must be callable, got {handler!r}")
        self.options = Options(concurrency, visibility, grace, retry_delay, min_priority, worker_id)
        self.transport = transport
        self.handler = handler
        self.observer = observer
        self.tally = Tally()
        self._coroutine = inspect.iscoroutinefunction(handler)
        self._holdings = Holdings(self.options.heartbeat)
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

    # -- the calls, observed ------------------------------------------------------------
    async def _call(self, slot: int, f: str, value: dict[str, Any], fn: Callable[[], Any]) -> Any:
        handle = None if self.observer is None else self.observer.invoke(slot, f, value)
        try:
            result = await fn()
        except BaseException as exc:
            if self.observer is not None:
                self.observer.complete(handle, None, exc)
            raise
        if self.observer is not None:
            self.observer.complete(handle, result, None)
        return result

    async def _claim(self, slot: int) -> Lease | None:
        o, t = self.options, self.transport
        value = {"visibility": o.visibility, "min_priority": o.min_priority, "wait": CLAIM_WAIT}
        try:
            return await self._call(
                slot,
                "claim",
                value,
                lambda: t.claim(o.worker_id, o.visibility, o.min_priority, wait=CLAIM_WAIT),
            )
        except RqueueError as exc:
            log.warning("claim failed: %s", failure_text(exc))
            try:
                async with asyncio.timeout(PAUSE_AFTER_FAILURE):
                    await self._stopping.wait()
            except TimeoutError:
                pass
            return None

    async def _settle(self, slot: int, lease: Lease, error: BaseException | None) -> None:
        t = self.transport
        try:
            if error is None:
                await self._call(slot, "ack", {"lease": lease}, lambda: t.ack(lease))
                self.tally.handled += 1
                return
            text = failure_text(error)
            log.warning("message %s of group %r failed: %s", lease.seq, lease.group_id, text)
            self.tally.failed += 1
            delay = self.options.retry_delay
            value = {"lease": lease, "delay": delay, "error": text}
            await self._call(slot, "nack", value, lambda: t.nack(lease, delay, error=text))
        except RqueueError as exc:
            what = "ack" if error is None else "nack"
            log.warning("%s of message %s failed: %s", what, lease.seq, failure_text(exc))

    # -- the slots ------------------------------------------------------------------------
    async def _slot(self, slot: int) -> None:
        while not self._stopping.is_set():
            lease = await self._claim(slot)
            if lease is None:
                continue
            if self._stopping.is_set():
                await self._give_back(slot, lease, "stopping")
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
            await self._settle(slot, h.lease, error)

    async def _give_back(self, slot: int, lease: Lease, why: str) -> None:
        t = self.transport
        try:
            value = {"lease": lease, "delay": 0}
            await self._call(slot, "nack", value, lambda: t.nack(lease, 0))
            self.tally.released += 1
        except RqueueError as exc:
            log.warning("releasing message %s (%s) failed: %s", lease.seq, why, failure_text(exc))

    async def _release_all(self) -> None:
        """The grace period ended (the slots are cancelled): give back what is held."""
        for h in self._holdings.all():
            async with h.lock:
                if not self._holdings.remove(h):
                    continue
                h.released = True
                log.warning(
                    "message %s of group %r released: its handler outlived the grace period",
                    h.lease.seq,
                    h.lease.group_id,
                )
                await self._give_back(h.slot, h.lease, "grace period over")

    async def _heartbeat(self) -> None:
        visibility = self.options.visibility
        while True:
            now = time.monotonic()
            due = self._holdings.due(now)
            if not due:
                nxt = self._holdings.next_beat()
                self._changed.clear()
                try:
                    async with asyncio.timeout(None if nxt is None else max(0.0, nxt - now)):
                        await self._changed.wait()
                except TimeoutError:
                    pass
                continue
            for h in due:
                await self._beat(h, visibility)

    async def _beat(self, h: Holding, visibility: float) -> None:
        t = self.transport
        async with h.lock:
            if h not in self._holdings or h.released:
                return
            value = {"lease": h.lease, "visibility": visibility}
            try:
                lease = await self._call(
                    h.slot, "extend", value, lambda: t.extend(h.lease, visibility)
                )
            except LeaseLost as exc:
                h.lost = True
                log.warning("lease of message %s lost: %s", h.lease.seq, failure_text(exc))
                return
            except RqueueError as exc:
                self._holdings.retry(h, time.monotonic())
                log.warning("extend of message %s failed: %s", h.lease.seq, failure_text(exc))
                return
            self._holdings.extended(h, lease, time.monotonic())


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
