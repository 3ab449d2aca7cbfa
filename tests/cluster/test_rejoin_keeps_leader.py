"""A node that comes back after missing the leader does not depose it (root only).

rqlite's Raft (hashicorp/raft v1.7.3, in v8.36.18, v9.4.5 and v10.2.7) runs a pre-vote
round before a node raises its term, and a node with a live leader grants neither a
pre-vote nor a vote (``raft.go`` ``requestPreVote`` and ``requestVote``, "rejecting ...
since we have a leader"). So a follower cut off for several election timeouts, or one
restarted slowly, keeps its term and rejoins as a follower: the leader keeps leading and
clients see no election. Without them (PySyncObj alone) the returning node's raised term
deposed the leader, and every client waited out an election after the heal.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.request

import pytest

from tests.cluster.helpers import execute, wait_until

pytestmark = [
    pytest.mark.root,
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
#: the cut lasts more than two of the longest election timeouts (1.6 s), so the cut-off
#: node's timer runs out at least twice (a fault's length, not a wait for a state)
CUT_SECONDS = 4.0


def raft(url: str) -> dict:
    with _OPENER.open(f"{url}/status", timeout=5) as resp:
        return json.loads(resp.read())["store"]["raft"]


def test_a_follower_back_from_a_partition_leaves_the_leader_leading(make_cluster) -> None:
    c = make_cluster(3, netns=True)
    lead = c.wait_for_leader(30)
    execute(lead.url, [["CREATE TABLE t (x INTEGER)"]])
    term = raft(lead.url)["term"]
    cut = next(n for n in c.nodes() if n.id != lead.id)
    c.partition([[cut.id], [n.id for n in c.nodes() if n.id != cut.id]])
    try:
        execute(lead.url, [["INSERT INTO t VALUES (1)"]])  # the majority commits meanwhile
        # the fault's length: each timeout of the cut node is a pre-vote round that gets
        # no answer, never a new term
        threading.Event().wait(CUT_SECONDS)
        assert raft(cut.url)["term"] == term, "the cut-off node raised its term"
    finally:
        c.heal()
    target = raft(lead.url)["commit_index"]
    wait_until(lambda: raft(cut.url)["commit_index"] >= target, 20, f"{cut.id} to catch up")
    execute(lead.url, [["INSERT INTO t VALUES (2)"]])
    after = raft(lead.url)
    assert after["state"] == "Leader", f"{lead.id} was deposed: {after}"
    assert after["term"] == term, f"the term moved from {term} to {after['term']}: an election"
    assert raft(cut.url)["term"] == term
