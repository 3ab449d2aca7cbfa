"""The namespaces' bridge on a host whose FORWARD chain drops (as a Docker daemon sets it).

With ``br_netfilter`` loaded, packets that a bridge forwards between its ports pass the
root namespace's iptables ``FORWARD`` chain. Docker sets that chain's policy to ``DROP``;
these tests put a ``DROP`` for the test's own bridge at the chain's end (the same effect,
on any host, touching nothing else) and check that the nodes still reach each other, and
that the project's own ``FORWARD`` rule goes away with its network, leaving the chain as
it was.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster import netns
from harness.cluster.netns import NetnsNetwork, forward_rule_cids, sweep_unrecorded

BR_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
pytestmark = [
    pytest.mark.root,
    pytest.mark.netns_alone,  # the FORWARD chain compared; the reaper removes every network
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]


#: a Docker user network's bridge
DOCKER_BRIDGE = re.compile(r"\bbr-[0-9a-f]{12}\b")


def forward_chain(mine: NetnsNetwork | None = None) -> list[str]:
    """The FORWARD chain, less the rules of the project's networks other than ``mine``
    (those of test sessions running beside this one; this session's own wait: the module
    is marked ``netns_alone``) and of Docker's user networks (``br-`` and 12 hex digits:
    Docker clusters of tests beside this one add and remove theirs)."""
    out = subprocess.run(["iptables", "-w", "5", "-S", "FORWARD"], capture_output=True, text=True)
    return [
        line
        for line in out.stdout.splitlines()
        if (netns.BRIDGE_PREFIX not in line or (mine is not None and mine.bridge in line))
        and not DOCKER_BRIDGE.search(line)
    ]


def drop_rule(net: NetnsNetwork) -> list[str]:
    return ["-i", net.bridge, "-o", net.bridge, "-j", "DROP"]


@pytest.fixture
def dropping_network() -> Iterator[NetnsNetwork]:
    """A two-member network whose bridged packets the FORWARD chain would drop."""
    if not BR_NF.exists() or BR_NF.read_text().strip() != "1":
        pytest.skip("br_netfilter is not loaded: bridged packets skip iptables on this host")
    net = NetnsNetwork.create(["n1", "n2"], owner="test_forward_drop")
    netns.run(["iptables", "-w", "5", "-A", "FORWARD", *drop_rule(net)])
    try:
        yield net
    finally:
        netns.run(["iptables", "-w", "5", "-D", "FORWARD", *drop_rule(net)], check=False)
        net.teardown()


def reaches(net: NetnsNetwork, src: str, dst: str) -> bool:
    """Whether a TCP server in ``dst``'s namespace accepts a connection from ``src``'s."""
    ip = net.members[dst].ip
    server = subprocess.Popen(
        [
            *net.exec_prefix(dst), sys.executable, "-c",
            "import socket,sys\n"
            "s=socket.create_server((sys.argv[1],0)); print(s.getsockname()[1], flush=True)\n"
            "s.settimeout(5)\n"
            "try: s.accept()\n"
            "except OSError: pass\n",
            ip,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip()
        code = (
            "import socket,sys\n"
            "try: socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)\n"
            "except OSError: sys.exit(1)\n"
        )
        argv = [*net.exec_prefix(src), sys.executable, "-c", code, ip, port]
        return subprocess.run(argv, timeout=30).returncode == 0
    finally:
        server.kill()
        server.wait(timeout=10)


def test_members_reach_each_other_when_forward_drops(dropping_network: NetnsNetwork) -> None:
    net = dropping_network
    assert net.cid in forward_rule_cids()
    assert reaches(net, "n1", "n2") and reaches(net, "n2", "n1")


def test_without_the_project_rule_the_drop_cuts_the_members_off(
    dropping_network: NetnsNetwork,
) -> None:
    """The control: the drop really applies here, so the test above can fail."""
    net = dropping_network
    rule = netns.forward_rule(net.bridge, net.cid)
    netns.run(["iptables", "-w", "5", "-D", "FORWARD", *rule])
    assert not reaches(net, "n1", "n2")


def test_teardown_removes_exactly_the_network_rule() -> None:
    before = forward_chain()
    net = NetnsNetwork.create(["n1", "n2"], owner="test_forward_drop")
    during = forward_chain(net)
    added = [line for line in during if line not in before]
    assert len(added) == 1 and f"rqueue-netns:{net.cid}" in added[0] and net.bridge in added[0]
    net.teardown()
    net.teardown()  # twice is fine
    assert forward_chain(net) == before


def test_the_sweep_removes_a_crashed_network_rule_and_nothing_registered() -> None:
    """Only what no record names: a registered network (another run's, live) stays whole.
    The sweep, not ``reap_networks()``, which tears down every registered network on the
    machine (a test calling it broke a live cluster's namespaces beside it)."""
    before = forward_chain()
    live = NetnsNetwork.create(["n1"], owner="test_forward_drop_live")
    try:
        net = NetnsNetwork.create(["n1"], owner="test_forward_drop_reaper")
        (netns.REGISTRY / f"{net.cid}.json").unlink()  # as if the run crashed mid-way
        assert net.cid in forward_rule_cids()
        removed = sweep_unrecorded()
        assert any(net.cid in name for name in removed)
        assert not any(live.cid in name for name in removed)
        assert net.cid not in forward_rule_cids() and live.cid in forward_rule_cids()
        assert all(os.path.exists(f"/run/netns/{m.netns}") for m in live.members.values())
    finally:
        live.teardown()
    assert forward_chain(net) == before
