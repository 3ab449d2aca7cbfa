"""The statistics of a checked history: counts, latencies, and availability (how long
after each fault the next lease came)."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from ..history import fault_intervals
from .model import INF, HistoryModel, Lease
from .stalls import stalls

_ci = attrgetter("ci")


def statistics(h: HistoryModel, events: Sequence[dict]) -> dict[str, Any]:
    """Counts, latencies and availability (time from each fault to the next lease)."""
    ops: dict[str, dict[str, int]] = {}
    for (f, typ), n in sorted(h.ops.items()):
        if f not in ops:
            ops[f] = {"ok": 0, "fail": 0, "info": 0, "open": 0}

        ops[f][typ] = n
    leased = {x.msg for x in h.leases}
    return {
        "published": len(h.pub_ok),
        "delayed": len(h.delayed),
        "acked": len(h.acked),
        "redeliveries": len(h.leases) - len(leased),
        "leases": len(h.leases),
        "empty_claims": h.empty_claims,
        "dead_lettered": len(h.dead_lettered),
        "refusals": refusals(events),
        "events": len(events),
        "duration": h.duration,
        "ops": ops,
        "latency": {f: _percentiles(v) for f, v in sorted(h.latencies.items()) if v},
        "availability": availability(h.leases, fault_intervals(h.nemesis)),
        "stalls": stalls(events),
    }


#: distinct refusal lines kept in the statistics (the most frequent first)
MAX_REFUSAL_LINES = 10


def refusals(events: Sequence[dict]) -> dict[str, Any]:
    """The calls the queue refused on purpose (``fail`` events marked ``refused``): how
    many, and each distinct ``error`` line with its count and its first and last time."""
    lines: dict[str, dict[str, Any]] = {}
    count = 0
    for e in events:
        if e.get("refused") is True and e["type"] == "fail" and type(e["process"]) is int:
            count += 1
            line = str(e.get("error") or "refused")
            seen = lines.get(line)
            if seen is None:
                lines[line] = {"count": 1, "first": e["time"], "last": e["time"]}
            else:
                seen["count"] += 1
                seen["last"] = e["time"]
    ranked = sorted(lines.items(), key=lambda kv: (-kv[1]["count"], kv[1]["first"]))
    return {"count": count, "lines": dict(ranked[:MAX_REFUSAL_LINES])}


def _percentiles(values: list[float]) -> dict[str, float]:
    values.sort()
    n = len(values)
    return {
        "p50": round(values[(n - 1) // 2], 6),
        "p99": round(values[min(n - 1, math.ceil(0.99 * n) - 1)], 6),
        "max": round(values[-1], 6),
    }


def availability(leases: list[Lease], faults: list) -> list[dict[str, Any]]:
    """For each fault, the first lease whose claim was invoked once the fault was in
    place (its start action completed), and how long after the fault's start it
    returned: claims sent in the moments before a partition's rules bite do not count."""
    ordered = sorted(leases, key=_ci)
    starts = [x.ci for x in ordered]
    first_ok = [INF] * (len(ordered) + 1)
    for i in range(len(ordered) - 1, -1, -1):
        first_ok[i] = min(ordered[i].co, first_ok[i + 1])
    out = []
    for fault in faults:
        in_effect = fault.start if fault.in_effect is None else fault.in_effect
        t = first_ok[bisect_left(starts, in_effect)]
        out.append(
            {
                "kind": fault.kind,
                "label": fault.label,
                "index": fault.start_index,
                "start": fault.start,
                "end": fault.end,
                "next_lease": None if t == INF else t,
                "recovery": None if t == INF else round(t - fault.start, 6),
            }
        )
    return out
