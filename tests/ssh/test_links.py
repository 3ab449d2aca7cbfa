"""Degraded links over SSH on local test hosts, measured: a loss drops connections to a
peer's node port (and not to its SSH port), a shape slows a transfer to a node port (and
not the harness's SSH session), and clear, stop and the sweep after a crashed run leave
no rule, chain or qdisc on the hosts.

The clusters here have two nodes on the three test hosts: the third host (``n3``) runs
no node, so its node port takes a sink of the test's own for the transfers, which leave
the shaped host by the same interface and match the same node-port filters."""

from __future__ import annotations

import json
import os
import select
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster.base import ClusterError
from harness.cluster.ssh.cluster import SshCluster
from tests.ssh.conftest import SshTestHosts

pytestmark = [pytest.mark.slow, pytest.mark.root]
ROOT = Path(__file__).resolve().parents[2]

#: on the host: connect ``count`` times to ADDRESS:PORT (0.3 s each); print the failures
CONNECTS = """
import socket, sys
fails = 0
for _ in range(int(sys.argv[3])):
    try:
        socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=0.3).close()
    except OSError:
        fails += 1
print(fails)
"""
#: on the host: send N bytes to ADDRESS:PORT, wait for the sink's "ok"; print the seconds
SEND = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)
t = time.monotonic()
s.sendall(b"x" * int(sys.argv[3]))
s.shutdown(socket.SHUT_WR)
assert s.recv(2) == b"ok"
print(time.monotonic() - t)
"""
#: in a host's namespace: take connections on ADDRESS:PORT, read each to its end, answer ok
SINK = """
import socket, sys
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
while True:
    c, _ = srv.accept()
    while c.recv(65536):
        pass
    c.sendall(b"ok")
    c.close()
"""


def _ns(hosts: SshTestHosts, name: str, *argv: str) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", hosts.netns(name), *argv],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout


def left_on(hosts: SshTestHosts) -> list[str]:
    """Every rule, chain or qdisc of the harness's links on the test hosts."""
    left = []
    for h in hosts.inventory.hosts:
        rules = _ns(hosts, h.name, "iptables-save")
        left += [f"{h.name}: {r}" for r in rules.splitlines() if "RQUEUE-LINKS" in r]
        left += [f"{h.name}: {r}" for r in rules.splitlines() if "rqueue-ssh" in r]
        qdiscs = _ns(hosts, h.name, "tc", "qdisc", "show")
        left += [
            f"{h.name}: {q}" for q in qdiscs.splitlines() if " root " in q and "noqueue" not in q
        ]
        left += [f"{h.name}: {q}" for q in qdiscs.splitlines() if " parent " in q]
    return left


@pytest.fixture
def cluster(ssh_hosts: SshTestHosts, tmp_path: Path) -> Iterator[SshCluster]:
    c = SshCluster.start(ssh_hosts.inventory_path, 2, tmp_path / "c", timeout=90)
    try:
        assert "links" in c.capabilities
        yield c
    finally:
        c.stop()
    assert left_on(ssh_hosts) == [], "stop left links behind"


