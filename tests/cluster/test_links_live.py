"""Degraded links on a live cluster with one network namespace per node (root only): the
rules and qdiscs really land in the node's namespace, really act on its traffic, live
beside a partition, and leave nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.cluster.base import ClusterError
from harness.cluster.links import CHAIN, HANDLE, netem_problem
from harness.cluster.local.cluster import LocalCluster
from harness.cluster.netns import _list_netns
from harness.cluster.partition import CHAIN as PARTITION_CHAIN
from tests.cluster.helpers import wait_until

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]
#: a port no node uses, for the throughput probe
PROBE_PORT = 4999
#: bytes the probe sends: 1 s at 256 kbit/s
PROBE_BYTES = 32_000


def inside(c: LocalCluster, node: str, *argv: str) -> str:
    done = subprocess.run(
        [*c._network.exec_prefix(node), *argv], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def rules(c: LocalCluster, node: str) -> str:
    return inside(c, node, "iptables", "-S")


def qdiscs(c: LocalCluster, node: str) -> str:
    return inside(c, node, "tc", "qdisc", "show", "dev", "eth0")


def dropped(c: LocalCluster, node: str) -> int:
    """Packets the node's loss rules have dropped so far."""
    out = inside(c, node, "iptables", "-L", CHAIN, "-n", "-v", "-x")
    return sum(int(line.split()[0]) for line in out.splitlines() if "DROP" in line)


def send_seconds(c: LocalCluster, src: str, dst: str) -> float:
    """Seconds ``src`` takes to send :data:`PROBE_BYTES` over TCP to ``dst`` (its listener
    reads them all before it answers, so the time is the link's)."""
    host = c._specs[dst].host
    listen = (
        "import socket,sys\ns=socket.create_server((sys.argv[1],int(sys.argv[2])))\n"
        "print('up',flush=True)\nc,_=s.accept()\nn=0\n"
        "while n<int(sys.argv[3]):\n b=c.recv(65536)\n if not b: break\n n+=len(b)\n"
        "c.sendall(b'k')\n"
    )
    argv = [sys.executable, "-c", listen, host, str(PROBE_PORT), str(PROBE_BYTES)]
    server = subprocess.Popen(
        [*c._network.exec_prefix(dst), *argv], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "up"
        send = (
            "import socket,sys,time\nt=time.monotonic()\n"
            "s=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=20)\n"
            "s.sendall(b'x'*int(sys.argv[3]))\nassert s.recv(1)==b'k'\n"
            "print(time.monotonic()-t)\n"
        )
        out = inside(c, src, sys.executable, "-c", send, host, str(PROBE_PORT), str(PROBE_BYTES))
        return float(out)
    finally:
        server.kill()
        server.wait(timeout=10)


def test_loss_drops_the_nodes_traffic_beside_a_partition_and_heals_alone(make_cluster) -> None:
    c = make_cluster(3, netns=True)
    assert "links" in c.capabilities
    c.set_link_loss("n1", 0.5)
    assert f"-A {CHAIN} -s {c._specs['n2'].host}/32 -m statistic" in rules(c, "n1")
    assert f'--comment "rqueue-links:{c._network.cid}"' in rules(c, "n1")
    assert CHAIN not in rules(c, "n2") and CHAIN not in rules(c, "n3")
    # Raft's heartbeats between n1 and its peers meet the rules
    wait_until(lambda: dropped(c, "n1") > 5, 20, "n1's loss rules to drop packets")

    c.partition([["n1"], ["n2", "n3"]])
    c.heal()  # a partition's heal leaves the loss
    assert PARTITION_CHAIN not in rules(c, "n1") and CHAIN in rules(c, "n1")
    c.partition([["n1"], ["n2", "n3"]])
    c.clear_link_loss("n1")  # and a loss's end leaves the partition
    assert CHAIN not in rules(c, "n1") and PARTITION_CHAIN in rules(c, "n1")
    c.heal()
    assert "RQUEUE" not in rules(c, "n1")
    c.wait_for_leader(30)

    old = c.wait_for_leader(30).id
    c.set_link_loss(old, 1.0)  # every packet: the leader is cut off from its peers
    c.wait_for_leader(30, all_ready=False, exclude=[old])
    c.clear_link_loss(old)
    c.clear_link_loss(old)  # twice: nothing left to remove is fine
    c.wait_for_leader(30)


def test_a_slow_link_limits_what_the_node_sends_until_removed(make_cluster) -> None:
    c = make_cluster(3, netns=True)
    fast = send_seconds(c, "n1", "n2")
    c.set_link_shape("n1", "256kbit")
    assert f"qdisc tbf {HANDLE} root" in qdiscs(c, "n1") and "256Kbit" in qdiscs(c, "n1")
    assert "tbf" not in qdiscs(c, "n2")
    slow = send_seconds(c, "n1", "n2")
    assert slow > 0.6 and slow > 5 * fast, (fast, slow)
    back = send_seconds(c, "n2", "n1")  # what n1 receives is not limited
    assert back < slow / 3, (back, slow)
    c.set_link_shape("n1", "1mbit")  # a new shape replaces the old
    assert "1Mbit" in qdiscs(c, "n1") and qdiscs(c, "n1").count("tbf") == 1
    c.clear_link_shape("n1")
    assert HANDLE not in qdiscs(c, "n1")
    assert send_seconds(c, "n1", "n2") < slow / 3
    if netem_problem() is not None:  # this kernel has no netem: a delay is refused, named
        with pytest.raises(ClusterError, match="netem"):
            c.set_link_shape("n1", "1mbit", delay=20)
        assert HANDLE not in qdiscs(c, "n1")


def test_nothing_is_left_after_a_cluster_with_degraded_links_stops(make_cluster) -> None:
    c = make_cluster(3, netns=True)
    c.set_link_loss("n1", 0.3)
    c.set_link_shape("n2", "512kbit")
    namespaces = [m.netns for m in c._network.members.values()]
    c.stop()  # without clearing them: the rules and qdiscs go with the namespaces
    left = _list_netns()
    assert not [ns for ns in namespaces if ns in left]
    assert not [ns for ns in left if ns.startswith("rqueue-netem-probe")]


def test_a_loopback_cluster_refuses_links_in_one_line(make_cluster) -> None:
    c = make_cluster(1)
    assert "links" not in c.capabilities
    with pytest.raises(ClusterError, match="the embedded backend cannot degrade a node's links"):
        c.set_link_loss("n1", 0.3)
    c.clear_link_loss("n1")  # nothing to clear
