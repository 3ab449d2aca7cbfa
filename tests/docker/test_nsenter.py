"""Partition and heal through nsenter into real network namespaces (root only).

The Docker backend's partitions are iptables rules run with ``nsenter -t PID -n`` in
each container's namespace. Here each "container" is a process started in a namespace
of its own (``unshare --net``); only the engine's bookkeeping is stood in for. The
rules must land in exactly those namespaces, never in this machine's, and heal must
remove them again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest

from harness.cluster import netns, partition
from harness.cluster.docker import cluster as db
from harness.cluster.docker import lifecycle as lc
from tests.docker.test_cluster_faults import FakeClient

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("unshare", "nsenter", "iptables")),
    reason="needs root, unshare, nsenter and iptables",
)


def netns_inode(pid: int | str) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def host_rules() -> list[str]:
    """This machine's iptables rules, less those that network-namespace clusters (and the
    SSH test hosts, built on them) started meanwhile add and remove for their own bridge:
    each tagged with a comment naming its network, or naming its bridge
    (``netns.BRIDGE_PREFIX``; see :mod:`harness.cluster.netns`). The suite runs such
    clusters in parallel with this test; seen: ``-A FORWARD -i rqbr... -o rqbr... -j
    DROP``."""
    out = subprocess.run(["iptables", "-w", "5", "-S"], capture_output=True, text=True).stdout
    return [
        line
        for line in out.splitlines()
        if netns.FORWARD_COMMENT_PREFIX not in line and netns.BRIDGE_PREFIX not in line
    ]


def chain_rules(pid: int) -> list[str] | None:
    """The -S listing of the partition chain in ``pid``'s namespace, or None if absent."""
    res = subprocess.run(
        db.nsenter_argv(pid, ["iptables", "-w", "5", "-S", partition.CHAIN]),
        capture_output=True,
        text=True,
        timeout=15,
    )
    return res.stdout.splitlines() if res.returncode == 0 else None


@pytest.fixture
def namespaced(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[db.DockerCluster, dict]]:
    """A DockerCluster whose three 'containers' are processes in namespaces of their own."""
    specs = lc.container_specs("ns", lc.node_ids(3), [5001, 5002, 5003], "rqlite/rqlite:x")
    client = FakeClient(specs)
    procs = {}
    try:
        for i, (nid, c) in enumerate(zip(["n1", "n2", "n3"], client.by_name.values(), strict=True)):
            p = subprocess.Popen(["unshare", "--net", "sleep", "300"])
            procs[nid] = p
            c.pid, c.ip = p.pid, f"10.250.0.{i + 1}"
        deadline = time.monotonic() + 10
        while any(netns_inode(p.pid) == netns_inode("self") for p in procs.values()):
            assert time.monotonic() < deadline, "unshare gave no process its own namespace"
            time.sleep(0.02)
        monkeypatch.setattr(db.DockerCluster, "_partition_blockers", lambda self: [])
        monkeypatch.setattr(db, "verify_container_pid", lambda pid, cid: None)
        yield db.DockerCluster(client, "ns", specs), {n: p.pid for n, p in procs.items()}
    finally:
        for p in procs.values():
            p.kill()
            p.wait(timeout=10)


def test_partition_and_heal_in_real_namespaces(namespaced: tuple) -> None:
    cluster, pids = namespaced
    host_before = host_rules()
    cluster.partition([["n1"], ["n2", "n3"]])
    n1 = chain_rules(pids["n1"])
    assert n1 is not None
    for ip in ("10.250.0.2", "10.250.0.3"):
        assert f"-A {partition.CHAIN} -s {ip}/32 -j DROP" in n1
        assert f"-A {partition.CHAIN} -d {ip}/32 -j DROP" in n1
    for nid in ("n2", "n3"):
        rules = chain_rules(pids[nid])
        assert rules is not None
        assert f"-A {partition.CHAIN} -s 10.250.0.1/32 -j DROP" in rules
        same_side = "10.250.0.3" if nid == "n2" else "10.250.0.2"
        assert not any(same_side in r for r in rules)
    after = host_rules()
    assert not [r for r in after if partition.CHAIN in r or "10.250.0." in r], after
    assert after == host_before, "no rule may land in this machine's tables"
    cluster.heal()
    for pid in pids.values():
        assert chain_rules(pid) is None
        jumps = subprocess.run(
            db.nsenter_argv(pid, ["iptables", "-w", "5", "-S", "INPUT"]),
            capture_output=True,
            text=True,
        ).stdout
        assert partition.CHAIN not in jumps
