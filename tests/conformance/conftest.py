"""Conformance fixtures: the shared healthy cluster seen as leader + followers."""

from __future__ import annotations

import uuid

import pytest

from harness.cluster.base import Cluster


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
