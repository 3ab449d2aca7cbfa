"""The ``timezone`` fault on a real Docker engine (``pytest -m chaos tests/docker``; skipped,
saying why, where no engine answers or the image cannot be had).

Each node's zone file, in the cluster's directory, is mounted read-only as its
container's ``/etc/localtime``, as users give a container the host's zone: the fault
rewrites it in place and restarts the container, whose node reads it at start by Go's
rules, as rqlited in the official image does. A node's offset is a write through it of
its rewritten ``julianday('now')`` minus SQLite's own UTC.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import zonefile
from harness.cluster.docker import cluster as db
from harness.history import HistoryRecorder, fault_intervals, read_history
from harness.nemesis import Nemesis
from harness.scenario import Fault
from tests.cluster.helpers import execute, local_minus_utc, near, wait_until

pytestmark = pytest.mark.chaos

#: seconds into the fault at which the zone springs forward: after every container's restart
TRANSITION = 20.0


@pytest.fixture(scope="module")
def cluster(docker_cluster: db.DockerCluster) -> db.DockerCluster:
    return docker_cluster


def test_every_container_mounts_its_zone_file_as_etc_localtime(cluster: db.DockerCluster) -> None:
    for n in cluster.nodes():
        c = cluster._container(n.id)
        c.reload()
        mounts = {m["Destination"]: m for m in c.attrs["Mounts"]}
        zone = mounts["/etc/localtime"]
        assert zone["Type"] == "bind" and zone["RW"] is False
        assert Path(zone["Source"]).read_bytes() == db.UTC_ZONE
    assert "time-zones" in cluster.capabilities


def test_the_timezone_fault_moves_each_node_inside_its_window_then_back(
    cluster: db.DockerCluster, tmp_path: Path
) -> None:
    url = cluster.wait_for_leader(60).url
    execute(url, ["CREATE TABLE IF NOT EXISTS tz (node TEXT, d REAL)"])
    recorder = HistoryRecorder(tmp_path / "history.jsonl")
    fault = Fault("timezone", 0.0, 60.0, target="all", offset=0.0, transition=TRANSITION)
    nemesis = Nemesis(cluster, recorder, None, [fault], 90.0, seed=1)
    zone = Path(cluster._specs["n1"].zone_file or "")
    inode = zone.stat().st_ino
    before = time.time()
    nemesis._begin((0, 0), fault)  # returns once every container answers in its zone
    value = next(e for e in read_history(recorder.path) if e["type"] == "info")["value"]
    at = before + value["transition"]
    assert time.time() < at - 1.0, "the restarts took longer than the transition allows"
    assert zone.stat().st_ino == inode and zone.read_bytes()[:4] == b"TZif"
    cluster.wait_for_leader(60)
    for n in cluster.nodes():  # standard time of the new zone: UTC+00:00
        assert near(local_minus_utc(n.url, n.id), 0.0), n.id
    for n in cluster.nodes():  # then, with no restart, an hour ahead
        wait_until(
            lambda n=n: near(local_minus_utc(n.url, n.id), 3600.0),
            TRANSITION + 20.0,
            f"{n.id} to rewrite 'now' an hour ahead after the transition",
        )
    nemesis.heal_all()  # each container restarted with the UTC zone file
    cluster.wait_for_leader(60)
    for n in cluster.nodes():
        assert near(local_minus_utc(n.url, n.id), 0.0), n.id
    assert zone.read_bytes() == db.UTC_ZONE and zone.stat().st_ino == inode
    recorder.close()
    (interval,) = fault_intervals(read_history(recorder.path))
    assert interval.start < (interval.transition or -1) < (interval.end or -1)


def test_a_fixed_zone_reaches_one_node_only(cluster: db.DockerCluster) -> None:
    url = cluster.wait_for_leader(60).url
    execute(url, ["CREATE TABLE IF NOT EXISTS tz (node TEXT, d REAL)"])
    cluster.set_time_zone("n2", zonefile.fixed(-16200))  # UTC-04:30
    try:
        cluster.wait_for_leader(60)
        assert near(local_minus_utc(cluster._specs["n2"].url, "n2"), -16200.0)
        assert near(local_minus_utc(cluster._specs["n1"].url, "n1"), 0.0)
    finally:
        cluster.set_time_zone("n2", None)
    cluster.wait_for_leader(60)
    assert near(local_minus_utc(cluster._specs["n2"].url, "n2"), 0.0)


@pytest.fixture
def image_with_tz(engine: Any, node_image: str) -> Iterator[str]:
    """The node image with ``TZ`` set in its configuration (removed afterwards)."""
    import io

    tag = f"{node_image.rsplit(':', 1)[0]}:tz-test-{os.getpid()}"
    dockerfile = f"FROM {node_image}\nENV TZ=UTC\n".encode()
    engine.images.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True, pull=False)
    try:
        yield tag
    finally:
        engine.images.remove(tag, force=True)


def test_a_run_refuses_the_timezone_fault_up_front_on_an_image_that_sets_tz(
    image_with_tz: str, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", "timezone", "--backend", "docker",
         "--image", image_with_tz, "--out", str(out), "--no-progress", "--time", "30"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"the image {image_with_tz} sets TZ=UTC" in proc.stderr, proc.stderr
    history = out / "history.jsonl"
    assert not history.exists() or not history.read_text()  # refused before the workload
