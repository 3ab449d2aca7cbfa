"""The fault kinds (harness.faults): one class each, found through the registry, their
parameters, needs and refusals declared as data."""

from __future__ import annotations

import dataclasses
import random

import pytest

from harness.cli import main
from harness.cluster.base import CAPABILITY_NAMES, Cluster, NodeInfo
from harness.cluster.docker.cluster import DockerCluster
from harness.cluster.external.cluster import ExternalCluster
from harness.cluster.local.cluster import LocalCluster
from harness.faults import KINDS, Fault, FaultKind, Stage, UnknownFaultKind, kind_of
from harness.faults.capabilities import REFUSALS, backends_for, refusal
from harness.runner import RunOptions, run
from harness.scenario import FAULT_KINDS, OUTAGE_KINDS, load_scenario, parse_scenario

ALL = frozenset(CAPABILITY_NAMES)


class Lacking(Cluster):
    """A cluster that can do ``can`` and nothing else; records what it is asked."""

    engine = "fake"

    def __init__(self, can: frozenset[str] = ALL, n: int = 3) -> None:
        self.can, self.calls = can, []
        self.ids = [f"n{i}" for i in range(1, n + 1)]

    CAPABILITIES = ALL

    @property
    def capabilities(self) -> frozenset[str]:
        return self.can

    def nodes(self):
        return [NodeInfo(i, f"http://{i}") for i in self.ids]

    def leader(self, timeout: float = 1.0):
        return NodeInfo("n1", "")

    def wait_for_leader(self, timeout: float, **kw):
        return NodeInfo("n1", "")

    def kill(self, node_id):
        self.calls.append(("kill", node_id))

    restart = pause = resume = kill

    def stop(self):
        self.calls.append(("stop",))


class Claimers:
    claimer_names = ("s0", "s1")

    def set_clock_offset(self, worker, seconds):
        pass

    def set_stall_probability(self, p):
        pass


def test_the_registry_names_each_kind_once_in_the_scenario_order():
    assert list(KINDS) == list(FAULT_KINDS)
    assert list(KINDS)[:2] == ["kill-leader", "kill-random"]  # the order errors list them
    for name, kind in KINDS.items():
        assert kind.name == name and issubclass(kind, FaultKind)
        assert kind.needs <= ALL, name
    assert {n for n, k in KINDS.items() if k.recovery > 0} == OUTAGE_KINDS
    assert "clock-skew-worker" not in OUTAGE_KINDS and "timezone" in OUTAGE_KINDS
    with pytest.raises(
        UnknownFaultKind, match="no fault kind 'flood'; known: clock-jump-back-node"
    ):
        kind_of("flood")


@pytest.mark.parametrize("name", list(KINDS))
def test_every_kind_acts_and_undoes_through_its_stage(name):
    params = {"offset": 3600.0} if name == "timezone" else {}
    fault = Fault(name, 0.0, 1.0, **params)
    stage = Stage(Lacking(n=5), Claimers(), random.Random(1))
    action = kind_of(name).begin(stage, dict(fault.params))
    assert action.f and action.f_end and action.f != action.f_end
    assert callable(action.act) and callable(action.undo)
    assert isinstance(action.value, dict) and "fault" not in action.value


def test_a_fault_takes_only_its_kinds_parameters_with_their_defaults():
    f = Fault("clock-skew-node", 1.0, 2.0, offset=0.2)
    assert (f.offset, f.target, f.every) == (0.2, "leader", None)
    assert f.params == (("offset", 0.2), ("target", "leader"))
    assert dataclasses.replace(f, start=3.0) == Fault("clock-skew-node", 3.0, 2.0, offset=0.2)
    assert f.to_json() == {
        "kind": "clock-skew-node",
        "start": 1.0,
        "duration": 2.0,
        "offset": 0.2,
        "target": "leader",
    }
    with pytest.raises(TypeError, match="fault 'kill-leader' takes no parameter 'offset'"):
        Fault("kill-leader", 0.0, 1.0, offset=1.0)
    with pytest.raises(AttributeError, match="has no parameter 'fraction'"):
        _ = f.fraction
    with pytest.raises(ValueError, match="no fault kind 'flood'"):
        Fault("flood", 0.0, 1.0)


