"""A one-way partition on the SSH backend's local test hosts (root): the leader that can
hear but not speak loses its leadership, the rules sit in the sender's OUTPUT only, the
harness still reaches every host, and a heal leaves no rule."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.cluster.base import probe_node
from harness.cluster.ssh.cluster import SshCluster
from tests.cluster.helpers import wait_until
from tests.ssh.conftest import SshTestHosts

pytestmark = [pytest.mark.slow, pytest.mark.root]


def _rules(hosts: SshTestHosts, name: str) -> list[str]:
    argv = ["ip", "netns", "exec", hosts.netns(name), "iptables", "-S"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return [r for r in out.splitlines() if "rqueue-ssh:" in r]


def test_a_leader_that_cannot_send_loses_leadership_and_heal_clears(
    ssh_hosts: SshTestHosts, tmp_path: Path
) -> None:
    cluster = SshCluster.start(ssh_hosts.inventory_path, 3, tmp_path / "c", timeout=90)
    try:
        lead = cluster.wait_for_leader(60)
        rest = [n.id for n in cluster.nodes() if n.id != lead.id]
        cluster.partition_one_way([(lead.id, n) for n in rest])
        rules = _rules(ssh_hosts, lead.id)
        assert len(rules) == 2 and all(r.startswith("-A OUTPUT -d ") for r in rules), rules
        assert not any(_rules(ssh_hosts, n) for n in rest), "the receivers carry no rules"
        cluster.wait_for_leader(60, all_ready=False, exclude=[lead.id])
        wait_until(lambda: not probe_node(lead.url).is_leader, 30, f"{lead.id} to step down")
        assert probe_node(lead.url, 2.0).error is None  # the harness still reaches it
        cluster.heal()
        assert [r for n in ("n1", "n2", "n3") for r in _rules(ssh_hosts, n)] == []
        cluster.wait_for_leader(60)
    finally:
        cluster.stop()
