"""Conformance fixtures: the shared healthy cluster seen as leader + followers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from harness.cluster.base import Cluster
from harness.cluster.external.cluster import URLS_ENV
from harness.node import versions
from tests.conftest import ENGINE_ENV, engine_under_test

from ._versioned import VersionedCluster


@pytest.fixture(scope="module")
def urls(cluster: Cluster) -> dict[str, object]:
    """``{"leader": url, "followers": [url, ...], "all": [...]}`` of the shared cluster."""
    lead = cluster.wait_for_leader(30.0)
    everyone = [n.url for n in cluster.nodes()]
    return {
        "leader": lead.url,
        "followers": [u for u in everyone if u != lead.url],
        "all": everyone,
    }


@pytest.fixture
def table() -> str:
    """A fresh table name, so tests on the shared cluster never see each other's rows."""
    return f"t_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def follow(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], dict[str, object]]]:
    """``follow("8.36.18")``: the URLs (as ``urls``) of a cluster that behaves as that
    rqlite version. On the embedded engine: a 3-node embedded cluster told to follow it
    (the shared cluster for the default version, unless ``own=True``: a test that must
    not leave its tables where other tests' queues live), started once per module. On rqlited or
    ``RQLITE_URLS``: the shared cluster when its major version is that one's, else the test
    skips, saying so; so each version's case runs on real rqlite of that version."""
    started: dict[str, VersionedCluster] = {}
    urls: dict[str, dict[str, object]] = {}

    def get(version: str, own: bool = False) -> dict[str, object]:
        label, engine_version = engine_under_test()
        embedded = not os.environ.get(URLS_ENV) and os.environ.get(ENGINE_ENV, "embedded") == (
            "embedded"
        )
        if not embedded or (version == versions.DEFAULT and not own):
            wanted = int(version.split(".")[0])
            if not embedded and (engine_version is None or engine_version[0] != wanted):
                pytest.skip(f"the v{version} case needs rqlite v{wanted}; the engine is {label}")
            return request.getfixturevalue("urls")
        if version not in urls:
            cluster = VersionedCluster(version, tmp_path_factory.mktemp(f"v{version}"))
            urls[version] = cluster.start()
            started[version] = cluster
        return urls[version]

    try:
        yield get
    finally:
        for cluster in started.values():
            cluster.stop()
