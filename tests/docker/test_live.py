"""The Docker backend on a real engine, with the project's node image (``pytest -m chaos
tests/docker``; skipped, saying why, where no engine answers or the image cannot be had).

Each fault really happens: a killed container is gone from ``docker ps``, a paused one is
frozen, a partition is iptables rules inside the containers' network namespaces, and a
container started again on a new address is found again by its peers.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from harness.cluster import partition as rules
from harness.cluster.docker import cluster as db
from harness.cluster.docker import lifecycle as lc
from harness.cluster.docker.engine import ImageMissing

pytestmark = pytest.mark.chaos


@pytest.fixture(scope="module")
def cluster(docker_cluster: db.DockerCluster) -> db.DockerCluster:
    return docker_cluster


def execute(url: str, *stmts: object) -> dict:
    r = requests.post(f"{url}/db/execute", json=list(stmts), timeout=10)
    r.raise_for_status()
    body = r.json()
    assert "error" not in body and all("error" not in x for x in body["results"]), body
    return body


def count(url: str) -> int:
    r = requests.get(
        f"{url}/db/query", params={"q": "SELECT COUNT(*) FROM t", "level": "strong"}, timeout=10
    )
    r.raise_for_status()
    return r.json()["results"][0]["values"][0][0]


def state(cluster: db.DockerCluster, node_id: str) -> str:
    c = cluster._container(node_id)
    c.reload()
    return c.status


def address(cluster: db.DockerCluster, node_id: str) -> str:
    c = cluster._container(node_id)
    c.reload()
    return c.attrs["NetworkSettings"]["Networks"][cluster._specs[node_id].network]["IPAddress"]


def test_every_node_runs_the_image_with_the_cluster_secret(
    cluster: db.DockerCluster, node_image: str
) -> None:
    secrets = set()
    for n in cluster.nodes():
        c = cluster._container(n.id)
        assert c.attrs["Config"]["Image"] == node_image
        env = dict(e.split("=", 1) for e in c.attrs["Config"]["Env"])
        secrets.add(env[lc.SECRET_ENV])
    assert len(secrets) == 1 and len(secrets.pop()) >= 32


def test_writes_survive_a_leader_kill_and_restart(cluster: db.DockerCluster) -> None:
    lead = cluster.wait_for_leader(30)
    execute(lead.url, "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")
    before = count(lead.url)
    execute(lead.url, ["INSERT INTO t(v) VALUES(?)", "before"])
    cluster.kill(lead.id)
    assert state(cluster, lead.id) == "exited"
    new = cluster.wait_for_leader(30)
    assert new.id != lead.id
    follower = next(n for n in cluster.nodes() if n.id not in (lead.id, new.id))
    execute(follower.url, ["INSERT INTO t(v) VALUES(?)", "during"])  # forwarded to the leader
    cluster.restart(lead.id)
    cluster.wait_for_leader(60)
    assert count(lead.url) == before + 2


def test_a_node_started_on_a_new_address_is_found_again(
    cluster: db.DockerCluster, engine: Any, node_image: str
) -> None:
    """PySyncObj kept a peer's looked-up address for 600 s: a container that came back on
    another address stayed cut off from the peers that dial it."""
    cluster.wait_for_leader(30)
    # the peer with the larger Raft address dials: the smallest is the one dialled by all
    victim = min(n.id for n in cluster.nodes())
    old = address(cluster, victim)
    network = cluster._specs[victim].network
    cluster.kill(victim)
    # take the address it had, so that it must come back on another
    squatter = engine.containers.run(
        node_image,
        entrypoint=["/usr/local/bin/python3", "-c", "import time; time.sleep(300)"],
        network=network,
        labels=lc.labels(cluster.cluster_id),
        detach=True,
    )
    try:
        cluster.restart(victim)
        assert address(cluster, victim) != old
        cluster.wait_for_leader(30)  # every node ready: the victim hears the leader again
        execute(cluster.leader().url, ["INSERT INTO t(v) VALUES(?)", "moved"])
        node = next(n for n in cluster.nodes() if n.id == victim)
        assert count(node.url) >= 1
    finally:
        squatter.remove(force=True, v=True)  # and its anonymous volume


def test_pause_freezes_the_leader_and_resume_thaws_it(cluster: db.DockerCluster) -> None:
    lead = cluster.wait_for_leader(30)
    cluster.pause(lead.id)
    try:
        assert state(cluster, lead.id) == "paused"
        new = cluster.wait_for_leader(30)
        assert new.id != lead.id
    finally:
        cluster.resume(lead.id)
    assert state(cluster, lead.id) == "running"
    cluster.wait_for_leader(60)


def _netns_rules(cluster: db.DockerCluster, node_id: str) -> str:
    c = cluster._container(node_id)
    c.reload()
    argv = db.nsenter_argv(int(c.attrs["State"]["Pid"]), ["iptables", "-S"])
    return subprocess.run(argv, capture_output=True, text=True, timeout=15, check=True).stdout


def test_partition_is_rules_in_the_containers_namespaces(cluster: db.DockerCluster) -> None:
    if "partitions" not in cluster.capabilities:
        pytest.skip("partitions need root, nsenter and iptables on the Docker host")
    lead = cluster.wait_for_leader(30)
    others = [n.id for n in cluster.nodes() if n.id != lead.id]
    cluster.partition([[lead.id], others])
    try:
        for n in cluster.nodes():
            assert f"-N {rules.CHAIN}" in _netns_rules(cluster, n.id), n.id
        # the majority elects a leader; the cut-off node is not ready, so poll leader()
        deadline = time.monotonic() + 30
        while (new := cluster.leader()) is None or new.id not in others:
            assert time.monotonic() < deadline, "no leader among the majority within 30 s"
            time.sleep(0.25)
    finally:
        cluster.heal()
    for n in cluster.nodes():
        assert rules.CHAIN not in _netns_rules(cluster, n.id), n.id
    cluster.wait_for_leader(60)
    execute(cluster.leader().url, ["INSERT INTO t(v) VALUES(?)", "healed"])


def test_clock_skew_reaches_the_node(cluster: db.DockerCluster) -> None:
    assert "clock-skew" in cluster.capabilities
    node = cluster.nodes()[0]

    def offset() -> float:
        return requests.get(f"{node.url}/status", timeout=10).json()["node"]["clock_offset"]

    for seconds in (30.0, 0.0):
        cluster.set_clock_offset(node.id, seconds)
        deadline = time.monotonic() + 10
        while offset() != seconds:
            assert time.monotonic() < deadline, f"{node.id} never read offset {seconds}"
            time.sleep(0.2)


def test_the_cluster_directory_names_the_image(cluster: db.DockerCluster, node_image: str) -> None:
    record = json.loads((Path(cluster._directory) / db.IMAGE_FILE).read_text())
    assert record["image"] == node_image and record["kind"] == "embedded"
    assert record["id"].startswith("sha256:")


def test_state_file_attach(cluster: db.DockerCluster) -> None:
    attached = lc.attach_docker_cluster(Path(cluster._directory))
    assert attached.cluster_id == cluster.cluster_id
    assert [n.url for n in attached.nodes()] == cluster.urls


def test_missing_image_is_one_line_naming_the_build_command(engine: Any, tmp_path: Path) -> None:
    with pytest.raises(ImageMissing) as err:
        lc.start_docker_cluster(
            nodes=3, directory=tmp_path, timeout=30, image="rqueue/no-such-image:0"
        )
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("image rqueue/no-such-image:0 is not here and pulling it failed (")
    assert "python -m harness image build" in msg
