"""Fill nodes' disks and free them: ``disk-full``, recorded as ``disk-full`` then
``disk-free``, the value naming the ``nodes``.

The ``target`` nodes' filesystems (their data directories, :mod:`harness.cluster.disk`)
are filled to ENOSPC for the window and freed at its end; the nodes keep running. A
leader that cannot store an entry steps down and the write fails; a follower that cannot
store entries does not acknowledge them (docs/faults-disk.md).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from ..cluster.base import DISK, Cluster, ClusterError
from .base import NODE_TARGETS, RECOVERY, Action, FaultKind, ParamReader, Stage

log = logging.getLogger(__name__)


def _free_all(c: Cluster, nodes: list[str]) -> None:
    """Free every node's disk, also after one fails; then raise."""
    failed = []
    for n in nodes:
        try:
            c.free_disk(n)
        except Exception as e:
            failed.append(f"{n}: {e}")
    if failed:
        raise ClusterError(f"could not free the disk of {'; '.join(failed)}")


class DiskFull(FaultKind):
    name = "disk-full"
    params: ClassVar[Mapping[str, Any]] = {"target": "leader"}
    #: a full leader steps down at its next write: the cluster elects another
    recovery = RECOVERY
    needs = frozenset({DISK})

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        return {"target": r.text("target", "leader", choices=NODE_TARGETS)}

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        nodes, c = stage.targets(params["target"]), stage.cluster

        def act() -> None:
            for i, n in enumerate(nodes):
                try:
                    c.fill_disk(n)
                except Exception:
                    # recorded as failed and never undone: free what was filled
                    try:
                        _free_all(c, nodes[: i + 1])
                    except ClusterError:
                        log.exception("after a failed fill of %s", n)
                    raise

        return Action("disk-full", "disk-free", {"nodes": nodes}, act, lambda: _free_all(c, nodes))
