"""One-way partitions on a local cluster with one network namespace per node (root only):
packets pass one way and not the other, Raft loses its leader under both directions, and
a heal leaves no rule behind."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.cluster.base import probe_node
from harness.cluster.local.cluster import LocalCluster
from harness.cluster.partition import CHAIN
from tests.cluster.helpers import execute, rows, wait_until

pytestmark = [
    pytest.mark.root,
    pytest.mark.timeout(240),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]

#: the port the datagram probe uses on the receiving node's address (no node listens there)
PROBE_PORT = 4999
#: how long a receiver waits for a datagram that should arrive (or should not)
RECEIVE_WAIT = 1.5

_RECEIVER = (
    "import socket,sys\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "s.bind((sys.argv[1], int(sys.argv[2])))\n"
    "s.settimeout(float(sys.argv[3]))\n"
    "print('ready', flush=True)\n"
    "try: print(s.recv(64).decode(), flush=True)\n"
    "except TimeoutError: print('nothing', flush=True)\n"
)
_SENDER = (
    "import socket,sys\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "for _ in range(3):\n"
    "    try: s.sendto(b'hello', (sys.argv[1], int(sys.argv[2])))\n"
    "    except PermissionError: pass\n"  # dropped in OUTPUT: the kernel says EPERM
)


def datagram_arrives(c: LocalCluster, src: str, dst: str) -> bool:
    """Whether a UDP datagram ``src`` sends to ``dst``'s address arrives there (a
    receiver in ``dst``'s namespace waits :data:`RECEIVE_WAIT` s for it)."""
    net, host = c._network, c._specs[dst].host
    argv = [*net.exec_prefix(dst), sys.executable, "-c", _RECEIVER, host, str(PROBE_PORT)]
    receiver = subprocess.Popen([*argv, str(RECEIVE_WAIT)], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        assert receiver.stdout.readline().strip() == "ready"
        send = [*net.exec_prefix(src), sys.executable, "-c", _SENDER, host, str(PROBE_PORT)]
        subprocess.run(send, check=True, timeout=30)
        out, _ = receiver.communicate(timeout=30)
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
    return out.strip() == "hello"


def chains(c: LocalCluster, node: str) -> str:
    argv = [*c._network.exec_prefix(node), "iptables", "-S"]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def test_packets_pass_one_way_only_and_heal_removes_every_rule(make_cluster) -> None:
    c = make_cluster(3, netns=True)
    assert datagram_arrives(c, "n1", "n2") and datagram_arrives(c, "n2", "n1")

    c.partition_one_way([("n1", "n2")])
    assert CHAIN in chains(c, "n1")
    assert all(CHAIN not in chains(c, n) for n in ("n2", "n3")), "rules on the sender only"
    assert datagram_arrives(c, "n2", "n1"), "n2's packets to n1 must still pass"
    assert not datagram_arrives(c, "n1", "n2"), "n1's packets to n2 must be dropped"
    assert datagram_arrives(c, "n1", "n3"), "n1's packets to n3 are not cut"

    c.heal()
    assert all(CHAIN not in chains(c, n) for n in ("n1", "n2", "n3"))
    assert datagram_arrives(c, "n1", "n2")


@pytest.mark.parametrize("direction", ["out", "in"])
def test_the_leader_cut_one_way_loses_its_leadership_and_catches_up(
    make_cluster, direction: str
) -> None:
    c = make_cluster(3, netns=True)
    old = c.leader()
    others = [n.id for n in c.nodes() if n.id != old.id]
    execute(old.url, [["CREATE TABLE t (x INTEGER)"]])
    # out: it hears the others but cannot speak to them; in: it speaks but cannot hear
    cuts = [(old.id, n) if direction == "out" else (n, old.id) for n in others]

    c.partition_one_way(cuts)
    new = c.wait_for_leader(30, all_ready=False, exclude=[old.id])
    assert new.id in others
    wait_until(
        lambda: not probe_node(old.url).is_leader, 30, f"{old.id} cut {direction} to step down"
    )
    execute(new.url, [["INSERT INTO t VALUES (?)", 7]])  # the two others still commit

    c.heal()
    assert all(CHAIN not in chains(c, n) for n in (old.id, *others))
    c.wait_for_leader(30)
    wait_until(lambda: rows(old.url, "SELECT x FROM t", level="none") == [[7]], 30, "catch-up")
