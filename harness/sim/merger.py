"""Group commit on the virtual clock: rqueue's :class:`rqueue._batch.Coalescer`, driven
as the asyncio twin's merger drives it (``rqueue/_async_http.py``), with simulation
futures for its events; the calls of a shared transport's workers meet in it and go as
one merged request (rqueue's own merging and splitting, :mod:`rqueue._batch`)."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from rqueue import _batch
from rqueue._models import HttpCall

from .loop import Future, Loop

#: a batch's one exchange (the client's ``_send_merged``), as a task
SendBatch = Callable[[list[_batch.Waiting], float], Generator[Any, Any, list[_batch.Settled]]]


def _within(loop: Loop, handle: Future, seconds: float) -> Future:
    """A future settled True when ``handle`` is, False after ``seconds`` if it is not."""
    out = Future()
    handle.then(lambda _f: out.settle(True))
    loop.after(max(0.0, seconds), lambda: out.settle(False))
    return out


class SimMerger:
    """One shared transport's merger."""

    def __init__(self, loop: Loop, send: SendBatch) -> None:
        self.loop, self._send = loop, send
        self.coalescer = _batch.Coalescer()

    def run(
        self, call: HttpCall, deadline: float, request_timeout: float
    ) -> Generator[Any, Any, _batch.Settled]:
        if not self.coalescer.accepting(self.loop.now):
            return _batch.Alone("merging paused after a failed statement")
        item = _batch.Waiting(call, deadline, handle=Future(), fragment=_batch.fragment(call))
        batch = self.coalescer.arrive(item)
        if batch is None:
            settled = yield from self._wait(item, deadline, request_timeout)
            if settled is not None:
                return settled
            batch = item.batch
            assert batch is not None
        return (yield from self._flush(item, batch))

    def _wait(
        self, item: _batch.Waiting, deadline: float, request_timeout: float
    ) -> Generator[Any, Any, _batch.Settled | None]:
        """Wait to be settled (returned) or made the sender of a batch (None)."""
        if not (yield _within(self.loop, item.handle, deadline - self.loop.now)):
            if self.coalescer.withdraw(item):
                return _batch.Alone("no time left while waiting to be merged")
            bound = request_timeout + _batch.SETTLE_MARGIN
            if not (yield _within(self.loop, item.handle, bound)):
                return _batch.no_word(item, bound)
        return None if item.batch is not None else item.settled

    def _flush(
        self, item: _batch.Waiting, batch: list[_batch.Waiting]
    ) -> Generator[Any, Any, _batch.Settled]:
        """Send ``batch`` (``item`` is ours), settle the others, pass the turn on."""
        settled: list[_batch.Settled] | None = None
        try:
            settled = yield from self._send(batch, _batch.deadline_of(batch))
        finally:
            if settled is None:  # the sender died: the request may have gone out
                settled = _batch.stopped_sender(batch, sent=True)
            for w in self.coalescer.conclude(batch, settled, item, self.loop.now):
                w.handle.settle(True)
        return settled[batch.index(item)]
