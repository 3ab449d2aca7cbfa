"""The nemesis and the workload's pure parts, against a fake cluster and recorder."""

from __future__ import annotations

import asyncio
import collections
import datetime
import io
import random
import signal
import time
import zoneinfo

import pytest

from harness.cluster.base import Cluster, ClusterError, NodeInfo
from harness.history import fault_intervals
from harness.nemesis import Nemesis
from harness.scenario import Fault, WorkloadSpec
from harness.subjects import Subject
from harness.workload import Ops, Workload, WorkloadError, plan_lease
from rqueue import LeaseLost, OutcomeUnknown, StatementError, Unavailable


class FakeCluster(Cluster):
    """Records what the nemesis asks of it (a pure unit-test double)."""

    engine = "fake"

    def __init__(self, n: int = 3, leader: str | None = "n1") -> None:
        self.ids = [f"n{i}" for i in range(1, n + 1)]
        self.lead = leader
        self.calls: list[tuple] = []
        self.unready: set[str] = set()

    def nodes(self):
        return [NodeInfo(i, f"http://{i}") for i in self.ids]

    def leader(self, timeout: float = 1.0):
        return NodeInfo(self.lead, "") if self.lead else None

    def wait_for_leader(self, timeout: float, *, all_ready: bool = True):
        if self.lead is None or (all_ready and self.unready):
            raise ClusterError(f"no leader (unready: {sorted(self.unready)})")
        return NodeInfo(self.lead, "")

    def kill(self, node_id):
        self.calls.append(("kill", node_id))

    def restart(self, node_id):
        self.calls.append(("restart", node_id))

    def pause(self, node_id):
        self.calls.append(("pause", node_id))

    def resume(self, node_id):
        self.calls.append(("resume", node_id))

    def partition(self, components):
        self.calls.append(("partition", [list(c) for c in components]))

    def heal(self):
        self.calls.append(("heal",))

    def set_clock_offset(self, node_id, seconds):
        self.calls.append(("clock", node_id, seconds))

    def set_time_zone(self, node_id, tzif):
        self.calls.append(("zone", node_id, tzif))

    def stop(self):
        pass


class ListRecorder:
    def __init__(self) -> None:
        self.events: list[dict] = []

    def nemesis(self, f, value=None, type="info"):
        self.events.append(
            {
                "index": len(self.events),
                "time": float(len(self.events)),
                "process": "nemesis",
                "type": type,
                "f": f,
                "value": value,
            }
        )


class FakeWorkload:
    claimer_names = ("s0", "s1", "a0", "a1")

    def __init__(self) -> None:
        self.offsets: dict[str, float] = {}
        self.stall: list[float | None] = []

    def set_clock_offset(self, worker, seconds):
        self.offsets[worker] = seconds

    def set_stall_probability(self, p):
        self.stall.append(p)


def nemesis_for(kind: str, nodes: int = 3, **params) -> tuple[Nemesis, FakeCluster, ListRecorder]:
    cluster, rec = FakeCluster(nodes), ListRecorder()
    fault = Fault(kind=kind, start=0.0, duration=1.0, **params)
    n = Nemesis(cluster, rec, FakeWorkload(), [fault], 10.0, seed=3)
    return n, cluster, rec


def begin_then_heal(n: Nemesis) -> None:
    n._begin((0, 0), n.events[0].fault)
    assert n.current != "none"
    n.heal_all()
    assert n.current == "none"


def test_kill_leader_then_restart_is_recorded_as_one_interval():
    n, cluster, rec = nemesis_for("kill-leader")
    begin_then_heal(n)
    assert cluster.calls == [("kill", "n1"), ("restart", "n1")]
    assert [(e["f"], e["type"]) for e in rec.events] == [
        ("kill", "invoke"),
        ("kill", "info"),
        ("restart", "invoke"),
        ("restart", "info"),
    ]
    assert rec.events[0]["value"] == {"fault": "kill-leader", "phase": "start", "nodes": ["n1"]}
    assert rec.events[2]["value"]["phase"] == "end"
    (interval,) = fault_intervals(rec.events)
    assert (interval.kind, interval.start, interval.end) == ("kill-leader", 0.0, 2.0)


