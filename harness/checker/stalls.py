"""Stalls: a second or more outside every fault window in which no client operation
completed, each with what the clients were waiting on (a stall just after a fault ends,
a restarted node's election, say, is outside its window, and named).

A stall with operations in flight is the queue's (or the cluster's): the clients had
sent requests that did not come back. One with nothing in flight is the clients' own:
they sent nothing (a worker pausing, a harness thread starved of CPU). Either way a
reader of the throughput plot can tell why the line fell to nothing where no fault was.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..history import fault_intervals, pairs

#: the shortest gap without a completion that is named
MIN_STALL = 1.0
#: seconds after a fault's end still counted as its window (none: what follows the end,
#: a restarted node's return included, is the cluster's own doing)
RECOVERY = 0.0


def stalls(events: Sequence[dict], min_stall: float = MIN_STALL) -> list[dict[str, Any]]:
    """Every gap of ``min_stall`` seconds or more between two completions of client
    operations, within the workload, that overlaps no fault window extended by
    :data:`RECOVERY`; each with the operations the clients waited on (sent before its
    middle, not back before its end; by ``f``) and when the oldest of them was sent."""
    ops = list(pairs(events))
    done = sorted(c["time"] for _, c in ops if c is not None)
    if len(done) < 2:
        return []
    shadows = [
        (f.start, (f.end if f.end is not None else done[-1]) + RECOVERY)
        for f in fault_intervals(events)
    ]
    out = []
    for a, b in itertools.pairwise(done):
        if b - a < min_stall or any(s < b and a < e for s, e in shadows):
            continue
        mid = (a + b) / 2  # sent by then and not back before the end: what was waited on
        waiting = [inv for inv, c in ops if inv["time"] < mid and (c is None or c["time"] >= b)]
        out.append(
            {
                "start": round(a, 6),
                "end": round(b, 6),
                "seconds": round(b - a, 6),
                "in_flight": dict(sorted(Counter(inv["f"] for inv in waiting).items())),
                "oldest_sent": min((inv["time"] for inv in waiting), default=None),
            }
        )
    return out


def describe(stall: dict[str, Any]) -> str:
    """One line: when, how long, and what the clients were waiting on."""
    when = f"{stall['start']:.2f}-{stall['end']:.2f} s ({stall['seconds']:.2f} s)"
    flight = stall.get("in_flight") or {}
    if not flight:
        return f"{when}: nothing in flight: the clients sent nothing (a client-side stall)"
    what = ", ".join(f"{n} {f}" for f, n in flight.items())
    oldest = stall.get("oldest_sent")
    since = "" if oldest is None else f", the oldest sent at {oldest:.2f} s"
    return f"{when}: waiting on the cluster: {what} in flight{since}"


__all__ = ["MIN_STALL", "RECOVERY", "describe", "stalls"]
