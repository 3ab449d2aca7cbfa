"""Partitions on clusters with one network namespace per node (root only)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cluster.base import probe_node
from harness.cluster.local.cluster import LocalCluster
from harness.cluster.local.processes import our_processes
from harness.cluster.netns import NetnsNetwork, _list_links, _list_netns
from harness.cluster.partition import CHAIN
from tests.cluster.helpers import execute, rows, wait_until

pytestmark = [
    pytest.mark.root,
    pytest.mark.timeout(240),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]
ROOT = Path(__file__).resolve().parents[2]


def can_connect(c: LocalCluster, src: str, dst: str) -> bool:
    """Whether ``src``'s namespace can open a TCP connection to ``dst``'s HTTP port."""
    host, port = c._specs[dst].host, c._specs[dst].http_port
    code = (
        "import socket,sys\n"
        "try: socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=0.5)\n"
        "except OSError: sys.exit(1)\n"
    )
    argv = [*c._network.exec_prefix(src), sys.executable, "-c", code, host, str(port)]
    return subprocess.run(argv, timeout=30).returncode == 0


def chains(c: LocalCluster, node: str) -> str:
    argv = [*c._network.exec_prefix(node), "iptables", "-S"]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def test_isolated_leader_steps_down_majority_elects_heal_restores(make_cluster) -> None:
    c = make_cluster(3, netns=True)
    assert "partitions" in c.capabilities
    old = c.leader()
    others = [n.id for n in c.nodes() if n.id != old.id]
    execute(old.url, [["CREATE TABLE t (x INTEGER)"]])

    c.partition([[old.id], others])
    assert CHAIN in chains(c, old.id)
    assert not can_connect(c, old.id, others[0]) and can_connect(c, others[0], others[1])
    new = c.wait_for_leader(20, all_ready=False, exclude=[old.id])
    assert new.id in others
    wait_until(
        lambda: not probe_node(old.url).is_leader, 20, f"isolated {old.id} to give up leadership"
    )
    execute(new.url, [["INSERT INTO t VALUES (?)", 7]])  # the majority still commits

    c.heal()
    assert CHAIN not in chains(c, old.id)
    c.wait_for_leader(30)
    wait_until(lambda: rows(old.url, "SELECT x FROM t", level="none") == [[7]], 30, "catch-up")

    net = c._network
    c.stop()
    assert not [ns for ns in _list_netns() if ns.startswith(f"rqueue-{net.cid}")]
    assert net.bridge not in _list_links()


def test_five_nodes_majority_minority_and_bridge(make_cluster) -> None:
    c = make_cluster(5, netns=True)
    c.partition([["n1", "n2"], ["n3", "n4", "n5"]])
    lead = c.wait_for_leader(20, all_ready=False, exclude=["n1", "n2"])
    assert lead.id in ("n3", "n4", "n5")
    assert not can_connect(c, "n1", "n3") and can_connect(c, "n1", "n2")

    c.partition([["n1", "n2", "n3"], ["n3", "n4", "n5"]])  # replaces the first partition
    assert CHAIN not in chains(c, "n3"), "the bridge node gets no rules"
    assert can_connect(c, "n3", "n1") and can_connect(c, "n3", "n5")
    assert not can_connect(c, "n2", "n4") and can_connect(c, "n2", "n1")
    c.wait_for_leader(20, all_ready=False)

    c.heal()
    assert all(CHAIN not in chains(c, n) for n in ("n1", "n2", "n4", "n5"))
    c.wait_for_leader(30)


def test_ctrl_c_during_up_removes_everything(tmp_path) -> None:
    d = tmp_path / "c"
    argv = ["up", "--nodes", "3", "--dir", str(d), "--netns"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cluster.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        # interrupt once the namespaces exist and nodes are being started
        wait_until(lambda: (d / "cluster.json").exists(), 30, "cluster up to write its state")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode == 0:  # it won the race and finished starting
        LocalCluster.attach(d).stop()
    else:
        assert proc.returncode == 130, err
        assert "interrupted" in err
    assert not [p for p, owner in our_processes() if owner == str(d)]
    net = NetnsNetwork.from_json(json.loads((d / "cluster.json").read_text())["netns"])
    assert not [ns for ns in _list_netns() if ns.startswith(f"rqueue-{net.cid}")]
    assert net.bridge not in _list_links()
