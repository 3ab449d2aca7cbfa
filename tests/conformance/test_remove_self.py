"""A leader asked to remove itself, as rqlite's does (``store.remove`` at v10.2.7:
hashicorp/raft's ``RemoveServer`` of the leader itself): it commits the new configuration
and steps down without handing leadership over (hashicorp/raft v1.7.3 ``leaderLoop``: a
committed configuration without the leader's vote sets ``stepDown``), so the others have
no leader until they elect one, and the removed node, out of the configuration, never
stands for election again (``runFollower``: "not part of stable configuration, aborting
election"). The node before this handed leadership to a follower first, then forwarded the
removal to it: the removed node followed the new leader (its term went up) and, once
dropped, campaigned again and again."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.helpers import wait_until

from ._http import call
from ._versioned import VersionedCluster

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[VersionedCluster, dict]]:
    c = VersionedCluster("10.2.7", tmp_path)
    urls = c.start()
    try:
        yield c, urls
    finally:
        c.stop()


def _store(url: str) -> dict:
    return call("GET", url, "/status", timeout=5.0).json["store"]


def test_a_removed_leader_steps_down_without_handing_over(
    cluster: tuple[VersionedCluster, dict],
) -> None:
    _, urls = cluster
    leader, others = urls["leader"], urls["followers"]
    before = _store(leader)
    term = before["raft"]["term"]
    node_id = before["node_id"]
    r = call("DELETE", leader, "/remove", {"id": node_id}, timeout=30.0)
    assert r.status == 200, r.text

    def elected() -> str | None:
        states = {u: _store(u)["raft"]["state"] for u in others}
        return next((u for u, s in states.items() if s == "Leader"), None)

    new = wait_until(elected, 30.0, "the two members left to elect a leader")
    assert _store(new)["raft"]["term"] > term
    # the removed node stays a follower of nobody at its own term: it never followed the
    # new leader (a handover would have taken it along, term and all) and never campaigns
    # (several election timeouts of 0.8-1.6 s pass here)
    end = time.monotonic() + 4.0
    while time.monotonic() < end:
        gone = _store(leader)
        assert gone["raft"]["state"] == "Follower", gone["raft"]
        assert gone["raft"]["term"] == term, "the removed leader's term moved"
        assert not gone["leader"]["addr"], f"the removed node names a leader: {gone['leader']}"
        time.sleep(0.2)
    w = call("POST", leader, "/db/execute", [["CREATE TABLE t (x)"]])
    assert (w.status, w.text.strip()) == (503, "leader not found")
    nodes = call("GET", new, "/nodes?ver=2").json["nodes"]
    assert node_id not in [n["id"] for n in nodes], json.dumps(nodes)
