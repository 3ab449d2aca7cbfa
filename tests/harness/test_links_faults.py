"""The link fault kinds (harness.faults.links): their parameters, what they ask of the
cluster and record, their labels, the refusal of a delay without netem, and report.md's
fault mechanisms. Pure: a stand-in cluster records what it is asked."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.cluster.base import CAPABILITY_NAMES, Cluster, ClusterError, NodeInfo
from harness.cluster.links import NETEM_MISSING
from harness.faults import Fault, Stage, kind_of
from harness.faults.capabilities import params_refusal, refusal
from harness.history import HistoryRecorder, fault_intervals, read_history
from harness.report import write_report
from harness.runner import RunOptions, preflight, run
from harness.scenario import OUTAGE_KINDS, ScenarioError, load_scenario

ALL = frozenset(CAPABILITY_NAMES)


class Links(Cluster):
    """Three nodes, n1 the leader; records the link calls, fails those on ``broken``."""

    engine = "fake"
    CAPABILITIES = ALL

    def __init__(self, broken: str | None = None, netem: str | None = None) -> None:
        self.calls: list[tuple] = []
        self.broken, self.netem = broken, netem

    def nodes(self):
        return [NodeInfo(i, f"http://{i}") for i in ("n1", "n2", "n3")]

    def wait_for_leader(self, timeout: float, **kw):
        return NodeInfo("n1", "")

    def kill(self, node_id):
        raise AssertionError("not a link fault")

    restart = pause = resume = kill

    def stop(self):
        self.calls.append(("stop",))

    def _call(self, *call) -> None:
        self.calls.append(call)
        if call[1] == self.broken:
            raise ClusterError(f"{call[1]} has no namespace")

    def set_link_loss(self, node_id, rate):
        self._call("loss", node_id, rate)

    def clear_link_loss(self, node_id):
        self._call("clear-loss", node_id)

    def set_link_shape(self, node_id, rate, delay=0.0, jitter=0.0):
        self._call("shape", node_id, rate, delay, jitter)

    def clear_link_shape(self, node_id):
        self._call("clear-shape", node_id)

    def link_delay_problem(self):
        return self.netem


class Nobody:
    claimer_names = ()


def begin(cluster: Links, kind: str, **params):
    fault = Fault(kind, 0.0, 1.0, **params)
    return kind_of(kind).begin(Stage(cluster, Nobody(), random.Random(1)), dict(fault.params))


def scenario(tmp_path: Path, fault: str) -> Path:
    path = tmp_path / "links.toml"
    path.write_text(f'description = "x"\n[[faults]]\nstart = 1\nduration = 2\n{fault}\n')
    return path


def test_lossy_link_drops_on_the_targets_links_and_restores_them() -> None:
    c = Links()
    action = begin(c, "lossy-link", rate=0.35, target="all")
    assert (action.f, action.f_end) == ("link-loss", "link-restore")
    assert action.value == {
        "nodes": ["n1", "n2", "n3"],
        "rate": 0.35,
        "mechanism": "iptables-statistic",
        "detail": "35%",
    }
    action.act()
    action.undo()
    assert c.calls == [("loss", n, 0.35) for n in ("n1", "n2", "n3")] + [
        ("clear-loss", n) for n in ("n1", "n2", "n3")
    ]
    assert begin(Links(), "lossy-link").value["nodes"] == ["n1"]  # the leader by default


def test_slow_link_shapes_the_target_and_records_its_mechanism() -> None:
    c = Links()
    action = begin(c, "slow-link", rate="256kbit")
    assert (action.f, action.f_end) == ("link-slow", "link-restore")
    assert action.value == {
        "nodes": ["n1"],
        "rate": "256kbit",
        "mechanism": "tbf",
        "detail": "256kbit",
    }
    action.act()
    action.undo()
    assert c.calls == [("shape", "n1", "256kbit", 0.0, 0.0), ("clear-shape", "n1")]
    delayed = begin(Links(), "slow-link", rate="1mbit", delay=50.0, jitter=10.0).value
    assert delayed["mechanism"] == "netem+tbf" and delayed["detail"] == "1mbit +50±10ms"
    assert (delayed["delay"], delayed["jitter"]) == (50.0, 10.0)


def test_a_failed_start_restores_the_nodes_it_did_and_an_end_tries_every_node() -> None:
    c = Links(broken="n2")
    action = begin(c, "lossy-link", target="all")
    with pytest.raises(ClusterError, match="n2 has no namespace"):
        action.act()
    assert c.calls == [("loss", "n1", 0.3), ("loss", "n2", 0.3), ("clear-loss", "n1")]
    c.calls.clear()
    with pytest.raises(ClusterError, match="could not restore the links of n2: n2 has no"):
        action.undo()
    assert c.calls == [("clear-loss", n) for n in ("n1", "n2", "n3")]


def test_both_kinds_need_links_and_leave_room_to_recover() -> None:
    for name in ("lossy-link", "slow-link"):
        assert kind_of(name).needs == {"links"} and name in OUTAGE_KINDS
    assert load_scenario("lossy-link").needs_netns and load_scenario("slow-link").needs_netns
    assert not load_scenario("clock-skew").needs_netns
    assert load_scenario("partition-leader").needs_netns


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ('kind = "lossy-link"\nrate = 0', "'faults[0].rate': expected a probability above 0"),
        ('kind = "lossy-link"\nrate = 1.5', "'faults[0].rate': expected a probability between"),
        ('kind = "lossy-link"\ntarget = "n1"', "'faults[0].target': expected one of 'leader'"),
        ('kind = "slow-link"\nrate = "fast"', "'faults[0].rate': expected a rate as tc writes"),
        ('kind = "slow-link"\nrate = 256', "'faults[0].rate': expected a string, got 256"),
        ('kind = "slow-link"\ndelay = -1', "'faults[0].delay': expected a number >= 0"),
        ('kind = "slow-link"\njitter = 5', "'faults[0].jitter': expected 0 unless a 'delay'"),
        ('kind = "slow-link"\nloss = 0.1', "loss"),
    ],
)
def test_bad_link_parameters_name_the_file_and_the_key(tmp_path, fault, message) -> None:
    path = scenario(tmp_path, fault)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(path) in str(info.value) and message in str(info.value)


def test_a_delay_without_netem_is_refused_in_one_line_before_the_run(tmp_path) -> None:
    faults = load_scenario(scenario(tmp_path, 'kind = "slow-link"\ndelay = 40')).faults
    assert refusal("s", ["slow-link"], Links(netem=NETEM_MISSING)) is None  # it has "links"
    line = params_refusal("s", faults, Links(netem=NETEM_MISSING))
    assert line == (
        "scenario s runs slow-link (rate=1mbit, delay=40.0, jitter=0.0, target=leader), which "
        f"this cluster cannot: {NETEM_MISSING}"
    )
    assert params_refusal("s", faults, Links()) is None  # a kernel with netem
    plain = load_scenario(scenario(tmp_path, 'kind = "slow-link"')).faults
    assert params_refusal("s", plain, Links(netem=NETEM_MISSING)) is None  # no delay asked


def test_a_run_asking_for_a_delay_without_netem_stops_before_the_workload(monkeypatch, tmp_path):
    cluster = Links(netem=NETEM_MISSING)
    monkeypatch.setattr("harness.cluster.factory.make_cluster", lambda *a, **kw: cluster)
    path = scenario(tmp_path, 'kind = "slow-link"\ndelay = 40')
    result = run(RunOptions(str(path), out=tmp_path / "r", progress=False))
    assert result.exit_code == 2 and result.reason.endswith(NETEM_MISSING)
    assert not (tmp_path / "r" / "history.jsonl").exists()
    assert cluster.calls == [("stop",)]


def test_a_local_run_of_links_needs_network_namespaces(monkeypatch) -> None:
    s = load_scenario("lossy-link")
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert preflight(s, RunOptions("lossy-link")) is True
    assert preflight(s, RunOptions("lossy-link", backend="docker")) is False
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    with pytest.raises(Exception, match="'lossy-link' degrades links: on the local backend"):
        preflight(s, RunOptions("lossy-link"))


def test_labels_and_the_report_show_the_detail_and_the_mechanism(tmp_path) -> None:
    recorder = HistoryRecorder(tmp_path / "history.jsonl")
    for kind, params in (("lossy-link", {"rate": 0.3}), ("slow-link", {"rate": "256kbit"})):
        action = begin(Links(), kind, **params)
        for f, phase in ((action.f, "start"), (action.f_end, "end")):
            value = {"fault": kind, "phase": phase, **action.value}
            recorder.nemesis(f, value, type="invoke")
            recorder.nemesis(f, value, type="info")
    recorder.close()
    faults = fault_intervals(read_history(tmp_path / "history.jsonl"))
    assert [f.label for f in faults] == ["lossy-link n1 30%", "slow-link n1 256kbit"]
    assert all(f.end is not None for f in faults)
    report = write_report(tmp_path).read_text()
    section = report.split("## Fault mechanisms")[1].split("##")[0]
    assert "| lossy-link | iptables-statistic | 1 |" in section
    assert "| slow-link | tbf | 1 |" in section