def test_kill_all_restarts_every_node():
    n, cluster, _ = nemesis_for("kill-all")
    begin_then_heal(n)
    assert [c for c in cluster.calls if c[0] == "kill"] == [("kill", i) for i in cluster.ids]
    assert [c for c in cluster.calls if c[0] == "restart"] == [("restart", i) for i in cluster.ids]


def test_pause_leader_resumes_it():
    n, cluster, _ = nemesis_for("pause-leader")
    begin_then_heal(n)
    assert cluster.calls == [("pause", "n1"), ("resume", "n1")]


@pytest.mark.parametrize(
    ("kind", "nodes", "sizes"),
    [
        ("partition-leader", 3, [1, 2]),
        ("partition-majority", 5, [2, 3]),
        ("partition-majority", 3, [1, 2]),
        ("partition-bridge", 5, [3, 3]),
    ],
)
def test_partitions_put_the_leader_on_the_small_side_and_heal(kind, nodes, sizes):
    n, cluster, _ = nemesis_for(kind, nodes)
    begin_then_heal(n)
    (_, components), heal = cluster.calls
    assert [len(c) for c in components] == sizes
    assert "n1" in components[0]
    assert set().union(*components) == set(cluster.ids)
    if kind == "partition-bridge":
        assert len(set(components[0]) & set(components[1])) == 1  # the bridge node
        assert "n1" not in components[1]
    assert heal == ("heal",)


def test_node_clock_skew_is_reset_to_zero():
    n, cluster, rec = nemesis_for("clock-skew-node", offset=0.5, target="leader")
    begin_then_heal(n)
    assert cluster.calls == [("clock", "n1", 0.5), ("clock", "n1", 0.0)]
    assert [e["f"] for e in rec.events] == ["clock-skew"] * 2 + ["clock-reset"] * 2


def offsets(tzif: bytes, *moments: float) -> list[float]:
    """The zone file's UTC offsets (seconds) at each Unix moment."""
    zone = zoneinfo.ZoneInfo.from_file(io.BytesIO(tzif))
    return [
        datetime.datetime.fromtimestamp(t, datetime.UTC)
        .astimezone(zone)
        .utcoffset()
        .total_seconds()
        for t in moments
    ]


def test_timezone_restarts_every_target_in_a_zone_that_jumps_then_in_utc():
    n, cluster, rec = nemesis_for("timezone", target="all", offset=0.0, transition=4.0, jump=3600)
    before = time.time()
    n._begin((0, 0), n.events[0].fault)
    zones = [c for c in cluster.calls if c[0] == "zone"]
    assert sorted(c[1] for c in zones) == cluster.ids and len({c[2] for c in zones}) == 1
    tzif = zones[0][2]
    value = rec.events[0]["value"]
    assert value["nodes"] == cluster.ids and value["offset"] == 0 and value["jump"] == 3600
    assert 4.0 <= value["transition"] <= 5.0  # rounded up to a whole Unix second
    at = before + value["transition"]
    assert offsets(tzif, at - 1.5, at + 1.5, at + 86400) == [0, 3600, 3600]
    assert value["zone"] == f"UTC+00:00, UTC+01:00 from +{value['transition']:.1f} s"
    n.heal_all()
    assert sorted(cluster.calls[3:]) == [("zone", i, None) for i in cluster.ids]
    assert [e["f"] for e in rec.events] == ["timezone"] * 2 + ["timezone-reset"] * 2
    (interval,) = fault_intervals(rec.events)
    assert interval.transition == interval.start + value["transition"]
    assert interval.label.startswith("timezone n1,n2,n3 UTC+00:00, UTC+01:00")


def test_timezone_of_a_minority_and_a_fixed_zone():
    n, cluster, rec = nemesis_for("timezone", nodes=5, target="minority", offset=-18000.0)
    n._begin((0, 0), n.events[0].fault)
    targets = rec.events[0]["value"]["nodes"]
    assert len(targets) == 2 and targets == sorted(targets)
    assert sorted(c[1] for c in cluster.calls) == targets
    assert offsets(cluster.calls[0][2], 0, time.time(), 4e9) == [-18000] * 3
    assert "transition" not in rec.events[0]["value"] and rec.events[0]["value"]["zone"] == (
        "UTC-05:00"
    )
    assert fault_intervals(rec.events)[0].transition is None


