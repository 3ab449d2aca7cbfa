"""``extend`` returns the extended lease; ``.server`` shows the features in use.

The core's decisions scripted call by call, then both twins on the shared cluster, on
the current protocol and on the old one (``assume_version``: no RETURNING, leader clock).
"""

from __future__ import annotations

import time

import pytest

from rqueue import Lease, LeaseLost, OutcomeUnknown, Unavailable
from rqueue._models import Result

from .polling import query
from .test_core_decisions import Script, core, own

VIS = 30.0
LEASE = Lease(7, "g", "{}", "w:tok", expires_at=50.0, origin="q")
EXPIRY = ("lock_expiry",)


def test_extend_returns_the_expiry_its_update_returned() -> None:
    s = Script(core().extend(LEASE, 60.0))
    (stmt,) = own(s.call)
    assert s.call.mergeable and stmt.sql.endswith("RETURNING lock_expiry")
    s.send(Result(EXPIRY, ((110.0,),)))
    assert s.done and s.value == LEASE and s.value.expires_at == 110.0
    assert (s.value.token, s.value.origin) == (LEASE.token, LEASE.origin)
    assert LEASE.expires_at == 50.0  # the lease given is left as it was


def test_extend_that_returned_no_row_is_lease_lost() -> None:
    s = Script(core().extend(LEASE, 60.0))
    with pytest.raises(LeaseLost):
        s.send(Result(EXPIRY, ()))


def test_extend_run_as_a_plain_write_or_on_an_old_server_reads_the_expiry_back() -> None:
    for version, returning in (("v8.36.0", True), ("v8.0.0", False)):
        s = Script(core(version).extend(LEASE, 60.0))
        assert own(s.call)[0].sql.endswith("RETURNING lock_expiry") is returning
        s.send(Result(rows_affected=1))  # applied, no rows: read lock_expiry back
        assert s.call.path == "/db/query"
        assert s.call.statements[0].params == (LEASE.group_id, LEASE.seq, LEASE.token)
        s.send(Result(EXPIRY, ((110.0,),)))
        assert s.done and s.value.expires_at == 110.0


def test_extend_applied_but_expiry_unreadable_returns_the_lease_without_one() -> None:
    """The extend took effect: no error, but the new deadline is unknown (None)."""
    s = Script(core("v8.0.0").extend(LEASE, 60.0))
    s.send(Result(rows_affected=1))
    s.throw(Unavailable("no leader"))
    assert s.done and s.value == LEASE and s.value.expires_at is None


def test_extend_after_an_unknown_outcome_returns_the_retried_expiry() -> None:
    s = Script(core().extend(LEASE, 60.0))
    s.throw(OutcomeUnknown("timeout"))
    assert s.call.path == "/db/query"  # the lookup: still ours and live, so retry
    s.send(Result(("locked_by", "live"), ((LEASE.token, 1),)))
    s.send(Result(EXPIRY, ((111.0,),)))
    assert s.done and s.value.expires_at == 111.0


@pytest.mark.parametrize("version", [None, "v8.0.0"], ids=["current", "old-protocol"])
def test_extend_returns_the_extended_lease(connect, queue_urls, version) -> None:
    t = connect(",".join(queue_urls), **({"assume_version": version} if version else {}))
    t.publish("g", "{}")
    lease = t.claim("w", VIS)
    assert lease is not None and lease.expires_at is not None
    before = time.time()
    longer = t.extend(lease, 2 * VIS)
    assert isinstance(longer, Lease) and longer == lease and longer.token == lease.token
    assert longer.expires_at == pytest.approx(before + 2 * VIS, abs=1.0)
    assert longer.expires_at > lease.expires_at + VIS / 2
    [(stored,)] = query(queue_urls, "SELECT lock_expiry FROM groups WHERE head_seq = ?", lease.seq)
    assert longer.expires_at == stored
    t.ack(longer)  # the returned lease settles the message like the one it replaces
    assert t.claim("w", VIS) is None


@pytest.mark.parametrize(
    ("options", "features"),
    [
        ({}, ("one-request claims", "server clock", "strong reads")),
        ({"assume_version": "v8.0.0"}, ("three-request claims", "leader clock", "strong reads")),
        ({"clock": time.time, "server_clock": False}, ("one-request claims", "caller's clock")),
    ],
    ids=["current", "old-protocol", "own-clock"],
)
def test_server_shows_the_version_and_the_features_in_use(
    connect, queue_urls, options, features
) -> None:
    t = connect(",".join(queue_urls), **options)
    assert t.server.features[: len(features)] == features
    shown = repr(t.server)
    assert str(t.server.version) in shown and all(f in shown for f in features)
    assert str(t.server).startswith(f"{t.server.version}: {features[0]}")
