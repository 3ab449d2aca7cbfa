"""One entry point that starts a cluster of any backend.

::

    from harness.cluster.factory import make_cluster
    cluster = make_cluster("local", engine="embedded", nodes=3, directory=run_dir / "cluster")

The backend is a name of the registry (:mod:`harness.cluster.backends`): ``local``
(engine ``embedded`` or ``rqlited``, optionally ``netns``), ``docker`` (the image
``image``, else ``$RQLITE_IMAGE``, else the pinned official one, whatever ``engine``
says), ``ssh`` (the hosts of ``inventory``, a TOML file, docs/ssh.md; ``nodes=None``: all
of them). The options a backend does not take are refused in one line. The cluster
belongs to the calling process, which stops it when done (``cluster down --all`` reaps it
once that process is gone); ``detached=True`` makes it nobody's, for clusters that
outlive the command (``cluster up``).
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.cluster.backend import ClusterOptions
from harness.cluster.backends import backend_of
from harness.cluster.base import Cluster


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
    kind = backend_of(backend)
    options = ClusterOptions(
        engine=engine,
        nodes=nodes,
        directory=None if directory is None else Path(directory),
        rqlited=None if rqlited is None else os.fspath(rqlited),
        netns=netns,
        timeout=timeout,
        image=image,
        detached=detached,
        disk_mb=disk_mb,
        inventory=None if inventory is None else Path(inventory),
    )
    kind.check(options)
    return kind.start(options)
