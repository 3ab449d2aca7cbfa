"""What reading the rewritten 'now' in the node's local time zone costs a statement.

Prints microseconds per :func:`harness.node.sql.rewrite.process` call (min of ``--repeat``
runs of ``--number`` calls, the cases interleaved so that a loaded machine slows them
alike) for a claim-like UPDATE with two ``'now'`` and a parameterised INSERT with one:

- ``no zone``: ``utc_offset=None``, the code path before local time zones;
- ``UTC``: the node's clock in UTC (``TZ=UTC``, what the harness's clusters run);
- ``Europe/Berlin``: a zone with transitions, its offset cached for the current second;
- ``uncached``: the same zone asked afresh on every call (what the cache saves).

Usage: ``python benchmarks/rewrite_clock_bench.py [--number 20000] [--repeat 9]``
"""

from __future__ import annotations

import argparse
import functools
import timeit
from collections.abc import Callable

from harness.node.clock import OffsetClock
from harness.node.localzone import LocalZone, resolve
from harness.node.sql.rewrite import process

CLAIM = (
    "UPDATE jobs SET owner = ?, lease_until = julianday('now') + ? "
    "WHERE id = ? AND (owner IS NULL OR lease_until < julianday('now'))"
)
INSERT = "INSERT INTO jobs(a, due) VALUES (?, julianday('now'))"


def _uncached(zone: LocalZone) -> Callable[[int], int]:
    def offset(second: int) -> int:
        zone._cached = (None, 0)  # forget the cached second
        return zone.offset(second)

    return offset


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--number", type=int, default=20000, help="calls per run")
    p.add_argument("--repeat", type=int, default=9, help="runs per case (the min is shown)")
    args = p.parse_args(argv)
    clock = OffsetClock()
    berlin = resolve({"TZ": "Europe/Berlin"})
    if berlin.is_utc:
        raise SystemExit("Europe/Berlin is not in /usr/share/zoneinfo: cannot compare")
    zones: dict[str, Callable[[int], int] | None] = {
        "no zone": None,
        "UTC": LocalZone.utc().offset,
        "Europe/Berlin": berlin.offset,
        "uncached": _uncached(resolve({"TZ": "Europe/Berlin"})),
    }
    for label, sql, params in (("claim UPDATE, 2 x now", CLAIM, 3), ("INSERT, 1 x now", INSERT, 1)):
        best = dict.fromkeys(zones, float("inf"))
        for _ in range(args.repeat):
            for name, off in zones.items():
                call = functools.partial(
                    process, sql, now=clock.now, utc_offset=off, positional=params
                )
                t = timeit.timeit(call, number=args.number)
                best[name] = min(best[name], t / args.number * 1e6)
        cells = "  ".join(f"{name} {us:5.2f} µs" for name, us in best.items())
        print(f"{label:<22} {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
