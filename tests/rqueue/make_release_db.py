"""Write the database a release of rqueue leaves behind, for the migration test.

Run it inside a copy of the *old* release (its ``rqueue`` and ``tests``)::

    git archive RELEASE rqueue tests | tar -x -C /tmp/old
    cp tests/rqueue/make_release_db.py /tmp/old/
    (cd /tmp/old && PYTHONPATH=. python make_release_db.py OUT.json)

It drives that release's core over the tests' SQLite executor (no server needed) through
one state of each kind: a live lease, a park, a lapsed lease, messages that count a
delivery, groups of two priorities, an emptied group, dead letters, a dedup record;
then dumps the database (SQL text) and the leases it holds.
"""

from __future__ import annotations

import dataclasses
import json
import sys

from tests.rqueue.fakes import SqliteExecutor
from tests.rqueue.test_core_semantics import Queue


def main(out: str) -> None:
    ex = SqliteExecutor()
    q = Queue(ex)
    for group, n, priority in (("a", 3, 0), ("b", 2, 0), ("c", 1, 0), ("d", 2, 2), ("e", 1, 0)):
        for i in range(n):
            q.publish(group, json.dumps(f"{group}{i}"), priority)
    q.publish("f", '"f0"', 0, dedup_id="once")
    q.ack(q.claim())  # a0 acked: group a moves on to a1
    leases = {"held": q.claim(visibility=600.0)}  # b0
    q.nack(q.claim(), 300.0)  # c0 parked
    q.nack(q.claim(), 0.0)  # d0 free again, one delivery counted
    leases["lapsed"] = q.claim(visibility=1.0)  # e0
    q.core.statements.max_deliveries = 1
    q.nack(q.claim(), 0.0)  # f0: one delivery, the limit
    q.ack(q.claim())  # moves f0 to the dead letters (group f dropped), then acks a1
    q.core.statements.max_deliveries = None
    q.clock.now += 10.0  # the lapsed lease lapses, the park does not
    dump = list(ex.conn.iterdump())
    state = {
        "clock": q.clock.now,
        "leases": {k: dataclasses.asdict(v) for k, v in leases.items()},
        "dump": dump,
    }
    with open(out, "w") as f:
        json.dump(state, f, indent=0)


if __name__ == "__main__":
    main(sys.argv[1])
