"""The lease clock on servers that cannot stamp time: the leader's clock, read over HTTP.

rqlite before 8.33 evaluates ``julianday('now')`` in a write on every replica when it
applies the entry (and again when a restarted node replays its log), so a time function
in a write makes the replicas diverge. rqueue then binds the time as a parameter. Which
time? Not the worker's wall clock: workers' clocks jump and drift apart, and a lease
stamped by one and checked by another would follow both. :class:`LeaderClock` reads the
leader's clock once (``SELECT`` of the server time, answered by the leader), notes the
worker's *monotonic* clock around that read, and from then on tells the leader's time as
``server time + monotonic time elapsed``. A step of the worker's wall clock changes
nothing. It reads again every ``resync_every`` seconds and after an error that may mean a
new leader, so what remains is the difference between node clocks (which
``clock_tolerance`` bounds) and half the read's round trip.

Sans-IO: :meth:`LeaderClock.sample` is the read to send; :meth:`LeaderClock.record` takes
the monotonic times around it and the answer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ._exceptions import ProtocolError
from ._models import Result, Stmt

log = logging.getLogger("rqueue")

#: the server's wall clock in epoch seconds: SQLite's own UTC (millisecond resolution;
#: ``julianday()`` without ``'now'``, which rqlite >= 8.33 would rewrite in the receiving
#: node's local time in a strong read)
SERVER_TIME_READ = Stmt("SELECT (julianday() - 2440587.5) * 86400.0 AS now")
#: how often a transport re-reads the leader's clock when nothing went wrong
DEFAULT_RESYNC_EVERY = 10.0
#: reads tried per sync when a round trip is too slow to place the server's reading
MAX_SAMPLES = 3


class LeaderClock:
    """The leader's clock as ``offset + monotonic()``, re-measured now and then."""

    def __init__(
        self,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        resync_every: float = DEFAULT_RESYNC_EVERY,
        max_error: float = 0.05,
    ) -> None:
        #: the worker's monotonic clock (injectable for tests)
        self.monotonic = monotonic
        self.resync_every = resync_every
        #: a reading whose round trip exceeds twice this is retried (up to MAX_SAMPLES)
        self.max_error = max_error
        self._lock = threading.Lock()
        self._offset: float | None = None
        self._synced_at = 0.0
        self._suspect = False
        #: half the round trip of the reading in use: how far ``now()`` may be off
        self.error = 0.0

    # -- state --------------------------------------------------------------------------
    def due(self) -> bool:
        """True when the next timed operation should read the leader's clock first."""
        if self._offset is None or self._suspect:
            return True
        return self.monotonic() - self._synced_at >= self.resync_every

    def suspect(self) -> None:
        """An error that may mean a new leader: read its clock before the next use."""
        self._suspect = True

    def now(self) -> float:
        """The leader's time, in epoch seconds, as this worker estimates it."""
        offset = self._offset
        if offset is None:
            raise RuntimeError("LeaderClock.now() before the leader's clock was read")
        return offset + self.monotonic()

    # -- one reading ----------------------------------------------------------------------
    def sample(self) -> tuple[Stmt, ...]:
        """The read whose answer is the server's time."""
        return (SERVER_TIME_READ,)

    def record(self, sent: float, received: float, results: tuple[Result, ...]) -> bool:
        """Take one reading: monotonic times around the read, and its answer.

        Returns True when the reading was precise enough (round trip within twice
        ``max_error``); a less precise one is kept only if it is the best so far.
        """
        try:
            server = float(results[0].rows[0][0])
        except (IndexError, TypeError, ValueError) as exc:
            raise ProtocolError(f"clock sync: unreadable server time {results!r}") from exc
        half = max(0.0, received - sent) / 2.0
        with self._lock:
            fresh = self._offset is None or self._suspect or self._stale(received)
            if fresh or half <= self.error:
                self._offset = server - (sent + half)
                self.error = half
                self._synced_at = received
                self._suspect = False
        return half <= self.max_error

    def _stale(self, at: float) -> bool:
        return at - self._synced_at >= self.resync_every

    def gave_up(self) -> None:
        """Every reading of one sync was slow: say so (the best one is in use)."""
        log.warning(
            "rqueue: the leader's clock is known only to +-%.3f s (slow round trips); "
            "that counts against clock_tolerance",
            self.error,
        )
