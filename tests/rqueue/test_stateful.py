"""Hypothesis drives a transport and the seed's in-memory model side by side.

Time does not enter: visibilities, parks and delays are far longer than a test, so every
result is determined by the operations alone. Runs against the local SQLite core (many
examples, fast) and against the shared cluster with both twins (fewer examples).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from rqueue import Lease, LeaseLost, Statements
from rqueue._core import QueueCore
from rqueue._version import ServerInfo

from .conftest import clear_queue
from .fakes import SqliteExecutor, drive
from .model import SeedModel

LONG = 3600.0
GROUPS = st.sampled_from(["g0", "g1", "g2", "g3"])
PRIORITIES = st.integers(0, 4)


class LocalCore:
    """The core over one SQLite database, with the transports' method names."""

    def __init__(self) -> None:
        self.ex = SqliteExecutor()
        self.core = QueueCore(
            Statements(server_clock=True, clock=lambda: 0.0), ServerInfo.from_version("v8.36.0")
        )
        drive(self.core.open(), self.ex)

    def publish(
        self, group: str, event: Any, priority: int = 0, dedup_id=None, *, delay: float = 0
    ) -> int:
        op = self.core.publish(group, json.dumps(event), priority, dedup_id, delay)
        return drive(op, self.ex)

    def publish_many(self, items: list[tuple[str, Any, int]]) -> list[int]:
        batch = [(g, json.dumps(e), p) for g, e, p in items]
        return drive(self.core.publish_many(batch), self.ex)

    def claim(self, worker: str, visibility: float, min_priority: int = 0) -> Lease | None:
        return drive(self.core.claim(worker, visibility, min_priority), self.ex)

    def ack(self, lease: Lease) -> None:
        drive(self.core.ack(lease), self.ex)

    def ack_and_claim(
        self, lease: Lease, worker: str, visibility: float, min_priority: int = 0
    ) -> Lease | None:
        op = self.core.ack_and_claim(lease, worker, visibility, min_priority)
        return drive(op, self.ex)

    def nack(self, lease: Lease, delay: float = 0) -> None:
        drive(self.core.nack(lease, delay), self.ex)

    def extend(self, lease: Lease, visibility: float) -> None:
        drive(self.core.extend(lease, visibility), self.ex)

    def clear(self) -> None:
        for table in ("messages", "groups", "rqueue_dedup"):
            self.ex.sql(f"DELETE FROM {table}")


