"""Statement rendering: the lease clock, and values only ever as parameters."""

from __future__ import annotations

import pytest

from rqueue import Lease, Statements
from rqueue._models import Claim
from rqueue._statements import CLOCK_REF, NOW, SERVER_NOW, SERVER_UTC

HOSTILE = "g'); DROP TABLE messages; --"


def builders(s: Statements) -> list:
    lease = Lease(3, HOSTILE, "{}", HOSTILE)
    return [
        *s.publish(HOSTILE, HOSTILE, 2),
        *s.publish_dedup(HOSTILE, HOSTILE, 2, HOSTILE, 60.0),
        s.dedup_seq(HOSTILE),
        s.claim_lease(HOSTILE, 30.0, 1),
        s.claim_batch([Claim(HOSTILE, 30.0), Claim(HOSTILE, 5.0, lease)], 1),
        s.claim_read_back(HOSTILE),
        *s.ack(lease),
        *s.ack_batch([lease, lease]),
        *s.ack_and_claim(lease, HOSTILE, 30.0, 1),
        *s.nack(lease, 0, HOSTILE),
        *s.nack(lease, 5.0),
        s.extend(lease, 30.0),
        s.lookup(lease),
    ]


@pytest.mark.parametrize("server_clock", [True, False])
def test_values_are_parameters_never_sql(server_clock: bool) -> None:
    for stmt in builders(Statements(server_clock=server_clock, clock=lambda: 123.5)):
        assert HOSTILE not in stmt.sql
        assert "{now}" not in stmt.sql
        assert stmt.sql.count("?") == len(stmt.params)
        assert NOW not in stmt.params


def test_server_clock_writes_read_the_stamp_and_reads_the_node_clock() -> None:
    s = Statements(server_clock=True, clock=lambda: 1.0)
    stmt = s.extend(Lease(1, "g", "{}", "t"), 9.0)
    assert stmt.sql.count(CLOCK_REF) == 2 and SERVER_NOW not in stmt.sql
    assert stmt.params == (9.0, "g", 1, "t")
    assert s.needs_stamp([stmt]) and s.stamp() is not None
    assert SERVER_NOW in s.stamp().sql
    # a read: not replicated, the answering node's clock, in UTC (not the rewritten 'now')
    lookup = s.lookup(Lease(1, "g", "{}", "t"))
    assert SERVER_UTC in lookup.sql and SERVER_NOW not in lookup.sql
    assert not s.needs_stamp([lookup])


def test_worker_clock_binds_one_reading_per_statement() -> None:
    readings = iter([100.0, 200.0])
    s = Statements(server_clock=False, clock=lambda: next(readings))
    stmt = s.extend(Lease(1, "g", "{}", "t"), 9.0)
    assert stmt.params == (100.0, 9.0, "g", 1, "t", 100.0)
    assert SERVER_NOW not in stmt.sql


def test_mismatched_placeholders_are_caught() -> None:
    s = Statements(server_clock=True, clock=lambda: 0.0)
    with pytest.raises(AssertionError):
        s.stmt("SELECT ? + {now}", 1, 2)
    with pytest.raises(AssertionError):
        s.stmt("SELECT ?", 1, 2)
