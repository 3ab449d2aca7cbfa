"""``ack_and_claim`` on the shared 3-node cluster, both twins: one transaction that acks
and claims, whose claim runs only if the ack took effect.

Each test starts from empty tables (``queue_urls``). Waits on lease time are bounded
polls on the condition under test.
"""

from __future__ import annotations

from typing import Any

import pytest

from rqueue import Lease, LeaseLost

from .polling import query, wait_for

VIS = 30.0
HELD = "SELECT count(*) FROM groups WHERE locked_by IS NOT NULL"


def lapsed_and_reclaimed(connect: Any, urls: list[str]) -> tuple[Any, Lease, Any, Lease]:
    """Worker "slow" leases group g's message briefly; "fast" re-claims it once lapsed.
    Then group h gets a message: something a wrongly run claim could take."""
    t = connect(",".join(urls))
    other = connect(",".join(reversed(urls)))
    t.publish("g", "{}")
    old = t.claim("slow", 0.3)
    new = wait_for("the lapsed lease to be re-claimed", lambda: other.claim("fast", VIS))
    assert new.seq == old.seq
    t.publish("h", "{}")
    return t, old, other, new


def test_acks_then_leases_the_next_message_in_fifo_and_round_robin_order(connect, queue_urls):
    t = connect(",".join(queue_urls))
    a1, a2 = t.publish("a", '"a1"'), t.publish("a", '"a2"')
    b1 = t.publish("b", '"b1"')
    first = t.claim("w", VIS)
    assert first.seq == a1
    second = t.ack_and_claim(first, "w", VIS)
    assert second.seq == b1  # group a was just claimed: b is next in round-robin
    third = t.ack_and_claim(second, "w", VIS)
    assert third.seq == a2 and third.token != first.token
    assert t.ack_and_claim(third, "w", VIS) is None  # acked; nothing left to claim
    assert query(queue_urls, "SELECT count(*) FROM messages") == [(0,)]
    assert query(queue_urls, "SELECT count(*) FROM groups") == [(0,)]


def test_the_next_message_of_the_same_group_is_claimable_at_once(connect, queue_urls):
    t = connect(",".join(queue_urls))
    seqs = [t.publish("only", f'"{i}"') for i in range(4)]
    lease = t.claim("w", VIS)
    got = [lease.seq]
    while (lease := t.ack_and_claim(lease, "w", VIS)) is not None:
        got.append(lease.seq)
    assert got == seqs


def test_priority_floor_applies_to_the_claim(connect, queue_urls):
    t = connect(",".join(queue_urls))
    t.publish("low", "{}", priority=0)
    t.publish("high", "{}", priority=3)
    t.publish("high", "{}", priority=3)
    lease = t.claim("w", VIS, min_priority=3)
    nxt = t.ack_and_claim(lease, "w", VIS, min_priority=3)
    assert nxt.group_id == "high"
    assert t.ack_and_claim(nxt, "w", VIS, min_priority=3) is None
    assert t.claim("w", VIS).group_id == "low"


def test_a_lost_lease_changes_nothing_and_claims_nothing(connect, queue_urls):
    """The row still exists, leased to another worker: LeaseLost, and no lease taken."""
    t, old, _, _ = lapsed_and_reclaimed(connect, queue_urls)
    with pytest.raises(LeaseLost) as caught:
        t.ack_and_claim(old, "slow", VIS)
    assert not caught.value.acked
    assert query(queue_urls, HELD) == [(1,)]  # only the new holder's lease
    assert t.claim("w", VIS).group_id == "h"


def test_no_claim_when_another_holders_ack_already_removed_the_row(connect, queue_urls):
    """The case a "row is gone" guard would get wrong: our lease lapsed, the next holder
    acked the message, then our fused call arrives. Our delete matches nothing, so the
    chained claim must not run even though the row is gone."""
    t, old, other, new = lapsed_and_reclaimed(connect, queue_urls)
    other.ack(new)
    with pytest.raises(LeaseLost):
        t.ack_and_claim(old, "slow", VIS)
    assert query(queue_urls, HELD) == [(0,)]
    assert t.claim("w", VIS).group_id == "h"


def test_bad_arguments_are_refused_before_anything_is_sent(connect, queue_urls):
    t = connect(",".join(queue_urls))
    t.publish("g", "{}")
    lease = t.claim("w", VIS)
    with pytest.raises(ValueError, match="visibility"):
        t.ack_and_claim(lease, "w", 0)
    with pytest.raises(ValueError, match="worker_id"):
        t.ack_and_claim(lease, "", VIS)
    with pytest.raises(TypeError):
        t.ack_and_claim("not a lease", "w", VIS)
    assert t.ack_and_claim(lease, "w", VIS) is None  # the lease was not touched


def test_old_protocol_acks_then_claims(connect, queue_urls, monkeypatch):
    """Without /db/request: the ack, then the three-request claim."""
    t = connect(",".join(queue_urls), assume_version="v8.0.0")
    t.publish("g", '"a"')
    t.publish("g", '"b"')
    lease = t.ack_and_claim(t.claim("w", VIS), "w", VIS)
    assert lease.event == '"b"'
    assert t.ack_and_claim(lease, "w", VIS) is None
