"""What sending text as text costs on the common path: building request bodies.

    python benchmarks/wire_bench.py [--rounds 15] [--number 2000]

Every statement rqueue sends goes through :func:`rqueue._text.wire` (a ``str`` parameter
that rqlite >= 8.31 could take for a blob literal goes as its bytes). This times the
bodies of a claim, a publish, a dedup publish and a nack with an error, with ordinary
text, as the transports build them (``request_target``, and a merged fragment),
against the body built as before (``[sql, *params]`` for each statement), and prints
the ratio; then the same with blob-shaped text (the rare path), for scale.
"""

from __future__ import annotations

import argparse
import json
import time
import timeit
from collections.abc import Callable

from rqueue import Lease
from rqueue._batch import fragment, request_path, request_target
from rqueue._config import Settings
from rqueue._models import HttpCall
from rqueue._version import ServerInfo


def calls(group: str, worker: str, error: str) -> dict[str, HttpCall]:
    """The calls of four operations, captured from the core's generators."""
    core = Settings.build("http://n:4001", max_deliveries=5).core(
        ServerInfo.from_version("v10.2.7"), __import__("rqueue").Statements
    )
    if core.zone is not None:  # the stamp's reference, as a transport has it once open
        core.zone.calibrate(time.time())
    lease = Lease(7, group, '{"n": 1}', f"{worker}:0123456789abcdef0123456789abcdef")
    ops = {
        "claim": core.claim(worker, 30.0, 0),
        "publish": core.publish(group, '{"n": 1, "text": "it is"}', 0, None),
        "publish+dedup": core.publish(group, '{"n": 1}', 0, "order-1234"),
        "nack+error": core.nack(lease, 0.0, error),
    }
    out = {name: next(op) for name, op in ops.items()}
    assert all(c.stamped for c in out.values()), "each operation's own request"
    return out


def before(call: HttpCall) -> tuple[str, bytes]:
    """The path and body as rqueue built them before :mod:`rqueue._text`."""
    if any(s.params for s in call.statements):
        return request_path(call), json.dumps(
            [[s.sql, *s.params] for s in call.statements]
        ).encode()
    return request_path(call), json.dumps([s.sql for s in call.statements]).encode()


def best(fns: list[Callable[[], object]], number: int, rounds: int) -> list[float]:
    """For each of ``fns``, the best over ``rounds`` of the mean time of one call, in
    microseconds of this process's CPU time; the rounds alternate between the functions,
    so load on a shared machine falls on all of them alike, and the minimum is the
    least disturbed."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, out in zip(fns, times, strict=True):
            out.append(timeit.timeit(fn, number=number, timer=time.process_time) / number * 1e6)
    return [min(t) for t in times]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--number", type=int, default=2000)
    a = p.parse_args()
    print(
        f"{'call':<15}{'text':<13}{'before µs':>10}{'after µs':>10}{'ratio':>8}{'fragment µs':>13}"
    )
    for text, (group, worker, error) in {
        "ordinary": ("orders-42", "worker-7", "timeout talking to the payment service"),
        "blob-shaped": ("x'41'", "x'4142'", " X'00'"),
    }.items():
        for name, call in calls(group, worker, error).items():
            assert json.loads(request_target(call)[1]) == json.loads(before(call)[1]) or (
                text != "ordinary"
            )
            old, new, frag = best(
                [
                    lambda c=call: before(c),
                    lambda c=call: request_target(c),
                    lambda c=call: fragment(c),
                ],
                a.number,
                a.rounds,
            )
            print(f"{name:<15}{text:<13}{old:>10.2f}{new:>10.2f}{new / old:>8.3f}{frag:>13.2f}")


if __name__ == "__main__":
    main()
