"""Cut the network so the leader lands on the small side: ``partition-leader`` (the
leader alone), ``partition-majority`` (the leader in the largest minority),
``partition-bridge`` (two overlapping halves, the leader at one end; 5 nodes). Recorded
as ``partition`` then ``heal``, the value naming the ``components``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cluster.base import PARTITIONS
from .base import RECOVERY, Action, FaultKind, Stage


class Partition(FaultKind):
    """Partition the cluster into :meth:`components`; heal at the window's end."""

    f_start, f_end = "partition", "heal"
    recovery = RECOVERY
    needs = frozenset({PARTITIONS})

    @classmethod
    def components(cls, stage: Stage) -> list[list[str]]:
        raise NotImplementedError

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        components = cls.components(stage)
        c = stage.cluster
        return cls.action(
            {"components": components},
            lambda: c.partition(components),
            c.heal,
        )


class PartitionLeader(Partition):
    name = "partition-leader"

    @classmethod
    def components(cls, stage: Stage) -> list[list[str]]:
        leader = stage.leader()
        return [[leader], [n for n in stage.ids() if n != leader]]


class PartitionMajority(Partition):
    name = "partition-majority"

    @classmethod
    def components(cls, stage: Stage) -> list[list[str]]:
        leader = stage.leader()
        others = [n for n in stage.ids() if n != leader]
        stage.rng.shuffle(others)
        k = (len(others) + 1) // 2 - 1  # the minority: the leader plus k others
        minority = [leader, *others[:k]]
        return [sorted(minority), sorted(others[k:])]


class PartitionBridge(Partition):
    name = "partition-bridge"
    min_nodes = 5

    @classmethod
    def components(cls, stage: Stage) -> list[list[str]]:
        leader = stage.leader()
        others = [n for n in stage.ids() if n != leader]
        stage.rng.shuffle(others)
        order = [leader, *others]
        half = len(order) // 2
        return [order[: half + 1], order[half:]]
