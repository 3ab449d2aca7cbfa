"""Forwarded replies lost over SSH on local test hosts: the rule lands on the follower's
host alone, under the run's comment; a write the follower forwards is applied by the
leader while the follower never gets the answer; clear removes the rule and stop removes
one left behind (the fixture checks no ``rqueue-ssh`` rule is left)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.cluster.ssh import forward
from harness.cluster.ssh.cluster import SshCluster
from tests.cluster.helpers import execute, outcome, rows, wait_until
from tests.ssh.conftest import SshTestHosts

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.timeout(300)]


def write(url: str, value: int, timeout: float) -> str:
    return outcome(f"{url}/db/execute?timeout=1s", [["INSERT INTO t(v) VALUES(?)", value]], timeout)


def host_rules(hosts: SshTestHosts, name: str) -> str:
    argv = ["ip", "netns", "exec", hosts.netns(name), "iptables", "-w", "5", "-S", "INPUT"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout


def test_a_follower_host_loses_the_leaders_forwarded_replies(
    ssh_hosts: SshTestHosts, tmp_path: Path
) -> None:
    c = SshCluster.start(ssh_hosts.inventory_path, 3, tmp_path / "c", timeout=90)
    try:
        assert "links" in c.capabilities, c.capability_problem("links")
        leader = c.wait_for_leader(60).id
        follower, other = [n.id for n in c.nodes() if n.id != leader]
        urls = {n.id: n.url for n in c.nodes()}
        execute(urls[leader], ["CREATE TABLE t (v INTEGER)"])
        c.set_forward_reply_loss(follower, leader)
        note = forward.comment(c.run)
        assert note in host_rules(ssh_hosts, follower)
        assert note not in host_rules(ssh_hosts, leader) + host_rules(ssh_hosts, other)
        port = c.forward_port(leader)
        assert f"--sport {port}" in host_rules(ssh_hosts, follower)

        assert write(urls[follower], 1, timeout=4.0).startswith("error")
        # the project's node follows rqlite v10.2.7: the write is sent once more on a new
        # connection, and the leader applies it twice
        wait_until(lambda: rows(urls[leader], "SELECT v FROM t") == [[1], [1]], 10, "the leader")
        assert write(urls[other], 2, timeout=10.0) == "ok"
        c.clear_forward_reply_loss(follower)
        assert note not in host_rules(ssh_hosts, follower)
        wait_until(lambda: write(urls[follower], 3, timeout=10.0) == "ok", 20, "forwarding")
        c.set_forward_reply_loss(follower, leader)  # left for stop to remove
    finally:
        c.stop()
