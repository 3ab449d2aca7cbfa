"""What idempotent writes cost on the wire: statements, requests and body bytes per call.

    PYTHONPATH=. python benchmarks/idempotency_cost.py [--version v10.2.7]

Captures the first request each operation's core generator yields (and the requests it
makes on its common path, every answer as a healthy server gives it), for rqueue and
for ``mutant-no-idempotency`` (rqueue's statements before its writes were made
idempotent), and prints statements and JSON body bytes per operation, with the time
stamp counted. A keyed publish also forgets expired keys once in
:data:`rqueue._core.PURGE_EVERY` publishes: that statement is shown apart.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from harness.subjects.mutants import NoIdempotencyStatements
from rqueue import Lease
from rqueue._core import PURGE_EVERY, QueueCore
from rqueue._many import ack_many, claim_many
from rqueue._models import HttpCall, Op
from rqueue._statements import Statements
from rqueue._version import ServerInfo

GROUP, EVENT = "orders-42", json.dumps({"kind": "bench", "pad": "x" * 32})


def first_call(op: Op[Any]) -> HttpCall:
    """The operation's first write (its time zone read skipped)."""
    call = next(op)
    while call.path == "/db/query":
        call = op.send(())
    return call


def operations(core: QueueCore) -> dict[str, Callable[[], Op[Any]]]:
    lease = Lease(1234567, GROUP, EVENT, "bench-worker-3:" + "0" * 32)
    other = Lease(1234568, "orders-43", EVENT, "bench-worker-3:" + "1" * 32)
    return {
        "publish": lambda: core.publish(GROUP, EVENT, 0, None),
        "publish (dedup id)": lambda: core.publish(GROUP, EVENT, 0, "dedup-" + "7" * 32),
        "publish_many (100)": lambda: core.publish_many([(GROUP, EVENT, 0)] * 100),
        "claim": lambda: core.claim("bench-worker-3", 600.0, 0),
        "claim_many (10)": lambda: claim_many(core, "bench-worker-3", 600.0, 0, 10),
        "ack": lambda: core.ack(lease),
        "ack_and_claim": lambda: core.ack_and_claim(lease, "bench-worker-3", 600.0, 0),
        "ack_many (2)": lambda: ack_many(core, [lease, other]),
        "nack": lambda: core.nack(lease, 0.0),
        "extend": lambda: core.extend(lease, 600.0),
    }


def measure(statements: type[Statements], version: str) -> dict[str, tuple[int, int]]:
    """(statements, body bytes) of each operation's first write."""
    out: dict[str, tuple[int, int]] = {}
    for name in operations(_core(statements, version)):
        # a fresh core per operation whose purge is not due (the common request)
        core = _core(statements, version)
        core._keyed_writes = 1
        call = first_call(operations(core)[name]())
        body = json.dumps(call.body()).encode()
        out[name] = (len(call.statements), len(body))
    return out


def _core(statements: type[Statements], version: str) -> QueueCore:
    made = statements(server_clock=True, clock=lambda: 0.0)
    return QueueCore(made, ServerInfo.from_version(version))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="v10.2.7", help="the server's version (v10.2.7)")
    args = ap.parse_args()
    before = measure(NoIdempotencyStatements, args.version)
    after = measure(Statements, args.version)
    print(f"rqlite {args.version}: statements (with the stamp) and JSON body bytes per request")
    print(f"{'operation':<20} {'before':>14} {'after':>14} {'bytes +':>8}")
    for name in before:
        (sb, bb), (sa, ba) = before[name], after[name]
        print(f"{name:<20} {sb:>3} st {bb:>6} B {sa:>3} st {ba:>6} B {ba - bb:>+8}")
    purge = _core(Statements, args.version).statements.purge_keys(3600.0)
    print(f"plus, once in {PURGE_EVERY} keyed publishes: {purge.sql}")


if __name__ == "__main__":
    main()
