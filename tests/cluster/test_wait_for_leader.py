"""Cluster.wait_for_leader: one loop on the base, each backend's part in small hooks."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.cluster import base
from harness.cluster.base import Cluster, ClusterError, NodeInfo, NodeStatus
from harness.cluster.docker.cluster import DockerCluster
from harness.cluster.docker.specs import container_specs, node_ids
from harness.cluster.engines import NodeSpec
from harness.cluster.external.cluster import ExternalCluster
from harness.cluster.local.cluster import LocalCluster, NodeDied
from harness.cluster.ports import free_ports


def _status(node: str, leader: str | None, ready: bool = True) -> NodeStatus:
    state = "Leader" if node == leader else "Follower"
    return NodeStatus(f"http://{node}", node, state, leader, ready=ready)


class Scripted(Cluster):
    """Answers each probe round with the next scripted statuses (the last one repeats)."""

    engine = "scripted"
    leader_poll = 0.01

    def __init__(self, rounds: Sequence[list[NodeStatus]]) -> None:
        self.rounds = list(rounds)
        self.timeouts: list[float] = []
        self.dead_checks = 0

    def nodes(self) -> list[NodeInfo]:
        return [NodeInfo(n, f"http://{n}") for n in ("n1", "n2", "n3")]

    def _leader_round(self, timeout: float) -> tuple[NodeInfo | None, list[NodeStatus]]:
        self.timeouts.append(timeout)
        statuses = self.rounds.pop(0) if len(self.rounds) > 1 else self.rounds[0]
        lead = base.agreed_leader(statuses, 3)
        return (NodeInfo(lead.node_id, lead.url) if lead else None), statuses

    def _raise_if_dead(self) -> None:
        self.dead_checks += 1

    def _ignore(self, *_: object) -> None:
        return None

    kill = restart = pause = resume = stop = _ignore


def test_waits_until_a_leader_and_every_node_ready() -> None:
    no_leader = [_status(n, None) for n in ("n1", "n2", "n3")]
    not_ready = [_status("n1", "n1"), _status("n2", "n1"), _status("n3", "n1", ready=False)]
    ready = [_status(n, "n1") for n in ("n1", "n2", "n3")]
    c = Scripted([no_leader, not_ready, ready])
    assert c.wait_for_leader(5).id == "n1"
    # the dead check runs after each round that did not end the wait (over SSH it costs
    # a round trip per host): not before the first, not after the last
    assert len(c.timeouts) == 3 and c.dead_checks == 2
    at_once = Scripted([ready])
    assert at_once.wait_for_leader(5).id == "n1" and at_once.dead_checks == 0
    assert all(0.1 <= t <= 1.0 for t in c.timeouts)


def test_all_ready_false_takes_the_leader_alone_and_exclude_skips_one() -> None:
    cut_off = [_status("n1", "n1"), _status("n2", "n1"), _status("n3", None, ready=False)]
    assert Scripted([cut_off]).wait_for_leader(5, all_ready=False).id == "n1"
    moved = [_status("n1", "n2"), _status("n2", "n2"), _status("n3", "n2")]
    assert Scripted([cut_off, moved]).wait_for_leader(5, exclude=["n1"]).id == "n2"


def test_gives_up_after_its_timeout_naming_what_it_waited_for() -> None:
    c = Scripted([[_status("n1", "n1"), _status("n2", "n1"), _status("n3", "n1")]])
    start = time.monotonic()
    with pytest.raises(ClusterError) as info:
        c.wait_for_leader(0.3, exclude=["n1"])
    assert time.monotonic() - start < 1.5
    assert str(info.value).startswith(
        "waited 0.3s for an agreed leader other than ['n1'] and every node ready, gave up. "
        "Nodes said: n1: state=Leader"
    )


def test_leader_and_default_round_map_the_agreed_status_to_its_node(monkeypatch) -> None:
    class TwoLive(Scripted):
        _leader_round = Cluster._leader_round

        def _live_nodes(self) -> list[NodeInfo]:
            return list(self.nodes())[1:]

    seen: list[list[str]] = []

    def probe(urls: list[str], timeout: float) -> list[NodeStatus]:
        seen.append(urls)
        return [_status("n2", "n3"), _status("n3", "n3")]

    monkeypatch.setattr(base, "probe_nodes", probe)
    assert TwoLive([]).leader() == NodeInfo("n3", "http://n3")
    assert seen == [["http://n2", "http://n3"]]
    alone = [_status("n2", "n2"), _status("n3", None)]
    monkeypatch.setattr(base, "probe_nodes", lambda urls, timeout: alone)
    assert TwoLive([]).leader() is None  # one vote of three nodes (n1 is down) is no quorum


def test_no_backend_writes_its_own_loop() -> None:
    for backend in (LocalCluster, DockerCluster, ExternalCluster):
        assert "wait_for_leader" not in vars(backend), backend.__name__
        assert "leader" not in vars(backend), backend.__name__


def test_each_backend_keeps_its_message(tmp_path: Path) -> None:
    ports = free_ports(3)  # nothing listens there: every probe is refused
    ext = ExternalCluster([f"http://127.0.0.1:{ports[0]}"])
    with pytest.raises(ClusterError) as info:
        ext.wait_for_leader(0.2)
    assert str(info.value).startswith(
        "waited 0.2s for an agreed leader and every node ready in the external cluster, "
        f"gave up. Nodes said: http://127.0.0.1:{ports[0]}: unreachable"
    )
    specs = container_specs("t1", node_ids(3), ports, "rqlite/rqlite:x")
    docker = DockerCluster(None, "t1", specs)  # no engine: _raise_if_exited finds nothing
    with pytest.raises(ClusterError) as info:
        docker.wait_for_leader(0.2, all_ready=True)
    assert str(info.value).startswith(
        "docker cluster t1: waited 0s for an agreed leader and /readyz 200 on every live "
        f"node; saw http://127.0.0.1:{ports[0]}: unreachable"
    )
    spec = NodeSpec("n1", "127.0.0.1", ports[0], ports[1], str(tmp_path / "n1"))
    local = LocalCluster(tmp_path, "embedded", [spec])
    with pytest.raises(ClusterError) as info:
        local.wait_for_leader(0.2, all_ready=False)
    assert str(info.value) == (
        f"waited 0.2s for an agreed leader in {tmp_path.resolve()}, gave up. "
        "Nodes said: no running nodes"
    )


def test_local_reports_a_dead_node_at_once(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    spec = NodeSpec("n1", "127.0.0.1", 1, 2, str(tmp_path / "n1"), pid=gone.pid, state="running")
    local = LocalCluster(tmp_path, "embedded", [spec])
    start = time.monotonic()
    with pytest.raises(NodeDied, match=f"node n1 \\(pid {gone.pid}\\) died"):
        local.wait_for_leader(30)
    assert time.monotonic() - start < 5
