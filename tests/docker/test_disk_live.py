"""disk-full on the Docker backend for real: each node's data on a loop-mounted ext4 of
its own bound into its container, a full leader that steps down without acknowledging
what it lost, and nothing left (containers, volumes, mounts, loop devices) after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.cluster import disk
from harness.cluster.docker import lifecycle as lc
from tests.cluster.helpers import full_leader_loses_no_ack
from tests.docker.conftest import NOTHING, leftovers

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.skipif(disk.disk_problem() is not None, reason=str(disk.disk_problem())),
]


def ours(engine: Any, cluster_id: str) -> dict[str, list[str]]:
    """What of this cluster remains on the engine (others' runs may share it)."""
    return {k: [n for n in v if cluster_id in n] for k, v in leftovers(engine).items()}


def test_a_full_leader_in_a_container(engine: Any, node_image: str, tmp_path: Path) -> None:
    c = lc.start_docker_cluster(3, tmp_path / "c", timeout=120, image=node_image, disk_mb=32)
    try:
        assert "disk" in c.capabilities
        assert ours(engine, c.cluster_id)["volumes"] == []  # bound filesystems, not volumes
        for cid in ours(engine, c.cluster_id)["containers"]:
            mounts = engine.containers.get(cid).attrs["Mounts"]
            assert {m["Type"] for m in mounts} == {"bind"}, mounts  # no anonymous volume
        full_leader_loses_no_ack(c, elect=30, catch_up=60)
    finally:
        c.stop()
    assert ours(engine, c.cluster_id) == NOTHING
    left = [d for d in disk.leftovers(tmp_path / "c") if not disk.foreign_holders(d)]
    assert left == []
