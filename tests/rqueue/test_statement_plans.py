"""Every statement rqueue writes finds its rows by index on the SQLite the node carries
(apsw's, 3.54 here, as rqlite's go-sqlite3 is): none scans the whole ``groups`` or
``messages`` table, so a claim's or an ack's cost does not grow with the backlog.

The stdlib's older SQLite plans some statements differently (it kept the fused claim on
its key where 3.54 scanned every group row against it), so the plans are read from apsw.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import apsw
import pytest

from rqueue import _schema
from rqueue._models import Claim, Lease
from rqueue._render import STAMP
from rqueue._statements import Statements

WHOLE_TABLE = re.compile(r"^SCAN (groups|messages|m|g)$")


def _db() -> apsw.Connection:
    db = apsw.Connection(":memory:")
    for s in (*_schema.TABLES, *_schema.INDEXES, *_schema.COUNTERS):
        db.execute(s.sql, s.params)
    db.execute(STAMP.sql, STAMP.params)
    return db


def _statements(idempotency: bool) -> Statements:
    st = Statements(server_clock=True, clock=time.time)
    st.idempotency = idempotency
    return st


LEASE = Lease(1, "g1", "{}", "t-1")
LEASE_2 = Lease(2, "g2", "{}", "t-2")
CLAIMS = [Claim("t-3", 30.0), Claim("t-4", 30.0, after_ack=LEASE)]
BUILDERS: dict[str, Callable[[Statements], list]] = {
    "claim_lease": lambda st: [st.claim_lease("t", 30.0, 0)],
    "claim_returning": lambda st: [st.claim_returning("t", 30.0, 0)],
    "claim_batch": lambda st: [st.claim_batch(CLAIMS, 0)],
    "ack": lambda st: st.ack(LEASE),
    "ack_batch": lambda st: st.ack_batch([LEASE, LEASE_2]),
    "ack_and_claim": lambda st: st.ack_and_claim(LEASE, "t-5", 30.0, 0),
    "nack": lambda st: st.nack(LEASE, 0.0, "boom"),
    "nack parked": lambda st: st.nack(LEASE, 5.0),
    "extend": lambda st: [st.extend(LEASE, 30.0), st.extend_returning(LEASE, 30.0)],
    "publish": lambda st: st.publish("g1", "{}", 0),
    "publish_keyed": lambda st: st.publish_keyed("g1", "{}", 0, key="k"),
}


@pytest.mark.parametrize("idempotency", [True, False], ids=["idempotent", "mutant"])
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_no_statement_scans_a_whole_queue_table(name: str, idempotency: bool) -> None:
    db = _db()
    for stmt in BUILDERS[name](_statements(idempotency)):
        plan = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {stmt.sql}", stmt.params)]
        scans = [step for step in plan if WHOLE_TABLE.match(step)]
        assert not scans, f"{name}: {scans} in\n" + "\n".join(plan) + f"\nfor {stmt.sql}"


def test_the_check_sees_a_scan() -> None:
    """The pattern matches what SQLite prints for a statement that reads every row."""
    sql = 'EXPLAIN QUERY PLAN UPDATE "groups" SET deliveries = 0'
    plan = [row[3] for row in _db().execute(sql)]
    assert any(WHOLE_TABLE.match(step) for step in plan), plan