def test_a_timezone_that_fails_on_one_node_puts_the_others_back_in_utc():
    n, cluster, rec = nemesis_for("timezone", target="all", offset=3600.0)

    def flaky(node_id, tzif):
        cluster.calls.append(("zone", node_id, tzif))
        if node_id == "n2" and tzif is not None:
            raise ClusterError("n2 did not answer /readyz")

    cluster.set_time_zone = flaky
    with pytest.raises(ClusterError, match="could not set the time zone of n2: n2 did not"):
        n._begin((0, 0), n.events[0].fault)
    assert sorted(c[1:] for c in cluster.calls[3:]) == [(i, None) for i in cluster.ids]
    assert [(e["f"], e["type"]) for e in rec.events] == [
        ("timezone", "invoke"),
        ("timezone", "fail"),
    ]
    assert n.current == "none"


def test_worker_clock_skew_hits_a_fraction_of_the_claimers():
    n, _, rec = nemesis_for("clock-skew-worker", offset=8.0, fraction=0.5)
    n._begin((0, 0), n.events[0].fault)
    skewed = {w for w, s in n.workload.offsets.items() if s == 8.0}
    assert len(skewed) == 2 and skewed <= set(FakeWorkload.claimer_names)
    assert rec.events[0]["value"]["targets"] == sorted(skewed)
    n.heal_all()
    assert set(n.workload.offsets.values()) == {0.0}


def test_lease_expiry_turns_stalls_on_and_off():
    n, _, rec = nemesis_for("lease-expiry", probability=0.7)
    begin_then_heal(n)
    assert n.workload.stall == [0.7, None]
    assert [e["f"] for e in rec.events] == ["start-stall"] * 2 + ["stop-stall"] * 2


def test_a_fault_that_cannot_act_is_recorded_as_fail_and_not_undone():
    n, cluster, rec = nemesis_for("kill-leader")
    cluster.lead = None
    with pytest.raises(ClusterError, match="no leader to target"):
        n._begin((0, 0), n.events[0].fault)
    assert rec.events == [] and n.current == "none"

    def broken(node_id):
        raise ClusterError("kill failed")

    cluster.lead, cluster.kill = "n1", broken
    with pytest.raises(ClusterError):
        n._begin((0, 0), n.events[0].fault)
    assert [(e["f"], e["type"]) for e in rec.events] == [("kill", "invoke"), ("kill", "fail")]
    assert "kill failed" in rec.events[1]["value"]["error"]
    assert fault_intervals(rec.events) == []


def test_a_leader_fault_strikes_when_a_node_never_gets_ready():
    """A follower still catching up (seen on a loaded CI machine) does not stop it."""
    n, cluster, rec = nemesis_for("kill-leader")
    cluster.lead, cluster.unready = "n3", {"n2"}
    n._begin((0, 0), n.events[0].fault)
    assert ("kill", "n3") in cluster.calls
    assert [(e["f"], e["type"]) for e in rec.events] == [("kill", "invoke"), ("kill", "info")]
    cluster.lead = None
    with pytest.raises(ClusterError, match=r"no leader to target within 6s: .*unready: \['n2'\]"):
        n._begin((0, 0), n.events[0].fault)


def test_schedule_orders_windows_and_ends_before_starts():
    faults = [Fault("kill-leader", start=1.0, duration=2.0, every=2.0)]
    n = Nemesis(FakeCluster(), ListRecorder(), FakeWorkload(), faults, 6.0)
    assert [(e.at, e.order) for e in n.events] == [
        (1.0, 1),
        (3.0, 0),
        (3.0, 1),
        (5.0, 0),
        (5.0, 1),
        (6.0, 0),
    ]


def test_the_schedule_thread_runs_and_stops():
    faults = [Fault("pause-leader", start=0.0, duration=0.05)]
    cluster = FakeCluster()
    n = Nemesis(cluster, ListRecorder(), FakeWorkload(), faults, 0.1)
    n.start()
    n.stop(timeout=10)  # may stop before or after the fault; either way nothing is left
    n.heal_all()
    assert cluster.calls in ([], [("pause", "n1"), ("resume", "n1")])
    assert n.current == "none"


