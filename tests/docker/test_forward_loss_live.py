"""Forwarded replies lost on a real Docker engine (``pytest -m chaos tests/docker``): the
rule lands in the follower's container namespace alone; a write the follower forwards is
applied by the leader while the follower never gets the answer; clear removes the rule."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from typing import Any

import pytest

from harness.cluster.docker import cluster as db
from harness.cluster.forward_loss import COMMENT_PREFIX
from tests.cluster.helpers import outcome, wait_until

pytestmark = pytest.mark.chaos
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture(scope="module")
def cluster(docker_cluster: db.DockerCluster) -> db.DockerCluster:
    if "links" not in docker_cluster.capabilities:
        pytest.skip(docker_cluster.capability_problem("links") or "no links")
    return docker_cluster


def inside(cluster: db.DockerCluster, node_id: str, *argv: str) -> str:
    c = cluster._container(node_id)
    c.reload()
    cmd = db.nsenter_argv(int(c.attrs["State"]["Pid"]), list(argv))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=15, check=True).stdout


def post(url: str, path: str, body: Any, timeout: float) -> str:
    return outcome(f"{url}{path}", body, timeout)


def count(url: str) -> int:
    req = urllib.request.Request(
        f"{url}/db/query?level=strong",
        data=json.dumps(["SELECT COUNT(*) FROM fwd"]).encode(),
        headers={"Content-Type": "application/json"},
    )
    with _OPENER.open(req, timeout=10) as resp:
        return json.loads(resp.read())["results"][0]["values"][0][0]


def test_a_follower_container_loses_the_leaders_forwarded_replies(cluster) -> None:
    leader = cluster.wait_for_leader(60).id
    follower, other = [n.id for n in cluster.nodes() if n.id != leader]
    urls = {n.id: n.url for n in cluster.nodes()}
    assert post(urls[leader], "/db/execute", ["CREATE TABLE IF NOT EXISTS fwd (v)"], 10) == "ok"
    before = count(urls[leader])
    cluster.set_forward_reply_loss(follower, leader)
    try:
        said = inside(cluster, follower, "iptables", "-S", "INPUT")
        assert f"{COMMENT_PREFIX}{cluster.cluster_id}" in said
        assert f"--sport {cluster.forward_port(leader)}" in said
        assert COMMENT_PREFIX not in inside(cluster, other, "iptables", "-S", "INPUT")
        write = [["INSERT INTO fwd VALUES (?)", 1]]
        # rqlite answers 200 with a top-level error when forwarding fails; the leader
        # applied the write all the same (twice, as v10.2.7 sends it once more)
        assert post(urls[follower], "/db/execute?timeout=1s", write, 4.0).startswith("error")
        wait_until(lambda: count(urls[leader]) >= before + 1, 10, "the leader to apply it")
        assert post(urls[other], "/db/execute", write, 10) == "ok"
    finally:
        cluster.clear_forward_reply_loss(follower)
    assert COMMENT_PREFIX not in inside(cluster, follower, "iptables", "-S", "INPUT")
    assert post(urls[follower], "/db/execute", [["INSERT INTO fwd VALUES (3)"]], 10) == "ok"
