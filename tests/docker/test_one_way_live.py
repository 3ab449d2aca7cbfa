"""A one-way partition on a real engine with the project's node image (``pytest -m chaos
tests/docker``; skipped, saying why, where no engine answers or partitions cannot run):
the rules sit in the sending containers' namespaces only, the others elect a leader, a
heal leaves no rule, and the cluster serves again."""

from __future__ import annotations

import subprocess

import pytest

from harness.cluster import partition as rules
from harness.cluster.base import probe_node
from harness.cluster.docker import cluster as db
from tests.cluster.helpers import wait_until

pytestmark = pytest.mark.chaos


def _netns_rules(cluster: db.DockerCluster, node_id: str) -> str:
    c = cluster._container(node_id)
    c.reload()
    argv = db.nsenter_argv(int(c.attrs["State"]["Pid"]), ["iptables", "-S"])
    return subprocess.run(argv, capture_output=True, text=True, timeout=15, check=True).stdout


def test_a_leader_that_cannot_hear_is_replaced_and_heal_clears(
    docker_cluster: db.DockerCluster,
) -> None:
    cluster = docker_cluster
    if "partitions" not in cluster.capabilities:
        pytest.skip("partitions need root, nsenter and iptables on the Docker host")
    lead = cluster.wait_for_leader(60)
    others = [n.id for n in cluster.nodes() if n.id != lead.id]
    cluster.partition_one_way([(n, lead.id) for n in others])  # their packets to it die
    try:
        assert rules.CHAIN not in _netns_rules(cluster, lead.id), "the receiver has no rule"
        for n in others:
            assert f"-A {rules.CHAIN} -d " in _netns_rules(cluster, n), n
        wait_until(
            lambda: (new := cluster.leader()) is not None and new.id in others,
            30,
            "a leader among the nodes whose packets to the old leader are dropped",
        )
        assert probe_node(lead.url, 2.0).error is None  # the harness still reaches it
    finally:
        cluster.heal()
    for n in cluster.nodes():
        assert rules.CHAIN not in _netns_rules(cluster, n.id), n.id
    cluster.wait_for_leader(60)
