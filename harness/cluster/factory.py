"""One entry point that starts a cluster of any backend.

::

    from harness.cluster.factory import make_cluster
    cluster = make_cluster("local", engine="embedded", nodes=3, directory=run_dir / "cluster")

``backend="local"`` → :class:`harness.cluster.local.cluster.LocalCluster` (engine ``embedded`` or
``rqlited``, optionally ``netns``); ``backend="docker"`` → the Docker backend's
``start_docker_cluster`` (imported only when asked for, so Docker stays optional): the
image ``image`` (else ``$RQLITE_IMAGE``, else the pinned official one), whatever
``engine`` says; ``backend="ssh"`` → :class:`harness.cluster.ssh.cluster.SshCluster` on
the hosts of ``inventory`` (a TOML file, docs/ssh.md; ``nodes=None``: all of them). The
cluster belongs to the calling process, which stops it when done
(``cluster down --all`` reaps it once that process is gone); ``detached=True`` makes it
nobody's, for clusters that outlive the command (``cluster up``).
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.cluster.base import Cluster, ClusterError

BACKENDS = ("local", "docker", "ssh")


def make_cluster(
    backend: str = "local",
    engine: str = "embedded",
    nodes: int | None = 3,
    directory: Path | str | None = None,
    rqlited: str | os.PathLike | None = None,
    netns: bool = False,
    timeout: float = 30.0,
    image: str | None = None,
    detached: bool = False,
    disk_mb: int | None = None,
    inventory: Path | str | None = None,
) -> Cluster:
    """A started cluster: a leader is elected and every node is ready when this returns.
    ``disk_mb``: each node's data on a filesystem of its own of that size (the ``disk``
    capability, :mod:`harness.cluster.disk`)."""
    if inventory is not None and backend != "ssh":
        raise ClusterError("--inventory lists SSH hosts: it needs --backend ssh")
    if backend == "local":
        if image is not None:
            raise ClusterError("--image names a Docker image: it needs --backend docker")
        from harness.cluster.local.cluster import LocalCluster

        return LocalCluster.start(
            nodes=nodes or 3,
            directory=directory,
            engine=engine,
            rqlited=rqlited,
            netns=netns,
            timeout=timeout,
            detached=detached,
            disk_mb=disk_mb,
        )
    if backend == "docker":
        if engine != "rqlited" and engine != "embedded":
            raise ClusterError(f"unknown engine {engine!r}")
        if rqlited is not None:
            raise ClusterError(
                "--rqlited names a binary for --backend local; the Docker backend runs an "
                "image (--image or RQLITE_IMAGE; `python -m harness image build --rqlited "
                "PATH` puts your binary in one)"
            )
        try:
            from harness.cluster.docker.lifecycle import start_docker_cluster
        except ImportError as exc:
            raise ClusterError(f"the Docker backend is not available: {exc}") from exc
        if directory is None:
            raise ClusterError("a cluster needs a directory for its state and logs")
        return start_docker_cluster(
            nodes=nodes or 3,
            directory=Path(directory),
            timeout=timeout,
            image=image,
            detached=detached,
            disk_mb=disk_mb,
        )
    if backend == "ssh":
        return _ssh_cluster(inventory, nodes, directory, rqlited, image, timeout, disk_mb)
    raise ClusterError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")


def _ssh_cluster(
    inventory: Path | str | None,
    nodes: int,
    directory: Path | str | None,
    rqlited: str | os.PathLike | None,
    image: str | None,
    timeout: float,
    disk_mb: int | None = None,
) -> Cluster:
    """The SSH backend's cluster on the inventory's first ``nodes`` hosts (what runs on
    each host, the project's node or an rqlited there, is the inventory's to say)."""
    if inventory is None:
        raise ClusterError("--backend ssh needs --inventory FILE (docs/ssh.md)")
    if rqlited is not None or image is not None:
        raise ClusterError(
            "--rqlited and --image are not for --backend ssh: the inventory names what each "
            'host runs (rqlited = "/path/on/host" or node = "project")'
        )
    if directory is None:
        raise ClusterError("a cluster needs a directory for its state and logs")
    from harness.cluster.ssh.cluster import SshCluster

    return SshCluster.start(inventory, nodes, Path(directory), timeout=timeout, disk_mb=disk_mb)
