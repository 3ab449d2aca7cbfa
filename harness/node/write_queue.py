"""rqlite's queued writes, ``/db/execute?queue`` (``http/service.go``: ``queuedExecute`` and
``runQueue``; ``queue/queue.go``; the same in v8.36.18, v9.4.5 and v10.2.7).

What a client sees, and what this module does the same way:

- The request is answered at once with ``{"results": [], "sequence_number": N}``: nothing
  has run yet. Sequence numbers count up by one per queued request from the node's clock
  in nanoseconds when the node started; each node has its own.
- The node gathers queued requests for up to :data:`BATCH_TIMEOUT` after the first one, or
  until :data:`BATCH_SIZE` of them, and runs all their statements as **one**
  ``/db/execute`` (one log entry, no transaction: a failing statement does not stop the
  others), on this node if it leads or else on the leader. SQL errors are not reported to
  anyone.
- When the batch could not be written (no leader, leadership lost, the leader unreachable)
  it is tried again every :data:`RETRY_DELAY`, for as long as the node runs, so a batch
  whose outcome was unknown may be applied twice. A node that stops loses what it has not
  written yet.
- With ``wait`` the answer comes once the request's batch was written (or ``408 queue wait
  timeout`` after ``timeout``, default 30 s; the batch is still written later).
- The queue holds :data:`CAPACITY` requests; beyond that a queued request waits for room.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .statements import Statement

log = logging.getLogger(__name__)

#: rqlited's defaults: ``-write-queue-capacity``, ``-write-queue-batch-size``,
#: ``-write-queue-timeout`` (50 ms in ``cmd/rqlited/config_flags.go`` of v8.36.18, v9.4.5
#: and v10.2.7, which overrides the 100 ms of ``http/service.go``'s ``New``); and
#: ``runQueue``'s pause between tries
CAPACITY = 1024
BATCH_SIZE = 128
BATCH_TIMEOUT = 0.05
RETRY_DELAY = 1.0

#: ``runQueue``'s counters of a failed try, by the error's text (else ``unknown_error``)
_FAILURE_COUNTERS = {
    "leader not found": "queued_executions_no_leader",
    "leadership lost while committing log": "queued_executions_leadership_lost",
    "not leader": "queued_executions_not_leader",
}


@dataclass
class _Queued:
    sequence: int
    stmts: list[Statement] | None
    flushed: threading.Event | None


class WriteQueue:
    """Batches queued writes and writes each batch with ``run`` (its statements -> None when
    written, else the error's text); ``count`` adds to a ``/debug/vars`` counter."""

    def __init__(
        self,
        run: Callable[[list[Statement]], str | None],
        count: Callable[[str, int], None],
        first_sequence: int,
        *,
        capacity: int = CAPACITY,
        batch_size: int = BATCH_SIZE,
        batch_timeout: float = BATCH_TIMEOUT,
        retry_delay: float = RETRY_DELAY,
    ) -> None:
        self._run = run
        self._count = count
        self._sequence = first_sequence
        self._sequence_lock = threading.Lock()
        self._queue: queue.Queue[_Queued] = queue.Queue(maxsize=capacity)
        self._batch_size = batch_size
        self._batch_timeout = batch_timeout
        self._retry_delay = retry_delay
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="write-queue", daemon=True)
        self._thread.start()

    def write(self, stmts: list[Statement] | None, flushed: threading.Event | None) -> int:
        """Queue ``stmts`` (None: nothing to run, a marker a client may wait on); its
        sequence number. ``flushed`` is set once its batch was written."""
        with self._sequence_lock:  # numbers in queue order, as rqlite takes them
            self._sequence += 1
            number = self._sequence
            self._queue.put(_Queued(number, stmts, flushed))
        return number

    def close(self, timeout: float = 5.0) -> None:
        """Stop the writer (what it has not written is lost, as in rqlite)."""
        self._closed.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._closed.is_set():
            try:
                first = self._queue.get(timeout=0.2)  # wakes to notice close()
            except queue.Empty:
                continue
            batch = [first]
            deadline = time.monotonic() + self._batch_timeout
            while len(batch) < self._batch_size:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    batch.append(self._queue.get(timeout=left))
                except queue.Empty:
                    break
            self._write(batch)

    def _write(self, batch: list[_Queued]) -> None:
        stmts: list[Statement] | None = None
        for item in batch:
            if item.stmts is not None:
                stmts = [*(stmts or []), *item.stmts]
        self._count("queued_executions_num_stmts_rx", len(stmts or ()))
        if stmts is not None:
            while True:
                error = self._run(stmts)
                if error is None:
                    break
                last = batch[-1].sequence
                log.warning("queued write up to sequence number %d failed: %s", last, error)
                self._count(_FAILURE_COUNTERS.get(error, "queued_executions_unknown_error"), 1)
                self._count("queued_executions_failed", 1)
                if self._closed.wait(self._retry_delay):
                    return
        for item in batch:
            if item.flushed is not None:
                item.flushed.set()
        self._count("queued_executions_num_stmts_tx", len(stmts or ()))
        self._count("queued_executions_ok", 1)
