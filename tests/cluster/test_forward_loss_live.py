"""Forwarded replies lost on a live cluster, one network namespace per node (root only):
the rule lands in the follower's namespace alone; a write sent to that follower reaches
the leader, which applies it, while the follower never gets the leader's answer; Raft
(connections the leader opens) is untouched; the heal removes exactly the rule."""

from __future__ import annotations

import os
import subprocess

import pytest

from harness.cluster.base import ClusterError
from harness.cluster.forward_loss import COMMENT_PREFIX
from harness.cluster.local.cluster import LocalCluster
from tests.cluster.helpers import execute, outcome, rows, wait_until

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]


def rules(c: LocalCluster, node: str) -> str:
    argv = [*c._network.exec_prefix(node), "iptables", "-w", "5", "-S", "INPUT"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def dropped(c: LocalCluster, node: str) -> int:
    argv = [*c._network.exec_prefix(node), "iptables", "-w", "5", "-L", "INPUT", "-n", "-v", "-x"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    return sum(int(line.split()[0]) for line in out.splitlines() if COMMENT_PREFIX in line)


def write(url: str, value: int, timeout: float) -> str:
    """POST one insert; what came back: ``ok``, or the error the client saw."""
    return outcome(f"{url}/db/execute?timeout=1s", [["INSERT INTO t(v) VALUES(?)", value]], timeout)


def test_a_follower_loses_the_leaders_replies_to_what_it_forwards(make_cluster) -> None:
    c = make_cluster(3, netns=True)
    leader = c.wait_for_leader(30).id
    follower, other = [n for n in ("n1", "n2", "n3") if n != leader]
    urls = {n.id: n.url for n in c.nodes()}
    execute(urls[leader], ["CREATE TABLE t (v INTEGER)"])
    port = c.forward_port(leader)
    spec = c._specs[leader]
    assert port == (spec.raft_port if c.engine == "rqlited" else spec.http_port)

    c.set_forward_reply_loss(follower, leader)
    mine = f"--sport {port} ! --tcp-flags SYN SYN"
    assert mine in rules(c, follower) and f"{COMMENT_PREFIX}{c._network.cid}" in rules(c, follower)
    assert COMMENT_PREFIX not in rules(c, leader) and COMMENT_PREFIX not in rules(c, other)

    # the follower forwards; the leader applies; the answer never reaches the follower
    assert write(urls[follower], 1, timeout=4.0).startswith("error"), "a reply got through"
    assert dropped(c, follower) > 0
    # the embedded node follows rqlite v10.2.7: the follower sends the write once more on a
    # new connection (its handshake passes the rule), and the leader applies it twice
    copies = [[1], [1]] if c.engine == "embedded" else None
    applied = wait_until(
        lambda: (r := rows(urls[leader], "SELECT v FROM t")) in ([[1]], [[1], [1]]) and r,
        10,
        "the leader to apply",
    )
    assert copies is None or applied == copies, applied
    # Raft's own connections (opened by the leader) pass: the follower replicates
    assert write(urls[leader], 2, timeout=10.0) == "ok"
    wait_until(
        lambda: sorted(rows(urls[follower], "SELECT v FROM t", level="none")) == [*applied, [2]],
        10,
        "the follower to replicate while its forwarded replies are lost",
    )
    assert write(urls[other], 3, timeout=10.0) == "ok"  # another follower forwards fine

    c.clear_forward_reply_loss(follower)
    c.clear_forward_reply_loss(follower)  # twice: nothing left is fine
    assert COMMENT_PREFIX not in rules(c, follower)
    wait_until(lambda: write(urls[follower], 4, timeout=10.0) == "ok", 20, "forwarding again")

    with pytest.raises(ClusterError, match="its own"):
        c.set_forward_reply_loss(leader, leader)
    with pytest.raises(ClusterError, match="no node"):
        c.set_forward_reply_loss("n9", leader)
