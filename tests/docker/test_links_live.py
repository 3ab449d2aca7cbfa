"""Degraded links on a real Docker engine (``pytest -m chaos tests/docker``): the loss
rules and the qdisc land in the container's network namespace, act on its traffic, come
back when the container starts again, live beside a partition, and nothing of them is
left on the host or the engine after the cluster is gone."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest

from harness.cluster.docker import cluster as db
from harness.cluster.docker import lifecycle as lc
from harness.cluster.links import CHAIN, HANDLE
from harness.cluster.partition import CHAIN as PARTITION_CHAIN

from .conftest import host_rules, leftovers

pytestmark = pytest.mark.chaos


@pytest.fixture(scope="module")
def cluster(docker_cluster: db.DockerCluster) -> db.DockerCluster:
    if "links" not in docker_cluster.capabilities:
        pytest.skip(docker_cluster.capability_problem("links") or "no links")
    return docker_cluster


def inside(cluster: db.DockerCluster, node_id: str, *argv: str) -> str:
    c = cluster._container(node_id)
    c.reload()
    cmd = db.nsenter_argv(int(c.attrs["State"]["Pid"]), list(argv))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=15, check=True).stdout


def dropped(cluster: db.DockerCluster, node_id: str) -> int:
    out = inside(cluster, node_id, "iptables", "-L", CHAIN, "-n", "-v", "-x")
    return sum(int(line.split()[0]) for line in out.splitlines() if "DROP" in line)


def wait_for(check: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"waited {seconds:g} s for {what}"
        time.sleep(0.25)


def test_loss_rules_act_in_the_namespace_and_come_back_after_a_restart(cluster) -> None:
    lead = cluster.wait_for_leader(60).id
    peer = next(n.id for n in cluster.nodes() if n.id != lead)
    cluster.set_link_loss(lead, 0.5)
    try:
        said = inside(cluster, lead, "iptables", "-S")
        assert f'--comment "rqueue-links:{cluster.cluster_id}"' in said
        assert "-m statistic --mode random --probability 0.5" in said
        assert CHAIN not in inside(cluster, peer, "iptables", "-S")
        wait_for(lambda: dropped(cluster, lead) > 5, 30, f"{lead}'s loss rules to drop packets")
        cluster.partition([[lead], [n.id for n in cluster.nodes() if n.id != lead]])
        cluster.heal()  # a partition's heal leaves the loss alone
        assert CHAIN in inside(cluster, lead, "iptables", "-S")
        cluster.kill(lead)
        cluster.restart(lead)  # a new namespace: the loss is put back on it
        wait_for(lambda: CHAIN in inside(cluster, lead, "iptables", "-S"), 30, "the rules back")
    finally:
        cluster.clear_link_loss(lead)
    said = inside(cluster, lead, "iptables", "-S")
    assert CHAIN not in said and PARTITION_CHAIN not in said
    cluster.wait_for_leader(60)


def test_a_slow_link_is_a_qdisc_in_the_namespace_until_cleared(cluster) -> None:
    node = cluster.wait_for_leader(60).id
    cluster.set_link_shape(node, "256kbit")
    try:
        shown = inside(cluster, node, "tc", "qdisc", "show", "dev", "eth0")
        assert f"qdisc tbf {HANDLE} root" in shown and "256Kbit" in shown
    finally:
        cluster.clear_link_shape(node)
    assert HANDLE not in inside(cluster, node, "tc", "qdisc", "show", "dev", "eth0")
    cluster.wait_for_leader(60)


def test_nothing_of_the_links_is_left_once_the_cluster_is_gone(engine, node_image, tmp_path):
    c = lc.start_docker_cluster(nodes=3, directory=tmp_path, timeout=120, image=node_image)
    try:
        if "links" not in c.capabilities:
            pytest.skip(c.capability_problem("links") or "no links")
        c.set_link_loss("n1", 0.3)
        c.set_link_shape("n2", "512kbit")
        assert not [r for r in host_rules() if CHAIN in r]  # in the containers, not the host
    finally:
        c.stop()  # without clearing them: they go with the containers' namespaces
    found = leftovers(engine)
    assert not [n for n in found["containers"] if c.cluster_id in n], found
    assert not [n for n in found["networks"] if c.cluster_id in n], found
    assert not [r for r in host_rules() if CHAIN in r]
