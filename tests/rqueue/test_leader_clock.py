"""The lease clock on servers without time rewriting: the leader's clock, read over HTTP.

Unit tests of :class:`LeaderClock` and of the core's use of it (no I/O), then the
transports on a real cluster told to speak the old protocol (``assume_version``).
"""

from __future__ import annotations

import time

import pytest

from rqueue import Lease, Statements
from rqueue._clock import SERVER_TIME_READ, LeaderClock
from rqueue._core import QueueCore
from rqueue._exceptions import ProtocolError, Unavailable
from rqueue._models import Result
from rqueue._version import ServerInfo

from .test_core_decisions import Script

LEASE = Lease(7, "g", "{}", "w:tok")


class Mono:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def server_time(value: float) -> tuple[Result, ...]:
    return (Result(columns=("now",), rows=((value,),)),)


def test_now_is_the_leaders_reading_advanced_by_the_monotonic_clock() -> None:
    mono = Mono()
    clock = LeaderClock(monotonic=mono)
    assert clock.due()
    with pytest.raises(RuntimeError, match="before the leader's clock was read"):
        clock.now()
    assert clock.record(100.0, 100.004, server_time(5000.0))  # 4 ms round trip
    assert clock.now() == pytest.approx(5000.0 - 0.002)
    assert clock.error == pytest.approx(0.002)
    mono.t += 2.5
    assert clock.now() == pytest.approx(5002.5 - 0.002)
    assert not clock.due()


def test_a_resync_is_due_after_the_interval_and_after_an_error() -> None:
    mono = Mono()
    clock = LeaderClock(monotonic=mono, resync_every=10.0)
    clock.record(100.0, 100.0, server_time(0.0))
    mono.t += 9.9
    assert not clock.due()
    mono.t += 0.1
    assert clock.due()
    clock.record(mono.t, mono.t, server_time(20.0))
    assert not clock.due()
    clock.suspect()
    assert clock.due()
    clock.record(mono.t, mono.t, server_time(30.0))  # a new leader, 10 s ahead: taken
    assert clock.now() == pytest.approx(30.0) and not clock.due()


def test_within_one_sync_the_reading_with_the_shortest_round_trip_wins() -> None:
    clock = LeaderClock(monotonic=Mono(), max_error=0.01)
    assert not clock.record(100.0, 100.5, server_time(1000.0))  # slow: 0.25 s either way
    assert clock.error == pytest.approx(0.25)
    assert clock.record(100.6, 100.61, server_time(1000.6))  # fast: replaces it
    assert clock.error == pytest.approx(0.005)
    assert not clock.record(100.7, 101.7, server_time(9999.0))  # slower again: ignored
    assert clock.now() == pytest.approx(1000.6 - 100.605 + 100.0)


def test_an_unreadable_answer_is_a_protocol_error() -> None:
    clock = LeaderClock(monotonic=Mono())
    with pytest.raises(ProtocolError, match="clock sync"):
        clock.record(0.0, 0.0, (Result(),))


def old_server_core(mono: Mono) -> QueueCore:
    clock = LeaderClock(monotonic=mono)
    return QueueCore(
        Statements(server_clock=False, clock=clock.now),
        ServerInfo.from_version("v6.10.2"),
        leader_clock=clock,
    )


def test_a_timed_operation_reads_the_leaders_clock_first_and_binds_it() -> None:
    mono = Mono()
    core = old_server_core(mono)
    s = Script(core.claim("w", 30.0, 0))
    assert s.call.path == "/db/query" and s.call.statements == (SERVER_TIME_READ,)
    s.send(*server_time(7000.0))  # the monotonic clock did not move: no round trip
    assert s.call.path == "/db/execute"
    lease_stmt = s.call.statements[0]
    assert "julianday" not in lease_stmt.sql and not s.call.stamped
    # locked_by = token, CASE WHEN locked_by = token (a claim applied again) ...
    # ELSE now + visibility
    assert lease_stmt.params[0] == lease_stmt.params[1]
    assert lease_stmt.params[2] == pytest.approx(7000.0)  # lock_expiry = now + ...
    assert lease_stmt.params[3] == 30.0


def test_an_error_makes_the_next_operation_read_the_clock_again() -> None:
    core = old_server_core(Mono())
    s = Script(core.nack(LEASE, 0))
    s.send(*server_time(7000.0))
    assert s.call.path == "/db/execute"
    s.send(Result(rows_affected=1))
    assert s.done  # no error: the clock stays trusted
    assert Script(core.nack(LEASE, 0)).call.path == "/db/execute"
    s = Script(core.nack(LEASE, 0))
    with pytest.raises(Unavailable):
        s.throw(Unavailable("no leader"))
    assert Script(core.extend(LEASE, 5.0)).call.statements == (SERVER_TIME_READ,)


# -- on a real cluster, speaking the old protocol ---------------------------------------


def test_a_worker_whose_wall_clock_is_ahead_cannot_take_a_live_lease(
    connect, queue_urls, monkeypatch
) -> None:
    """Lease times follow the leader's clock, not the worker's wall clock."""
    urls = ",".join(queue_urls)
    honest = connect(urls, assume_version="v8.0.0")
    honest.publish("g", '"a"')
    lease = honest.claim("w1", 3.0)
    assert lease is not None
    assert lease.expires_at == pytest.approx(time.time() + 3.0, abs=1.0)
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 60.0)  # its wall clock jumps
    ahead = connect(urls, assume_version="v8.0.0")
    ahead.publish("h", '"b"')
    other = ahead.claim("w2", 3.0)
    assert other is not None and other.group_id == "h"  # g's lease is live: not taken
    assert ahead.claim("w2", 3.0) is None
    honest.ack(lease)