def machine_for(queue: Any, reset: Any) -> type[RuleBasedStateMachine]:
    class QueueVersusModel(RuleBasedStateMachine):
        @initialize()
        def start(self) -> None:
            reset()
            self.model = SeedModel()
            self.held: list[Lease] = []  # leases we may still hold
            self.stale: list[Lease] = []  # leases we certainly no longer hold
            #: how each stale lease was settled by us: "ack", "nack", "park" (or absent)
            self.settled_by: dict[str, str] = {}
            self.n = 0
            self.run = uuid.uuid4().hex  # dedup ids are remembered across examples
            self.dedup: dict[str, int] = {}
            self.published: set[int] = set()

        @rule(group=GROUPS, priority=PRIORITIES)
        def publish(self, group: str, priority: int) -> None:
            self.n += 1
            event = {"n": self.n}
            seq = queue.publish(group, event, priority=priority)
            assert all(seq > s for s in self.model.messages)
            self.model.publish(seq, group, json.dumps(event), priority)
            self.published.add(seq)

        @rule(group=GROUPS, priority=PRIORITIES)
        def publish_delayed(self, group: str, priority: int) -> None:
            self.n += 1
            event = {"n": self.n}
            seq = queue.publish(group, event, priority=priority, delay=LONG)
            self.model.publish(seq, group, json.dumps(event), priority, delayed=True)
            self.published.add(seq)

        @rule(
            items=st.lists(st.tuples(GROUPS, PRIORITIES), min_size=1, max_size=4),
        )
        def publish_many(self, items: list[tuple[str, int]]) -> None:
            batch = []
            for group, priority in items:
                self.n += 1
                batch.append((group, {"n": self.n}, priority))
            seqs = queue.publish_many(batch)
            assert seqs == sorted(seqs) and all(seqs[0] > s for s in self.model.messages)
            for seq, (group, event, priority) in zip(seqs, batch, strict=True):
                self.model.publish(seq, group, json.dumps(event), priority)
                self.published.add(seq)

        @rule(group=GROUPS, key=st.sampled_from(["d1", "d2", "d3"]))
        def publish_deduplicated(self, group: str, key: str) -> None:
            self.n += 1
            event = {"n": self.n}
            seq = queue.publish(group, event, dedup_id=f"{self.run}-{key}")
            first = self.dedup.setdefault(key, seq)
            if first == seq and seq not in self.published:
                self.model.publish(seq, group, json.dumps(event), 0)
                self.published.add(seq)
            assert seq == first, "a repeated dedup id stored a second message"

        @rule(min_priority=PRIORITIES)
        def claim(self, min_priority: int) -> None:
            self._check_claim(queue.claim("w", LONG, min_priority=min_priority), min_priority)

        @precondition(lambda self: self.held)
        @rule(index=st.integers(0, 10), min_priority=PRIORITIES)
        def ack_and_claim(self, index: int, min_priority: int) -> None:
            lease = self.held.pop(index % len(self.held))
            assert self.model.ack(lease.seq, lease.token)
            self.stale.append(lease)
            self.settled_by[lease.token] = "ack"
            nxt = queue.ack_and_claim(lease, "w", LONG, min_priority=min_priority)
            self._check_claim(nxt, min_priority)

        def _check_claim(self, lease: Lease | None, min_priority: int) -> None:
            expected = self.model.claim(min_priority)
            if expected is None:
                assert lease is None
                return
            assert lease is not None, f"model leases {expected.seq}, queue nothing"
            assert (lease.seq, lease.group_id, lease.event) == (
                expected.seq,
                expected.group,
                expected.event,
            )
            expected.token = lease.token
            self.held.append(lease)

        def _settle(self, index: int, act: str, park: bool = False) -> None:
            lease = self.held.pop(index % len(self.held))
            if act == "ack":
                assert self.model.ack(lease.seq, lease.token)
                queue.ack(lease)
            elif act == "nack":
                assert self.model.nack(lease.seq, lease.token, park)
                queue.nack(lease, LONG if park else 0)
                act = "park" if park else "nack"
            self.stale.append(lease)
            self.settled_by[lease.token] = act

        @precondition(lambda self: self.held)
        @rule(index=st.integers(0, 10))
        def ack(self, index: int) -> None:
            self._settle(index, "ack")

        @precondition(lambda self: self.held)
        @rule(index=st.integers(0, 10), park=st.booleans())
        def nack(self, index: int, park: bool) -> None:
            self._settle(index, "nack", park)

        @precondition(lambda self: self.held)
        @rule(index=st.integers(0, 10))
        def extend(self, index: int) -> None:
            lease = self.held[index % len(self.held)]
            assert self.model.extend(lease.seq, lease.token)
            queue.extend(lease, LONG)

        @precondition(lambda self: self.stale)
        @rule(
            index=st.integers(0, 10),
            act=st.sampled_from(["ack", "nack", "extend", "ack_and_claim"]),
        )
        def stale_lease_is_fenced(self, index: int, act: str) -> None:
            lease = self.stale[index % len(self.stale)]
            how = self.settled_by.get(lease.token)
            if how == "ack" and act == "ack_and_claim":
                # the ack is remembered as applied (a repeat): it settles, then claims
                self._check_claim(queue.ack_and_claim(lease, "w", LONG), 0)
                return
            if (how, act) in (("ack", "ack"), ("nack", "nack")):
                getattr(queue, act)(lease)  # a repeat of an applied ack or nack: no error
                return
            with pytest.raises(LeaseLost):  # and nothing claimed: later claims check that
                if act == "extend":
                    queue.extend(lease, LONG)
                elif act == "ack_and_claim":
                    queue.ack_and_claim(lease, "w", LONG)
                else:
                    getattr(queue, act)(lease)

    return QueueVersusModel


def test_core_matches_the_seed_model() -> None:
    local = LocalCore()
    run_state_machine_as_test(
        machine_for(local, local.clear),
        settings=settings(max_examples=60, stateful_step_count=40, deadline=None),
    )


def test_transport_matches_the_seed_model(connect, queue_urls) -> None:
    t = connect(",".join(queue_urls))
    run_state_machine_as_test(
        machine_for(t, lambda: clear_queue(queue_urls)),
        settings=settings(
            max_examples=10,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
