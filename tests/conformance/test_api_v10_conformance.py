"""Five smaller places where the embedded node follows rqlite (issue 40): the write queue's
batch timeout, ``?redirect`` with no leader, the request-body size, ``/readyz``, a
``RETURNING`` write rqlite's parser rejects, and multi-way JOINs as each version's
rqlite/sql prints them (docs/embedded-node.md, "Smaller places, by rqlite's source")."""

from __future__ import annotations

import threading
import time

from harness.node.statements import Statement
from harness.node.write_queue import WriteQueue


def _first_batch_delay() -> float:
    """Seconds from queueing one write on a queue with the default batch timeout to its
    batch being written."""
    written = threading.Event()
    at: list[float] = []

    def run(stmts: list[Statement]) -> None:
        at.append(time.monotonic())
        written.set()

    q = WriteQueue(run, lambda name, n: None, 0)
    try:
        start = time.monotonic()
        q.write([Statement("A")], None)
        assert written.wait(5.0), "the queued write was never written"
        return at[0] - start
    finally:
        q.close()


def test_the_write_queue_waits_50_ms_for_a_batch() -> None:
    """rqlited's ``-write-queue-timeout`` defaults to 50 ms (every version followed): a lone
    queued write is written 50 ms after it came, not the 100 ms of ``service.go``'s own
    default. A timer only fires late, so the quickest of five tries shows the timeout."""
    delays = [_first_batch_delay() for _ in range(5)]
    assert min(delays) >= 0.05, delays
    assert min(delays) < 0.1, f"a lone write waited {min(delays):.3f} s at best: {delays}"
