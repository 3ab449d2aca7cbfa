"""Pure parts of the cluster manager: argv building, versions, clocks, URLs, leadership."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from harness.cluster import netns
from harness.cluster.base import ClusterError, NodeStatus, agreed_leader
from harness.cluster.engines import (
    NodeSpec,
    embedded_argv,
    faketime_env,
    faketime_offset,
    parse_rqlited_version,
    rqlited_argv,
)
from harness.cluster.external.cluster import ExternalCluster, parse_urls
from harness.cluster.local import cluster as local
from harness.cluster.local.cluster import LocalCluster
from harness.cluster.ports import PORT_FLOOR, ephemeral_port_range, free_ports


def _specs(n: int = 3) -> list[NodeSpec]:
    return [
        NodeSpec(f"n{i}", "127.0.0.1", 4000 + 10 * i + 1, 4000 + 10 * i + 2, f"/d/n{i}")
        for i in range(1, n + 1)
    ]


def test_embedded_argv_names_every_other_node_as_peer() -> None:
    s = _specs()
    assert embedded_argv(s[0], s, python="py") == [
        "py", "-m", "harness.node", "--node-id", "n1",
        "--http-addr", "127.0.0.1:4011", "--raft-addr", "127.0.0.1:4012",
        "--peer", "n2,127.0.0.1:4022,127.0.0.1:4021",
        "--peer", "n3,127.0.0.1:4032,127.0.0.1:4031",
        "--data-dir", "/d/n1/data", "--clock-offset-file", "/d/n1/clock-offset",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("rqlited 8.36.1 linux/amd64 go1.22.5 commit 1a2b branch master", (8, 36, 1)),
        ("rqlited v7.21.4 (commit abc, branch master, compiler gc)", (7, 21, 4)),
        ("\nrqlited v6.10.2 linux amd64 go1.15 (commit x, branch y, compiler gc)", (6, 10, 2)),
    ],
)
def test_parse_rqlited_version(text: str, version: tuple[int, int, int]) -> None:
    assert parse_rqlited_version(text) == version


def test_parse_rqlited_version_names_bad_output() -> None:
    with pytest.raises(ClusterError, match="cannot read a version"):
        parse_rqlited_version("command not understood")
    with pytest.raises(ClusterError, match="cannot read a version"):  # a path is not a version
        parse_rqlited_version("/opt/rqlited-v8.36.18: exec format error")


def test_rqlited_v8_bootstraps_with_every_raft_address() -> None:
    s = _specs()
    assert rqlited_argv("/bin/rqlited", (8, 36, 1), s[1], s) == [
        "/bin/rqlited", "-node-id", "n2", "-http-addr", "127.0.0.1:4021",
        "-raft-addr", "127.0.0.1:4022", "-bootstrap-expect", "3",
        "-join", "127.0.0.1:4012,127.0.0.1:4022,127.0.0.1:4032", "/d/n2/data",
    ]  # fmt: skip


def test_rqlited_v7_joins_the_first_node_over_http() -> None:
    s = _specs()
    first = rqlited_argv("r", (7, 21, 4), s[0], s)
    assert "-join" not in first and "-bootstrap-expect" not in first
    assert rqlited_argv("r", (7, 21, 4), s[2], s)[-3:] == [
        "-join",
        "http://127.0.0.1:4011",
        "/d/n3/data",
    ]


def test_rqlited_single_node_has_no_join() -> None:
    s = _specs(1)
    assert "-join" not in rqlited_argv("r", (8, 0, 0), s[0], s)


def test_rqlited_too_old() -> None:
    with pytest.raises(ClusterError, match="too old"):
        rqlited_argv("r", (5, 1, 0), _specs()[0], _specs())


def test_faketime_environment_and_offsets() -> None:
    env = faketime_env(Path("/d/n1/clock-offset"), "/lib/libfaketime.so.1")
    assert env["LD_PRELOAD"] == "/lib/libfaketime.so.1"
    assert env["FAKETIME_TIMESTAMP_FILE"] == "/d/n1/clock-offset"
    assert env["FAKETIME_NO_CACHE"] == "1"
    assert faketime_offset(2.5) == "+2.500000"
    assert faketime_offset(-30) == "-30.000000"


def test_missing_rqlited_binary_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ClusterError, match="needs the rqlited binary"):
        LocalCluster.start(nodes=3, directory=tmp_path / "c", engine="rqlited")
    with pytest.raises(ClusterError, match="does not exist or is not executable"):
        LocalCluster.start(
            nodes=3, directory=tmp_path / "c", engine="rqlited", rqlited=tmp_path / "nope"
        )
    assert not (tmp_path / "c" / local.STATE_FILE).exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 0}, "positive integer"),
        ({"nodes": "3"}, "positive integer"),
        ({"engine": "etcd"}, "unknown engine 'etcd'"),
    ],
)
def test_bad_start_arguments(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(ClusterError, match=message):
        LocalCluster.start(directory=tmp_path / "c", **kwargs)


def test_netns_without_root_says_partitions_need_root(monkeypatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    with pytest.raises(ClusterError, match="partitions need root"):
        netns.require_root()


def test_attach_without_state_names_the_directory(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match=f"no cluster in {tmp_path}"):
        LocalCluster.attach(tmp_path)


def test_loopback_cluster_cannot_partition(tmp_path: Path) -> None:
    c = LocalCluster(tmp_path, "embedded", _specs())
    with pytest.raises(ClusterError, match="netns=True"):
        c.partition([["n1"], ["n2", "n3"]])
    with pytest.raises(ClusterError, match="no node 'n9'"):
        c.kill("n9")
    with pytest.raises(ClusterError, match="finite number"):
        c.set_clock_offset("n1", float("nan"))


def _st(node: str, state: str, leader: str | None, error: str | None = None) -> NodeStatus:
    return NodeStatus(f"http://{node}", node, state, leader, None, True, error)


def test_agreed_leader_needs_a_majority_of_the_whole_cluster() -> None:
    ok = [_st("n1", "Leader", "n1"), _st("n2", "Follower", "n1"), _st("n3", "Follower", None)]
    assert agreed_leader(ok, 3).node_id == "n1"
    assert agreed_leader(ok[:1], 3) is None  # only itself
    stale = [
        _st("n1", "Leader", "n1"),
        _st("n2", "Leader", "n2"),
        _st("n3", "Follower", "n2"),
    ]
    assert agreed_leader(stale, 3).node_id == "n2"
    assert agreed_leader([_st("n1", "Follower", "n1")], 1) is None


def test_external_urls_are_validated() -> None:
    assert parse_urls(" http://a:4001, http://b:4011/ ") == ["http://a:4001", "http://b:4011"]
    for bad, message in [
        ("", "names no URL"),
        ("a:4001", "expected http"),
        ("http://a", "expected http"),
        ("http://a:1,http://a:1", "twice"),
    ]:
        with pytest.raises(ClusterError, match=message):
            parse_urls(bad)


def test_external_cluster_cannot_be_controlled() -> None:
    c = ExternalCluster(["http://127.0.0.1:9"])
    for call in (
        lambda: c.kill("n1"),
        lambda: c.restart("n1"),
        lambda: c.pause("n1"),
        lambda: c.resume("n1"),
        lambda: c.partition([["n1"], ["n2"]]),
        lambda: c.set_clock_offset("n1", 1.0),
    ):
        with pytest.raises(ClusterError, match="cannot control an external cluster"):
            call()
    c.stop()
    assert c.leader(timeout=0.2) is None  # nothing listens on port 9


def test_netns_names_fit_interface_limits() -> None:
    net = netns.NetnsNetwork(cid="a1b2c3", octet=7)
    assert len(net.bridge) <= 15
    assert net.gateway == "127.77.7.1" and net.subnet == "127.77.7.0/24"
    assert len(f"{netns.VETH_PREFIX}{net.cid}-12") <= 15
    assert os.sep not in net.bridge


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    ports = free_ports(10)
    low, _ = ephemeral_port_range()
    assert len(set(ports)) == 10
    assert all(PORT_FLOOR <= p < low for p in ports)
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_rqlited_joining_a_running_cluster_names_the_members_not_bootstrap() -> None:
    s = _specs(4)
    s[3].join = f"{s[0].http_addr},{s[2].http_addr}"
    v10 = rqlited_argv("r", (10, 2, 7), s[3], s)
    assert "-bootstrap-expect" not in v10
    assert v10[v10.index("-join") + 1] == "127.0.0.1:4012,127.0.0.1:4032"  # Raft addresses
    v7 = rqlited_argv("r", (7, 21, 4), s[3], s)
    assert v7[v7.index("-join") + 1] == "http://127.0.0.1:4011,http://127.0.0.1:4031"
    # a member from the start restarted: bootstraps with the members from the start only
    first = rqlited_argv("r", (10, 2, 7), s[0], s)
    assert first[first.index("-bootstrap-expect") + 1] == "3"
    assert "127.0.0.1:4042" not in first[first.index("-join") + 1]
    s[3].join = "10.9.9.9:1"
    with pytest.raises(ClusterError, match=r"joins through 10\.9\.9\.9:1, none of the nodes"):
        rqlited_argv("r", (10, 2, 7), s[3], s)
