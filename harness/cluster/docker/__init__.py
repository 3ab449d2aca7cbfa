"""The Docker backend: an rqlite cluster in containers (see docs/docker.md).

- :mod:`.specs`   what the backend asks the engine for, built without an engine (pure)
- :mod:`.engine`  connecting to the engine, images, reaping by label
- :mod:`.cluster` :class:`DockerCluster`, a running cluster faulted through the engine
- :mod:`.lifecycle` starting one, attaching to one from its directory, restarting one

The names below are its Python API.
"""

from harness.cluster.docker.cluster import DockerCluster
from harness.cluster.docker.engine import ImageMissing, connect, docker_clusters, reap_docker
from harness.cluster.docker.lifecycle import (
    attach_docker_cluster,
    restart_docker_cluster,
    start_docker_cluster,
)
from harness.cluster.docker.specs import DockerUnreachable, unsupported_faults

__all__ = [
    "DockerCluster",
    "DockerUnreachable",
    "ImageMissing",
    "attach_docker_cluster",
    "connect",
    "docker_clusters",
    "reap_docker",
    "restart_docker_cluster",
    "start_docker_cluster",
    "unsupported_faults",
]
