"""Fixtures for the tests on a real Docker engine (marked ``chaos``: ``pytest -m chaos
tests/docker``; ``.ci/run``'s Docker stage runs them).

- ``engine`` (session): a docker SDK client; the test skips with one line naming why when
  no engine answers.
- ``node_image`` (session): the project's node image, ``$RQUEUE_TEST_IMAGE`` or
  ``rqueue/node:local``, built once by ``python -m harness image build`` when missing
  (skip, with the reason, when it cannot be built).
- ``leftovers(engine)``: every container, network and volume labelled as the harness's;
  ``anonymous_volumes(engine)``: unlabelled dangling volumes (compared before and after);
  ``host_rules()``: the host's iptables rules of the project (``RQUEUE`` in
  ``iptables-save``; the Docker backend's rules live in the containers' namespaces).
- ``clean_engine``: the engine, skipping when another run's cluster is on it.
- ``docker_cluster`` (module): a three-node Docker cluster of the node image, stopped
  after the module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from harness.cluster.docker import cluster as docker_backend
from harness.cluster.docker import lifecycle
from harness.cluster.docker import specs as db
from harness.cluster.docker.engine import connect

IMAGE_ENV = "RQUEUE_TEST_IMAGE"


@pytest.fixture(scope="session")
def engine() -> Any:
    try:
        return connect()
    except db.DockerUnreachable as exc:
        pytest.skip(f"no Docker engine: {exc}")


@pytest.fixture(scope="session")
def node_image(engine: Any) -> str:
    import docker

    from harness.image import build
    from harness.image.rootfs import ImageError

    tag = os.environ.get(IMAGE_ENV) or db.NODE_IMAGE
    try:
        engine.images.get(tag)
    except docker.errors.ImageNotFound:
        if tag != db.NODE_IMAGE:
            pytest.skip(f"{IMAGE_ENV}={tag} is not built here")
        try:
            build(tag, client=engine)
        except ImageError as exc:
            pytest.skip(f"the node image cannot be built here: {exc}")
    return tag


def host_rules() -> list[str]:
    """The host's iptables rules that mention the project (its chains are RQUEUE-*)."""
    if not shutil.which("iptables-save") or os.geteuid() != 0:
        return []
    out = subprocess.run(["iptables-save"], capture_output=True, text=True, timeout=30)
    return [line for line in out.stdout.splitlines() if "RQUEUE" in line.upper()]


def leftovers(engine: Any) -> dict[str, list[str]]:
    """What of the project remains on the engine: containers, networks, volumes."""
    flt = {"label": [f"{db.LABEL_HARNESS}=true"]}
    return {
        # sparse: the list as the engine gave it, without inspecting each container (one
        # removed between the list and its inspection, as a run's teardown does, is gone)
        "containers": [
            c.attrs["Names"][0].lstrip("/")
            for c in engine.containers.list(all=True, filters=flt, sparse=True)
        ],
        "networks": [n.name for n in engine.networks.list(filters=flt)],
        "volumes": [v.name for v in engine.volumes.list(filters=flt)],
    }


def anonymous_volumes(engine: Any) -> set[str]:
    """Dangling volumes Docker named itself and nobody labelled: what a container of the
    node image (its /rqlite/file is a volume) leaves when removed without ``v``."""
    return {
        v.name
        for v in engine.volumes.list(filters={"dangling": True})
        if len(v.name) == 64 and not (v.attrs.get("Labels") or {})
    }


NOTHING: dict[str, list[str]] = {"containers": [], "networks": [], "volumes": []}


@pytest.fixture
def clean_engine(engine: Any) -> Any:
    """The engine, with nothing of the harness on it before the test (else: skip, naming
    what is there: another run's cluster must not be torn down by a test)."""
    found = leftovers(engine)
    if found != NOTHING:
        pytest.skip(f"the engine already holds the harness's {found}: another run is going on")
    return engine


@pytest.fixture(scope="module")
def docker_cluster(
    engine: Any, node_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[docker_backend.DockerCluster]:
    c = lifecycle.start_docker_cluster(
        nodes=3, directory=tmp_path_factory.mktemp("docker"), timeout=120, image=node_image
    )
    try:
        yield c
    finally:
        c.stop()
