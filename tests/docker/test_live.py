"""The Docker backend on a real engine (opt-in: ``pytest -m chaos tests/docker``).

Skipped where no engine answers (as on the project's own machines); the nightly chaos
job runs it before the scenarios. Pulls ``rqlite/rqlite`` when missing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import requests

from harness.cluster import docker_backend as db

pytestmark = pytest.mark.chaos


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[db.DockerCluster]:
    try:
        db.connect()
    except db.DockerUnreachable as exc:
        pytest.skip(str(exc))
    c = db.start_docker_cluster(nodes=3, directory=tmp_path_factory.mktemp("docker"), timeout=120)
    try:
        yield c
    finally:
        c.stop()


def execute(url: str, *stmts: object) -> dict:
    r = requests.post(f"{url}/db/execute", json=list(stmts), timeout=10)
    r.raise_for_status()
    body = r.json()
    assert "error" not in body and all("error" not in x for x in body["results"]), body
    return body


def count(url: str) -> int:
    r = requests.get(f"{url}/db/query", params={"q": "SELECT COUNT(*) FROM t", "level": "strong"})
    r.raise_for_status()
    return r.json()["results"][0]["values"][0][0]


def test_writes_survive_a_leader_kill_and_restart(cluster: db.DockerCluster) -> None:
    lead = cluster.wait_for_leader(30)
    execute(lead.url, "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")
    execute(lead.url, ["INSERT INTO t(v) VALUES(?)", "before"])
    cluster.kill(lead.id)
    new = cluster.wait_for_leader(30)
    assert new.id != lead.id
    follower = next(n for n in cluster.nodes() if n.id not in (lead.id, new.id))
    execute(follower.url, ["INSERT INTO t(v) VALUES(?)", "during"])  # forwarded to the leader
    cluster.restart(lead.id)
    cluster.wait_for_leader(60)
    assert count(lead.url) == 2


def test_pause_and_resume_the_leader(cluster: db.DockerCluster) -> None:
    lead = cluster.wait_for_leader(30)
    cluster.pause(lead.id)
    try:
        new = cluster.wait_for_leader(30)
        assert new.id != lead.id
    finally:
        cluster.resume(lead.id)
    cluster.wait_for_leader(60)


def test_partition_isolates_the_leader_and_heal_restores(cluster: db.DockerCluster) -> None:
    if not cluster.supports_partitions:
        pytest.skip("partitions need root and nsenter on the Docker host")
    lead = cluster.wait_for_leader(30)
    others = [n.id for n in cluster.nodes() if n.id != lead.id]
    cluster.partition([[lead.id], others])
    try:
        # the majority elects a leader; the cut-off node is not ready, so poll leader()
        deadline = time.monotonic() + 30
        while (new := cluster.leader()) is None or new.id not in others:
            assert time.monotonic() < deadline, "no leader among the majority within 30 s"
            time.sleep(0.25)
    finally:
        cluster.heal()
    cluster.wait_for_leader(60)
    execute(cluster.leader().url, ["INSERT INTO t(v) VALUES(?)", "healed"])


def test_clock_skew_is_refused(cluster: db.DockerCluster) -> None:
    with pytest.raises(db.ClusterError, match="cannot skew"):
        cluster.set_clock_offset("n1", 1.0)


def test_state_file_attach(cluster: db.DockerCluster) -> None:
    attached = db.attach_docker_cluster(cluster._directory)
    assert attached.cluster_id == cluster.cluster_id
    assert [n.url for n in attached.nodes()] == cluster.urls
