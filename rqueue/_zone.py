"""Nodes whose rewritten time is off UTC: guarded in the stamp, detected, refused.

rqlite's rewriter (``command/sql/processor.go``, ``julianDay``) turns ``'now'`` into the
receiving node's *local* calendar time and never converts it to UTC, while SQLite's own
``'now'`` (``julianday()`` with no argument, which rqlite never rewrites: it rewrites
only calls with a first argument) is UTC. On a node whose zone is not UTC every stamp
(:data:`rqueue._render.STAMP`) is off by the zone's offset, and that offset moves by an
hour at a daylight-saving change in the middle of a run: after a spring-forward every
live lease looks expired (a second worker takes the group), after a fall-back a dead
worker's lease holds an hour longer; nodes in different zones disagree for good.

rqueue refuses such a node rather than correcting its time: a correction would need the
offset in force at the instant of each rewrite, which only the node knows; a transition
in flight makes any offset learned before it wrong for the request in flight, so an
in-transaction guard is needed either way; nodes may be in different zones; and the
operator can fix the cause once (``TZ=UTC``). Three parts:

* **The guard, in the stamp** (:func:`stamp`): the stamp writes the rewritten time only
  when it lies within :data:`BOUND` of a reference the client sends as a parameter, its
  estimate of the server's UTC time; otherwise its row id is a text, which SQLite
  refuses for an ``INTEGER PRIMARY KEY`` at run time (``datatype mismatch``), so the
  whole transaction rolls back, on ``/db/execute`` and ``/db/request`` alike (a run-time
  failure; see :mod:`rqueue._wire`). It depends only on literals the receiving node
  wrote into the statement and on the parameter, so every replica, and a replay of the
  log, decides alike; it needs no schema change. A request whose rewritten time jumped
  (a transition in flight) therefore applies nothing.
* **The reference** (:class:`ZoneGuard`): SQLite's own UTC, calibrated passively from
  every stamp's ``RETURNING`` (the applying node's ``julianday()``) and from each check,
  and advanced by this process's *monotonic* clock: the worker's wall clock (which the
  harness skews) plays no part.
* **The check** (:data:`MEASURE`): a strong read of ``julianday('now')`` (rewritten by
  the node that receives it) beside ``julianday()`` (the UTC of the node that runs it)
  measures a node's offset directly. It runs before the first timed call a node gets,
  and again after the guard fired there; a node off by more than :data:`BOUND` is refused
  for timed calls for :data:`RECHECK_AFTER` seconds, with one logged line naming the
  node, the offset and the cure, logged when the node's state changes (once per process,
  :class:`ZoneLog`), not at each check. When every node is refused a timed call raises
  :class:`~rqueue.ZoneRefused` with that line. Reads and untimed writes do not depend on
  a node's zone (rqueue's reads use ``julianday()``), so they go on.

:data:`BOUND` is 300 s: well below the smallest offset a zone or a transition makes
(zones are whole quarter hours; Lord Howe Island's daylight saving moves by 30 min) and
well above what else separates the reference from a node's rewritten time: clocks of
nodes and of this process (NTP: milliseconds; rqueue's lease margin assumes 0.25 s),
a request held by a paused node, round trips, and the monotonic clock's drift between
two calibrations.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ._exceptions import ProtocolError
from ._models import Result, Stmt
from ._render import SERVER_NOW, SERVER_UTC

log = logging.getLogger("rqueue")

#: seconds a node's rewritten time may differ from UTC (the guard's bound and the check's)
BOUND = 300.0
#: seconds a refused node stays refused before a timed call checks it again
RECHECK_AFTER = 30.0
#: the guard's refusal: SQLite's error for a text row id of an INTEGER PRIMARY KEY
GUARD_ERROR = "datatype mismatch"
_GUARD_ID = "'rqueue: the stamp is off the reference: node time off UTC'"
#: the stamp, guarded: the receiving node's rewritten time, written only within BOUND of
#: the reference (the one parameter); returns it and the applying node's UTC
GUARDED_STAMP = (
    "INSERT OR REPLACE INTO rqueue_clock (id, ts) VALUES ("
    f"CASE WHEN abs({SERVER_NOW} - ?) <= {BOUND} THEN 1 ELSE {_GUARD_ID} END, {SERVER_NOW}) "
    f"RETURNING ts, {SERVER_UTC} AS utc"
)
#: the check: the node's rewritten time beside SQLite's own UTC
MEASURE = Stmt(f"SELECT {SERVER_NOW} AS rewritten, {SERVER_UTC} AS utc")
CURE = "start rqlited with TZ=UTC, or give its container no /etc/localtime of another zone"


def stamp(reference: float | None) -> Stmt:
    """The guarded stamp for ``reference`` (None, not calibrated: the guard refuses)."""
    return Stmt(GUARDED_STAMP, (reference,))


def is_guard_failure(reason: str) -> bool:
    """Whether a failed request's reason is the guard's refusal (its first statement, the
    stamp, failed with :data:`GUARD_ERROR`)."""
    return reason.startswith("statement 0 failed:") and GUARD_ERROR in reason


def describe(offset: float) -> str:
    """An offset as a person reads it: ``+3600 s (+01:00)``."""
    minutes = round(offset / 60.0)
    sign = "+" if minutes >= 0 else "-"
    return f"{offset:+.0f} s ({sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d})"


def refusal(url: str, offset: float) -> str:
    """The one line that names a refused node, its offset and the cure."""
    return (
        f"rqueue: node {url} rewrites 'now' {describe(offset)} off UTC (its local time "
        f"zone is not UTC): refused for timed calls; {CURE}"
    )


class ZoneLog:
    """What this process last logged of each node's zone: a line when a node's state
    changes (refused, at an offset; accepted again), not one per check. Every transport
    of a process shares :data:`ZONE_LOG`, so a pool of workers logs a node once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: dict[str, int | None] = {}  # url -> offset in minutes (None: UTC)

    def changed(self, url: str, offset: float) -> bool:
        """Record ``url``'s measured ``offset``; whether that changes its logged state
        (a node not seen before counts as in UTC)."""
        state = round(offset / 60.0) if abs(offset) > BOUND else None
        with self._lock:
            before = self._state.get(url)
            self._state[url] = state
        return state != before


