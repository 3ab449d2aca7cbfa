"""``python -m harness cluster`` on the Docker backend: a stopped Docker cluster's folder
brings that cluster back on its data, never a local one in its place.

Without an engine: the folder says which backend it is, and a mismatch is refused.
With one (``-m chaos``): up, a row written, down (containers and volumes kept), up on the
same folder (the same cluster, the row still there), down --purge (nothing left).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.cluster.docker import specs as db
from harness.cluster.docker.engine import reap_docker
from tests.cluster.helpers import execute, rows, wait_until

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", "cluster", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


def test_a_docker_folder_is_never_taken_for_a_local_cluster(tmp_path: Path) -> None:
    held = tmp_path / "held"
    held.mkdir()
    (held / db.STATE_FILE).write_text(json.dumps({"cluster_id": "x", "nodes": []}))
    local = cli("up", "--dir", str(held), "--backend", "local", "--timeout", "5")
    assert local.returncode == 2
    assert f"{held} holds a docker cluster, not a local one" in local.stderr
    assert not (held / "cluster.json").exists(), "no local cluster was started there"
    purged = tmp_path / "purged"
    purged.mkdir()
    (purged / "docker-image.json").write_text("{}")
    again = cli("up", "--dir", str(purged), "--timeout", "5")
    assert again.returncode == 2
    assert "held a Docker cluster that `down --purge` removed" in again.stderr
    assert not (purged / "cluster.json").exists()


def _containers(engine: Any, cluster_id: str) -> dict[str, str]:
    flt = {"label": [f"{db.LABEL_CLUSTER}={cluster_id}"]}
    return {c.name: c.status for c in engine.containers.list(all=True, filters=flt)}


def _volumes(engine: Any, cluster_id: str) -> list[str]:
    return sorted(
        v.name for v in engine.volumes.list(filters={"label": [f"{db.LABEL_CLUSTER}={cluster_id}"]})
    )


@pytest.mark.chaos
def test_down_and_up_bring_the_docker_cluster_back_on_its_data(
    engine: Any, node_image: str, tmp_path: Path
) -> None:
    d = tmp_path / "dc"
    env = {**os.environ, "RQUEUE_REAP_TAG": f"test-{uuid.uuid4().hex[:8]}"}
    cluster_id = None
    try:
        up = cli("up", "--backend", "docker", "--image", node_image, "--dir", str(d), env=env)
        assert up.returncode == 0, up.stderr
        first = json.loads(up.stdout)
        cluster_id = first["cluster_id"]
        leader = first["leader"]
        execute(leader, ["CREATE TABLE kept (v TEXT)", "INSERT INTO kept VALUES ('still here')"])
        volumes = _volumes(engine, cluster_id)
        assert len(volumes) == 3

        down = cli("down", "--dir", str(d))
        assert down.returncode == 0, down.stderr
        assert json.loads(down.stdout)["stopped"] is True
        assert set(_containers(engine, cluster_id).values()) == {"exited"}, "kept, stopped"
        assert _volumes(engine, cluster_id) == volumes
        assert cli("status", "--dir", str(d)).returncode == 1  # no leader while it is down

        again = cli("up", "--dir", str(d))
        assert again.returncode == 0, again.stderr
        assert "started the stopped Docker cluster" in again.stderr
        second = json.loads(again.stdout)
        assert second["cluster_id"] == cluster_id and second["urls"] == first["urls"]
        assert "cluster.json" not in os.listdir(d), "no local cluster in its place"
        assert set(_containers(engine, cluster_id).values()) == {"running"}
        found = wait_until(
            lambda: rows(second["leader"], "SELECT v FROM kept"), 30, "the row written before"
        )
        assert found == [["still here"]]
        running = cli("up", "--dir", str(d))
        assert running.returncode == 2 and "already running" in running.stderr

        purge = cli("down", "--dir", str(d), "--purge")
        assert purge.returncode == 0, purge.stderr
        assert _containers(engine, cluster_id) == {} and _volumes(engine, cluster_id) == []
    finally:
        if cluster_id is not None:
            reap_docker(engine, cluster_id=cluster_id)