# -- workload pure parts ------------------------------------------------------------------
def test_exceptions_map_to_history_types():
    class Rec:
        def __init__(self):
            self.done = []

        def invoke(self, process, f, value):
            return (process, f)

        def complete(self, op, kind, value, error=None):
            self.done.append((kind, error))

    rec = Rec()
    ops = Ops(rec)
    for exc in (Unavailable("x"), StatementError("x"), LeaseLost("x")):
        assert ops.failed(ops.start(0, "ack", {}), "ack", {}, exc) == "fail"
    assert ops.failed(ops.start(1, "ack", {}), "ack", {}, OutcomeUnknown("x")) == "info"
    assert ops.failed(ops.start(2, "ack", {}), "ack", {}, RuntimeError("boom")) == "info"
    assert rec.done[-1] == ("info", "RuntimeError: boom")
    assert ops.counts == collections.Counter({("ack", "fail"): 3, ("ack", "info"): 2})


def test_plans_follow_the_configured_mix():
    spec = WorkloadSpec(nack_probability=0.2, nack_delay_probability=0.1, stall_probability=0.0)
    rng = random.Random(1)
    plans = [plan_lease(rng, spec, stall_probability=0.3) for _ in range(4000)]
    share = collections.Counter(
        "stall" if p.stalled else ("park" if p.delay else p.action) for p in plans
    )
    assert 0.27 < share["stall"] / 4000 < 0.33
    assert 0.17 < share["nack"] / 4000 < 0.23
    assert 0.07 < share["park"] / 4000 < 0.13
    assert all(p.work > spec.visibility for p in plans if p.stalled)
    assert all(spec.nack_delay[0] <= p.delay <= spec.nack_delay[1] for p in plans if p.delay)


def test_drain_reports_clients_that_cannot_open():
    def refuse(urls, clock, timeout):
        raise Unavailable(f"nothing answers at {urls[0]}")

    subject = Subject("refusing", "opens nothing", refuse, refuse)
    w = Workload(WorkloadSpec(), subject, ["http://127.0.0.1:9"], recorder=None, timeout=1.0)
    with pytest.raises(WorkloadError, match="drain failed: Unavailable: nothing answers"):
        w.drain(timeout=5.0)


def test_a_kill_that_fails_midway_restarts_the_nodes_it_killed():
    n, cluster, rec = nemesis_for("kill-all")
    kill = cluster.kill

    def kill_fails_on_n3(node_id):
        if node_id == "n3":
            raise ClusterError("n3 would not die")
        kill(node_id)

    cluster.kill = kill_fails_on_n3
    with pytest.raises(ClusterError, match="n3 would not die"):
        n._begin((0, 0), n.events[0].fault)
    assert cluster.calls == [("kill", "n1"), ("kill", "n2"), ("restart", "n1"), ("restart", "n2")]
    assert fault_intervals(rec.events) == [] and n.current == "none"


def test_healing_a_kill_restarts_every_node_even_when_one_fails():
    n, cluster, rec = nemesis_for("kill-all")
    n._begin((0, 0), n.events[0].fault)
    restart = cluster.restart

    def restart_fails_on_n1(node_id):
        restart(node_id)
        if node_id == "n1":
            raise ClusterError("n1 will not start")

    cluster.restart = restart_fails_on_n1
    n.heal_all()
    assert [c for c in cluster.calls if c[0] == "restart"] == [("restart", i) for i in cluster.ids]
    assert n.errors == ["heal: could not restart n1: n1 will not start"]
    assert (rec.events[-1]["f"], rec.events[-1]["type"]) == ("restart", "fail")


class IdleClient:
    """A client with nothing to hand out (the workers only need to start and stop)."""

    def publish(self, group_id, event, priority=0):
        return 1

    def claim(self, worker_id, visibility, min_priority=0):
        return None

    def close(self):
        pass


def test_ctrl_c_while_starting_leaves_no_worker_waiting():
    async def open_slowly(urls, clock, timeout):
        await asyncio.sleep(0.5)
        return IdleClient()

    subject = Subject("idle", "", lambda *a: IdleClient(), open_slowly)
    spec = WorkloadSpec(publishers=1, sync_claimers=1, async_claimers=1)
    w = Workload(spec, subject, ["http://127.0.0.1:9"], recorder=None)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(KeyboardInterrupt):
            w.start(ready_timeout=30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    w.stop(timeout=10)  # every worker ends (it raised WorkloadError while they waited)
