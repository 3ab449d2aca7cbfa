"""The one-way fault kinds against a fake cluster (pure): which pairs a window cuts for
each direction, what the history records, the seeded draw of ``either``, the scenario
keys they take, and their place in ``harness list`` and the chaos pool."""

from __future__ import annotations

import pytest

from harness import chaos
from harness.cluster.base import PARTITIONS
from harness.faults import KINDS
from harness.faults.one_way import one_way_cuts
from harness.history import fault_intervals
from harness.nemesis import Nemesis
from harness.scenario import SCENARIO_DIR, Fault, ScenarioError, load_scenario, parse_scenario
from tests.harness.test_run_nemesis import FakeCluster, FakeWorkload, ListRecorder


class OneWayCluster(FakeCluster):
    """The fake cluster, recording one-way cuts too."""

    def partition_one_way(self, cuts):
        self.calls.append(("one-way", [list(c) for c in cuts]))


def run_window(kind: str, nodes: int = 3, seed: int = 3, **params):
    cluster, rec = OneWayCluster(nodes), ListRecorder()
    fault = Fault(kind=kind, start=0.0, duration=1.0, **params)
    n = Nemesis(cluster, rec, FakeWorkload(), [fault], 10.0, seed=seed)
    n._begin((0, 0), n.events[0].fault)
    n.heal_all()
    return cluster, rec


def test_cuts_for_each_direction() -> None:
    assert one_way_cuts(["n1"], ["n2", "n3"], "out") == [["n1", "n2"], ["n1", "n3"]]
    assert one_way_cuts(["n1"], ["n2", "n3"], "in") == [["n2", "n1"], ["n3", "n1"]]
    with pytest.raises(ValueError, match="direction must be one of"):
        one_way_cuts(["n1"], ["n2"], "both")


@pytest.mark.parametrize(
    ("direction", "cuts", "detail"),
    [
        ("out", [["n1", "n2"], ["n1", "n3"]], "cannot-send"),
        ("in", [["n2", "n1"], ["n3", "n1"]], "cannot-hear"),
    ],
)
def test_one_way_leader_cuts_the_leader_then_heals(direction, cuts, detail) -> None:
    cluster, rec = run_window("one-way-leader", direction=direction)
    assert cluster.calls == [("one-way", cuts), ("heal",)]
    start = rec.events[0]
    assert start["f"] == "one-way"
    assert start["value"] == {
        "fault": "one-way-leader",
        "phase": "start",
        "nodes": ["n1"],
        "direction": direction,
        "cuts": cuts,
        "detail": detail,
    }
    assert [e["f"] for e in rec.events] == ["one-way", "one-way", "heal", "heal"]
    events = [{**e, "index": i, "time": float(i)} for i, e in enumerate(rec.events)]
    (fault,) = fault_intervals(events)
    assert fault.kind == "one-way-leader" and fault.label == f"one-way-leader n1 {detail}"
    assert fault.end is not None  # the heal closed it


def test_either_is_drawn_from_the_seed_per_window() -> None:
    drawn = {s: run_window("one-way-leader", seed=s)[1].events[0]["value"] for s in range(12)}
    assert {v["direction"] for v in drawn.values()} == {"out", "in"}
    again = {s: run_window("one-way-leader", seed=s)[1].events[0]["value"] for s in range(12)}
    assert drawn == again


def test_one_way_minority_cuts_a_minority_of_five_from_the_rest() -> None:
    cluster, rec = run_window("one-way-minority", nodes=5, direction="in")
    side = rec.events[0]["value"]["nodes"]
    assert len(side) == 2
    rest = [n for n in cluster.ids if n not in side]
    assert cluster.calls[0] == ("one-way", [[b, a] for a in side for b in rest])


def test_scenario_keys_and_bad_direction() -> None:
    ok = {"description": "d", "nodes": 3, "duration": 10.0}
    fault = {"kind": "one-way-minority", "start": 1.0, "duration": 2.0}
    s = parse_scenario("x", {**ok, "faults": [fault]}, "x.toml")
    assert dict(s.faults[0].params) == {"direction": "either"}
    with pytest.raises(ScenarioError, match="direction"):
        parse_scenario("x", {**ok, "faults": [{**fault, "direction": "both"}]}, "x.toml")


def test_kinds_need_partitions_and_join_the_chaos_pool() -> None:
    assert KINDS["one-way-leader"].needs == {PARTITIONS} == KINDS["one-way-minority"].needs
    s = load_scenario(SCENARIO_DIR / "chaos.toml")
    kept, left = chaos.pool(s.chaos, 3, s.workload, {PARTITIONS})
    assert {"one-way-leader", "one-way-minority"} <= set(kept)
    kept, left = chaos.pool(s.chaos, 3, s.workload, set())
    assert left["one-way-leader"] == "the cluster cannot: partitions"


def test_the_scenario_cuts_the_leader_and_a_minority() -> None:
    s = load_scenario(SCENARIO_DIR / "one-way-partition.toml")
    assert s.nodes == 3 and s.needs == {PARTITIONS}
    short = s.scaled(30.0)
    assert [f.kind for f in short.faults] == ["one-way-leader", "one-way-minority"]