#: the zone states this process logged (shared by every ZoneGuard)
ZONE_LOG = ZoneLog()


class ZoneGuard:
    """The reference for the stamp's guard, and which nodes were checked or refused.
    Shared by a transport's calls; safe between threads."""

    def __init__(
        self, monotonic: Callable[[], float] = time.monotonic, zone_log: ZoneLog | None = None
    ) -> None:
        self.monotonic = monotonic
        #: what is logged of the nodes' zones (shared by the process's guards by default)
        self.log = ZONE_LOG if zone_log is None else zone_log
        self._lock = threading.Lock()
        self._offset: float | None = None  # server UTC minus monotonic()
        self._checked: dict[str, float] = {}  # url -> offset measured
        self._refused: dict[str, tuple[float, float]] = {}  # url -> (until, offset)

    # -- the reference -------------------------------------------------------------------
    def reference(self) -> float | None:
        """The server's UTC time now, as this process estimates it (None: not yet)."""
        offset = self._offset
        return None if offset is None else offset + self.monotonic()

    def stamp(self) -> Stmt:
        """The guarded stamp with the reference as of now."""
        return stamp(self.reference())

    def calibrate(self, utc: float) -> None:
        """Take SQLite's UTC time ``utc``, read just now (the answer's round trip is far
        inside :data:`BOUND`)."""
        self._offset = utc - self.monotonic()

    def calibrate_from(self, rows: Sequence[Sequence[Any]]) -> tuple[float, float]:
        """Calibrate from the answer to :data:`MEASURE`; its ``(rewritten, utc)``."""
        try:
            rewritten, utc = (float(v) for v in rows[0])
        except (IndexError, TypeError, ValueError) as exc:
            raise ProtocolError(f"time zone check: unreadable answer {rows!r}") from exc
        self.calibrate(utc)
        return rewritten, utc

    def observed(self, stamp_result: Result) -> None:
        """A stamp's answer (its ``RETURNING ts, utc``): calibrate from it."""
        if stamp_result.rows and len(stamp_result.rows[0]) == 2:
            utc = stamp_result.rows[0][1]
            if isinstance(utc, int | float):
                self.calibrate(float(utc))

    # -- the nodes -----------------------------------------------------------------------
    def check_due(self, url: str) -> bool:
        """Whether ``url`` must be checked before it gets a timed call."""
        with self._lock:
            refused = self._refused.get(url)
            if refused is not None and refused[0] <= self.monotonic():
                del self._refused[url]  # time to look again
            return url not in self._checked and url not in self._refused

    def refused(self, url: str) -> bool:
        with self._lock:
            refused = self._refused.get(url)
            return refused is not None and refused[0] > self.monotonic()

    def forget(self, url: str) -> None:
        """The guard fired at ``url``: check it again before its next timed call."""
        with self._lock:
            self._checked.pop(url, None)

    def measured(self, url: str, rows: Sequence[Sequence[Any]]) -> str | None:
        """The check's answer from ``url``: calibrate, and accept the node (None) or
        refuse it (the line, logged once)."""
        rewritten, utc = self.calibrate_from(rows)
        offset = rewritten - utc
        changed = self.log.changed(url, offset)
        with self._lock:
            if abs(offset) <= BOUND:
                self._checked[url] = offset
                self._refused.pop(url, None)
                if changed:
                    log.warning("rqueue: node %s rewrites 'now' in UTC again: accepted", url)
                return None
            self._checked.pop(url, None)
            self._refused[url] = (self.monotonic() + RECHECK_AFTER, offset)
        line = refusal(url, offset)
        if changed:
            log.error("%s", line)
        return line

    def all_refused(self, urls: Sequence[str]) -> str | None:
        """When every node of ``urls`` is refused: one line naming them all (else None)."""
        with self._lock:
            now = self.monotonic()
            found = [self._refused.get(u) for u in urls]
        offsets = [r[1] for r in found if r is not None and r[0] > now]
        if len(offsets) < len(urls):
            return None
        if len(urls) == 1:
            return refusal(urls[0], offsets[0])
        nodes = ", ".join(f"{u} {describe(o)}" for u, o in zip(urls, offsets, strict=True))
        return (
            f"rqueue: every node rewrites 'now' off UTC (their local time zones are not "
            f"UTC), so none takes a timed call: {nodes}; {CURE}"
        )
