"""The ``disk-full`` fault kind: its parameters, what it asks of the cluster, its undo
after a failed fill, and its refusal on clusters without disks of their own."""

from __future__ import annotations

import random

import pytest

from harness.cluster.base import DISK, ClusterError
from harness.cluster.local.cluster import LocalCluster
from harness.faults import Stage, kind_of
from harness.faults.capabilities import refusal
from harness.history import fault_intervals
from harness.scenario import load_scenario
from tests.harness.test_faults import ALL, Claimers, Lacking


class Disks(Lacking):
    """A fake cluster that records fills and frees; ``broken`` nodes refuse a fill."""

    def __init__(self, broken: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.broken = broken

    def fill_disk(self, node_id: str) -> None:
        self.calls.append(("fill", node_id))
        if node_id in self.broken:
            raise ClusterError(f"{node_id}: no disk")

    def free_disk(self, node_id: str) -> None:
        self.calls.append(("free", node_id))


def test_disk_full_fills_its_targets_and_frees_them_at_the_end() -> None:
    kind = kind_of("disk-full")
    assert kind.needs == frozenset({DISK}) and kind.params == {"target": "leader"}
    c = Disks()
    action = kind.begin(Stage(c, Claimers(), random.Random(1)), {"target": "all"})
    assert (action.f, action.f_end, action.value) == (
        "disk-full",
        "disk-free",
        {"nodes": ["n1", "n2", "n3"]},
    )
    action.act()
    action.undo()
    assert c.calls == [("fill", n) for n in c.ids] + [("free", n) for n in c.ids]


def test_a_failed_fill_frees_what_it_filled_and_raises() -> None:
    c = Disks(broken=frozenset({"n2"}))
    action = kind_of("disk-full").begin(Stage(c, Claimers(), random.Random(1)), {"target": "all"})
    with pytest.raises(ClusterError, match="n2: no disk"):
        action.act()
    assert c.calls == [("fill", "n1"), ("fill", "n2"), ("free", "n1"), ("free", "n2")]


def test_the_scenario_targets_the_leader_and_a_follower() -> None:
    s = load_scenario("disk-full")
    assert [(f.kind, dict(f.params)["target"]) for f in s.faults] == [
        ("disk-full", "leader"),
        ("disk-full", "follower"),
    ]
    assert DISK in s.needs


def test_a_cluster_without_disks_refuses_in_one_line(tmp_path) -> None:
    line = refusal("d", ["disk-full"], Lacking(ALL - {DISK}))
    assert (
        line
        == "scenario d fills nodes' disks (disk-full): the fake backend cannot fill a node's disk"
    )
    # a local cluster has the capability only when started with disk_mb
    plain = LocalCluster(tmp_path, "embedded", [])
    assert DISK not in plain.capabilities
    assert DISK in LocalCluster(tmp_path, "embedded", [], disk_mb=32).capabilities
    with pytest.raises(ClusterError, match="without disks"):
        plain.fill_disk("n1")


def test_disk_free_ends_disk_full_in_a_history_without_phases() -> None:
    events = [
        {"index": i, "time": t, "process": "nemesis", "type": "info", "f": f, "value": v}
        for i, (t, f, v) in enumerate(
            [(1.0, "disk-full", {"nodes": ["n2"]}), (9.0, "disk-free", {"nodes": ["n2"]})]
        )
    ]
    [fault] = fault_intervals(events)
    assert (fault.kind, fault.start, fault.end) == ("disk-full", 1.0, 9.0)
