"""Fill nodes' disks and free them: ``disk-full``, recorded as ``disk-full`` then
``disk-free``, the value naming the ``nodes``.

The ``target`` nodes' filesystems (their data directories, :mod:`harness.cluster.disk`)
are filled to ENOSPC for the window and freed at its end; the nodes keep running. A
leader that cannot store an entry steps down and the write fails; a follower that cannot
store entries does not acknowledge them (docs/faults-disk.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..cluster.base import DISK
from .base import NODE_TARGETS, RECOVERY, Action, FaultKind, ParamReader, Stage
from .nodes import on_every_node, start_each


class DiskFull(FaultKind):
    name = "disk-full"
    f_start, f_end = "disk-full", "disk-free"
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

        def free(which: Sequence[str]) -> None:
            on_every_node("free the disk of", which, c.free_disk)

        def act() -> None:
            start_each("fill", nodes, c.fill_disk, free, undo_failed=True)

        return cls.action({"nodes": nodes}, act, lambda: free(nodes))