@pytest.fixture
def sink(ssh_hosts: SshTestHosts) -> Iterator[tuple[str, int]]:
    """A sink on n3's node port (n3 runs no node in these clusters)."""
    h = ssh_hosts.inventory.hosts[2]
    argv = ["ip", "netns", "exec", ssh_hosts.netns(h.name), sys.executable, "-c", SINK]
    proc = subprocess.Popen([*argv, h.address, str(h.http_port)], stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready and proc.stdout.readline().strip() == "listening", "the sink did not listen"
        yield h.address, h.http_port
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _py(cluster: SshCluster, node: str, script: str, *args: object, timeout: float = 60) -> str:
    argv = shlex.join(["python3", "-c", script, *map(str, args)])
    return cluster.sessions[node].run(argv, timeout=timeout).out


def _fails(cluster: SshCluster, node: str, address: str, port: int, count: int) -> int:
    return int(_py(cluster, node, CONNECTS, address, port, count))


def _send(cluster: SshCluster, node: str, to: tuple[str, int], size: int) -> float:
    return float(_py(cluster, node, SEND, to[0], to[1], size))


def test_loss_drops_a_peers_node_port_and_spares_ssh(
    cluster: SshCluster, ssh_hosts: SshTestHosts
) -> None:
    n2 = cluster.inventory.hosts[1]
    assert _fails(cluster, "n1", n2.address, n2.http_port, 10) == 0  # healthy

    cluster.set_link_loss("n1", 1.0)
    assert _fails(cluster, "n1", n2.address, n2.http_port, 10) == 10
    assert _fails(cluster, "n1", n2.address, 22, 5) == 0  # the peer's sshd: not a node port
    assert cluster.sessions["n1"].run("echo still here").out == "still here\n"

    # a partition's heal leaves the loss; the loss's end leaves the partition
    cluster.partition([["n1"], ["n2"]])
    cluster.heal()
    assert _fails(cluster, "n1", n2.address, n2.http_port, 5) == 5

    cluster.set_link_loss("n1", 0.5)  # replaces: SYN out and SYN-ACK back, each kept 1 in 2
    fails = _fails(cluster, "n1", n2.address, n2.http_port, 40)
    assert 15 <= fails <= 39, f"{fails} of 40 connects failed at a loss of 50% each way"

    cluster.partition([["n1"], ["n2"]])
    cluster.clear_link_loss("n1")
    assert _fails(cluster, "n1", n2.address, n2.http_port, 3) == 3  # the partition holds
    cluster.heal()
    assert _fails(cluster, "n1", n2.address, n2.http_port, 10) == 0
    assert left_on(ssh_hosts) == []
    cluster.set_link_loss("n2", 0.3)  # left for stop to remove (the fixture checks)


def test_a_shape_slows_node_ports_and_spares_ssh(
    cluster: SshCluster, ssh_hosts: SshTestHosts, sink: tuple[str, int]
) -> None:
    size = 256 * 1024
    base = _send(cluster, "n1", sink, size)

    cluster.set_link_shape("n1", "1mbit")
    slowed = _send(cluster, "n1", sink, size)
    floor = size * 8 / 1_000_000  # 2.1 s at 1 mbit/s (less the tbf's 8 KiB bucket)
    assert slowed >= 0.7 * floor, f"{size} B in {slowed:.2f}s at 1mbit ({floor:.2f}s expected)"
    assert slowed >= 4 * base, f"shaped {slowed:.2f}s against {base:.2f}s unshaped"
    assert slowed <= 10 * floor + 5, f"{size} B in {slowed:.2f}s at 1mbit"

    cluster.set_link_shape("n1", "8kbit")  # 256 KiB of SSH would take 4 minutes at this rate
    t = time.monotonic()
    out = cluster.sessions["n1"].run(f"head -c {size} /dev/zero | wc -c", timeout=30).out
    assert int(out) == size
    assert time.monotonic() - t < 20
    qdiscs = _ns(ssh_hosts, "n1", "tc", "qdisc", "show", "dev", "eth0")
    assert "qdisc htb 5" in qdiscs and "qdisc tbf 4151:" in qdiscs and "rate 8Kbit" in qdiscs

    problem = cluster.link_delay_problem()
    if problem is None:  # the kernel has netem: a delay goes above the tbf
        cluster.set_link_shape("n1", "1mbit", delay=20)
        assert "netem 4152:" in _ns(ssh_hosts, "n1", "tc", "qdisc", "show", "dev", "eth0")
    else:
        assert problem.startswith("host n1: a link delay needs netem")
        with pytest.raises(ClusterError, match="a link delay needs netem"):
            cluster.set_link_shape("n1", "1mbit", delay=20)

    cluster.clear_link_shape("n1")
    assert left_on(ssh_hosts) == []
    assert _send(cluster, "n1", sink, size) < slowed / 4
    cluster.set_link_shape("n2", "1mbit")  # left for stop to remove (the fixture checks)


def test_the_sweep_removes_a_crashed_runs_links(ssh_hosts: SshTestHosts, tmp_path: Path) -> None:
    cluster = SshCluster.start(ssh_hosts.inventory_path, 3, tmp_path / "c", timeout=90)
    try:
        cluster.set_link_loss("n1", 0.2)
        cluster.set_link_shape("n1", "1mbit")
        cluster.set_link_loss("n2", 0.2)
        cluster.set_link_shape("n3", "1mbit")
        cluster.partition([["n1"], ["n2", "n3"]])
    except BaseException:
        cluster.stop()
        raise
    cluster.close()  # the harness "crashed": nothing was stopped
    assert len(left_on(ssh_hosts)) > 10
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "harness", "cluster", "down", "--backend", "ssh"]
    down = subprocess.run(
        [*argv, "--inventory", str(ssh_hosts.inventory_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert down.returncode == 0, down.stderr
    removed = json.loads(down.stdout)["removed"]
    assert any(line.startswith("-X RQUEUE-LINKS-") for line in removed["n1"])
    assert any(line.startswith("tc qdisc del dev eth0 root handle 5") for line in removed["n3"])
    assert left_on(ssh_hosts) == []  # and the fixture checks nodes, folders and rules
