"""Cut the network one way: ``one-way-leader`` (between the leader and every other node)
and ``one-way-minority`` (between a random minority and the rest). Each window's
``direction`` says which way packets die: ``out`` (the side's packets to the others are
dropped: it hears but cannot speak), ``in`` (the others' packets to it are dropped: it
speaks but cannot hear), or ``either`` (drawn from the run's seed per window, the
default). Recorded as ``one-way`` then ``heal``, the value naming the side's ``nodes``,
the ``direction``, the ``cuts`` (``[from, to]`` pairs) and a ``detail`` for the fault's
label (``one-way-leader n1 cannot-send``). The cluster side is
:meth:`harness.cluster.base.Cluster.partition_one_way`; docs/faults.md says what Raft
does under each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..cluster.base import PARTITIONS
from .base import RECOVERY, Action, FaultKind, ParamReader, Stage

#: which way a window drops packets: the side's own (``out``), the others' to it (``in``)
DIRECTIONS = ("out", "in")
#: each direction as a fault's label names it
DETAILS = {"out": "cannot-send", "in": "cannot-hear"}


def one_way_cuts(side: list[str], others: list[str], direction: str) -> list[list[str]]:
    """The ``[from, to]`` pairs whose packets a window drops: ``side`` to ``others``
    (``out``) or ``others`` to ``side`` (``in``)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if direction == "out":
        return [[a, b] for a in side for b in others]
    return [[b, a] for a in side for b in others]


class OneWay(FaultKind):
    """Drop one direction of the packets between :meth:`side` and the other nodes."""

    f_start, f_end = "one-way", "heal"
    params: ClassVar[Mapping[str, Any]] = {"direction": "either"}
    #: a leader that cannot send loses its followers; one that cannot hear steps down
    recovery = RECOVERY
    needs = frozenset({PARTITIONS})
    min_nodes = 2

    @classmethod
    def side(cls, stage: Stage) -> list[str]:
        raise NotImplementedError

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        return {"direction": r.text("direction", "either", choices=(*DIRECTIONS, "either"))}

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        side = sorted(cls.side(stage))
        others = [n for n in stage.ids() if n not in side]
        direction = params.get("direction", "either")
        if direction == "either":
            direction = stage.rng.choice(DIRECTIONS)
        cuts = one_way_cuts(side, others, direction)
        value = {
            "nodes": side,
            "direction": direction,
            "cuts": cuts,
            "detail": DETAILS[direction],
        }
        c = stage.cluster
        return cls.action(value, lambda: c.partition_one_way(cuts), c.heal)


class OneWayLeader(OneWay):
    name = "one-way-leader"

    @classmethod
    def side(cls, stage: Stage) -> list[str]:
        return [stage.leader()]


class OneWayMinority(OneWay):
    name = "one-way-minority"
    min_nodes = 3

    @classmethod
    def side(cls, stage: Stage) -> list[str]:
        return stage.targets("minority")
