"""Membership on a real engine with the project's node image (``pytest -m chaos
tests/docker``): a container joins the running cluster with rqlited's ``-join``, a removed
member's container and volume are gone, and nothing is left once the cluster stops."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from harness.cluster.docker import lifecycle as lc
from tests.cluster.helpers import wait_until
from tests.docker.conftest import anonymous_volumes, leftovers

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(600)]


def rows(url: str, level: str = "none") -> list:
    """The rows of ``t`` as the node at ``url`` holds them (``level=none``: its own)."""
    r = requests.get(
        f"{url}/db/query", params={"q": "SELECT x FROM t ORDER BY x", "level": level}, timeout=10
    )
    r.raise_for_status()
    return r.json()["results"][0].get("values", [])


def mine(engine: Any, cluster_id: str) -> dict[str, list[str]]:
    return {k: [n for n in v if cluster_id in n] for k, v in leftovers(engine).items()}


def test_members_join_and_leave_and_nothing_is_left(engine, node_image, tmp_path) -> None:
    before = anonymous_volumes(engine)
    c = lc.start_docker_cluster(3, directory=tmp_path, image=node_image, timeout=120)
    try:
        lead = c.wait_for_leader(60)
        requests.post(
            f"{lead.url}/db/execute", json=["CREATE TABLE t (x)", "INSERT INTO t VALUES (1)"]
        ).raise_for_status()
        assert c.add_node() == "n4"
        assert c.members() == ["n1", "n2", "n3", "n4"]
        n4 = next(n for n in c.nodes() if n.id == "n4")
        wait_until(lambda: rows(n4.url) == [[1]], 30, "n4's own copy of the table")
        c.remove_node(lead.id)
        assert c.members() == sorted({"n1", "n2", "n3", "n4"} - {lead.id})
        left = mine(engine, c.cluster_id)
        assert not [n for n in left["containers"] + left["volumes"] if f"-{lead.id}" in n]
        assert c.add_node(lead.id) == lead.id
        c.remove_node("n4")
        assert c.members() == ["n1", "n2", "n3"] == sorted(n.id for n in c.nodes())
        back = next(n for n in c.nodes() if n.id == lead.id)
        wait_until(lambda: rows(back.url) == [[1]], 30, f"{lead.id}'s copy, joined again")
    finally:
        c.stop()
    assert mine(engine, c.cluster_id) == {"containers": [], "networks": [], "volumes": []}
    assert anonymous_volumes(engine) <= before


def test_members_on_filesystems_of_their_own_leave_and_return(engine, node_image, tmp_path) -> None:
    """A cluster whose nodes have disks of their own (a chaos pool with disk-full): a
    removed member's filesystem is emptied and kept, it returns onto it, a new member gets
    one of its own, and every one is released with the cluster."""
    from harness.cluster import disk

    c = lc.start_docker_cluster(3, tmp_path / "c", timeout=120, image=node_image, disk_mb=32)
    try:
        lead = c.wait_for_leader(60)
        requests.post(
            f"{lead.url}/db/execute", json=["CREATE TABLE t (x)", "INSERT INTO t VALUES (1)"]
        ).raise_for_status()
        follower = next(n.id for n in c.nodes() if n.id != lead.id)
        data = tmp_path / "c" / f"{follower}-data"
        assert any(data.iterdir())
        c.remove_node(follower)
        assert not any(data.iterdir())  # wiped, and still its own filesystem
        assert c.add_node(follower) == follower
        back = next(n for n in c.nodes() if n.id == follower)
        wait_until(lambda: rows(back.url) == [[1]], 30, f"{follower}'s copy, joined again")
        assert c.add_node() == "n4"
        assert disk.node_disk(tmp_path / "c", "n4", tmp_path / "c" / "n4-data").image.is_file()
        c.remove_node("n4")
    finally:
        c.stop()
    assert disk.leftovers(tmp_path / "c") == []
