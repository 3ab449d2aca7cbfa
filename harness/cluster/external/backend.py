"""The external backend's entry in the registry (:mod:`harness.cluster.backends`)."""

from __future__ import annotations

from harness.cluster.backend import Backend
from harness.cluster.base import Cluster
from harness.cluster.external.cluster import ExternalCluster


class External(Backend):
    """A cluster someone else runs, reached by its URLs; nothing starts or stops it."""

    name = "external"
    summary = "a cluster someone else runs, named by its URLs (bench --urls, RQLITE_URLS)"
    title = "external"
    startable = False

    @classmethod
    def cluster_class(cls) -> type[Cluster]:
        return ExternalCluster