def test_a_scenario_needs_what_its_faults_need():
    assert load_scenario("steady").needs == frozenset()
    assert load_scenario("leader-failover").needs == {"kill"}
    assert load_scenario("partition-leader").needs == {"partitions"}
    assert load_scenario("timezone").needs == {"time-zones"}
    assert load_scenario("clock-skew").needs == {"clock-skew"}  # the worker's needs nothing


def test_a_kind_declares_its_smallest_cluster():
    doc = {
        "description": "x",
        "nodes": 3,
        "faults": [{"kind": "partition-bridge", "start": 1, "duration": 2}],
    }
    with pytest.raises(ValueError, match="fault 'partition-bridge' needs 5 nodes, the scenario"):
        parse_scenario("x", doc, "x.toml")


def test_every_capability_has_a_refusal_and_each_backend_declares_known_ones():
    assert set(REFUSALS) == ALL
    for backend in (LocalCluster, DockerCluster, ExternalCluster):
        assert backend.CAPABILITIES <= ALL
    assert not ExternalCluster.CAPABILITIES
    backends = {"local": LocalCluster.CAPABILITIES, "external": frozenset()}
    assert backends_for("kill-leader", backends) == ["local"]
    assert backends_for("lease-expiry", backends) == ["local", "external"]


def test_a_refusal_is_one_line_naming_the_scenario_and_what_the_cluster_lacks():
    kinds = ["kill-leader", "partition-leader", "timezone", "clock-skew-node"]
    assert refusal("s", kinds, Lacking()) is None
    assert refusal("s", ["lease-expiry", "clock-skew-worker"], Lacking(frozenset())) is None
    assert refusal("s", kinds, Lacking(ALL - {"partitions"})) == (
        "scenario s partitions the network, which the fake cluster here cannot do (it needs "
        "root on the machine that runs the nodes, with nsenter and iptables)"
    )
    assert refusal("s", kinds, Lacking(ALL - {"time-zones"})) == (
        "scenario s sets nodes' time zones (timezone): the fake backend cannot set a node's "
        "time zone"
    )
    assert refusal("s", kinds, Lacking(ALL - {"clock-skew"})) == (
        "scenario s skews nodes' clocks (clock-skew-node): the fake backend cannot skew a "
        "node's clock"
    )
    assert "\n" not in (refusal("s", kinds, Lacking(frozenset())) or "\n")


def test_a_run_the_cluster_cannot_fault_is_refused_before_the_workload(monkeypatch, tmp_path):
    cluster = Lacking(ALL - {"clock-skew"})
    monkeypatch.setattr("harness.cluster.factory.make_cluster", lambda *a, **kw: cluster)
    result = run(RunOptions("clock-skew", out=tmp_path / "r", progress=False))
    assert result.exit_code == 2
    assert result.reason == (
        "scenario clock-skew skews nodes' clocks (clock-skew-node): the fake backend cannot "
        "skew a node's clock"
    )
    assert not (tmp_path / "r" / "history.jsonl").exists()  # no workload, no history
    assert cluster.calls == [("stop",)]  # no fault touched it


def test_list_says_which_backends_run_each_fault_kind(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    section = out.split("\nfault kinds")[1].split("\nsubjects")[0].splitlines()[1:]
    rows = {line.split()[0]: line for line in section if not line.strip().startswith("(")}
    assert list(rows) == list(KINDS)
    assert rows["partition-leader"].split()[1:] == ["partitions", "local,", "docker,", "ssh"]
    assert rows["lease-expiry"].split()[1:] == ["-", "local,", "docker,", "external,", "ssh"]
    assert "external" not in rows["kill-leader"]
