"""The Docker backend's entry in the registry (:mod:`harness.cluster.backends`)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import ClassVar

from harness.cluster import disk
from harness.cluster.backend import Backend, ClusterOptions
from harness.cluster.base import Cluster, ClusterError
from harness.cluster.docker.cluster import IMAGE_FILE, DockerCluster
from harness.cluster.docker.engine import docker_clusters, reap_docker
from harness.cluster.docker.lifecycle import (
    attach_docker_cluster,
    restart_docker_cluster,
    start_docker_cluster,
)
from harness.cluster.docker.specs import STATE_FILE
from harness.cluster.engines import ENGINES


class Docker(Backend):
    """Containers of an rqlite image (``--image``), whatever ``--engine`` says."""

    name = "docker"
    summary = "containers of an rqlite image (--image; whatever --engine says)"
    title = "Docker"
    state_file = STATE_FILE
    purged_file = IMAGE_FILE
    options: ClassVar[frozenset[str]] = frozenset({"image"})
    purgeable = True
    reaps = True
    matrix_forms = ("docker:IMAGE",)

    @classmethod
    def cluster_class(cls) -> type[Cluster]:
        return DockerCluster

    @classmethod
    def refusal(cls, option: str) -> str:
        if option == "rqlited":
            return (
                "--rqlited names a binary for --backend local; the Docker backend runs an "
                "image (--image or RQLITE_IMAGE; `python -m harness image build --rqlited "
                "PATH` puts your binary in one)"
            )
        return super().refusal(option)

    @classmethod
    def start(cls, options: ClusterOptions) -> Cluster:
        o = options.with_defaults(3)
        if o.engine not in ENGINES:
            raise ClusterError(f"unknown engine {o.engine!r}")
        if o.directory is None:
            raise ClusterError("a cluster needs a directory for its state and logs")
        return start_docker_cluster(
            nodes=o.nodes or 3,
            directory=Path(o.directory),
            timeout=o.timeout,
            image=o.image,
            detached=o.detached,
            disk_mb=o.disk_mb,
        )

    @classmethod
    def attach(cls, directory: Path) -> Cluster:
        return attach_docker_cluster(directory)

    @classmethod
    def start_again(cls, directory: Path, options: ClusterOptions) -> Cluster:
        """The Docker cluster that ``down`` stopped in ``directory`` started again, on its
        data, if ``options`` agree with it."""
        old = attach_docker_cluster(directory)
        specs = list(old._specs.values())
        differs = []
        if options.nodes is not None and options.nodes != len(specs):
            differs.append(f"{len(specs)} nodes, not {options.nodes}")
        if options.image is not None and options.image != specs[0].image:
            differs.append(f"image {specs[0].image}, not {options.image}")
        if options.base_port is not None:
            differs.append(f"host ports {', '.join(str(s.host_port) for s in specs)}")
        if options.rqlited is not None or options.netns:
            differs.append("containers (leave --rqlited and --netns out)")
        if differs:
            raise ClusterError(
                f"{directory.resolve()} holds a stopped Docker cluster with "
                f"{'; '.join(differs)}: `up --dir` starts it again as it was; give a new "
                "directory for a different cluster"
            )
        cluster = restart_docker_cluster(directory, options.timeout)
        print(
            f"started the stopped Docker cluster in {directory.resolve()} again on its volumes",
            file=sys.stderr,
        )
        return cluster

    @classmethod
    def down(cls, cluster: Cluster, purge: bool) -> None:
        """Halt the containers, kept with their volumes for ``up --dir``; ``purge``:
        remove them, the network and the volumes."""
        if purge or not isinstance(cluster, DockerCluster):
            cluster.stop()
        else:
            cluster.halt()

    @classmethod
    def reap(cls, tag: str | None, live_too: bool, busy: set[str]) -> dict:
        removed = reap_docker(tag=tag, live_too=live_too)
        disks = disk.reap(set(), busy, tag is None, live_too)  # busy: local clusters' disks
        left = docker_clusters(tag=tag)
        for c in left:
            print(f"left Docker cluster {c['cluster']}: {c['why']}", file=sys.stderr)
        return {"reaped": {"docker": removed, "disks": disks}, "left": left}

    @classmethod
    def preflight(cls, scenario: str, needs: frozenset[str], chaos_all: bool) -> bool:
        disk.preflight(scenario, needs)
        return False

    @classmethod
    def matrix_engine(cls, spec: str) -> tuple[str, tuple[str, ...]] | None:
        if not spec.startswith("docker:") or not spec[7:]:
            return None
        label = "docker-" + re.sub(r"[^A-Za-z0-9._-]+", "_", spec[7:])  # a folder name
        return label, ("--backend", "docker", "--image", spec[7:])
