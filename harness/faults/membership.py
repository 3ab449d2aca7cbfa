"""Change the cluster's membership while it runs: ``remove-node``, ``grow``, ``shrink``.

Each is undone so that the run ends with the members it started with (the drain and the
replica check read every member's replica, :meth:`Cluster.nodes` being the members now):

- ``remove-node`` (``target``: ``follower``, ``leader`` or ``random``): the node is removed
  through rqlite's ``/remove``, stopped and its data wiped; at the window's end it joins
  again, empty, under its id. Recorded as ``remove`` then ``rejoin``.
- ``grow`` (``nodes``, default 2): that many new nodes join (3 -> 5; ids from
  :meth:`Cluster.new_node_ids`); at the window's end they are removed again. Recorded as
  ``join`` then ``remove``. A cluster that cannot add that many (an SSH inventory without
  enough spare hosts) refuses the scenario before it starts (:meth:`Cluster.grow_problem`).
- ``shrink`` (``size``, default a bare majority of the members: 5 -> 3, 3 -> 2): followers
  at random are removed, one at a time, down to ``size``; at the window's end they join
  again, empty. Recorded as ``remove`` then ``rejoin``.

The value names the ``nodes`` (:mod:`harness.cluster.membership` for the local backend).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from ..cluster.base import MEMBERSHIP, Cluster, ClusterError
from .base import RECOVERY, Action, FaultKind, ParamReader, Stage
from .nodes import on_every_node, start_each

#: which member ``remove-node`` removes
REMOVE_TARGETS = ("follower", "leader", "random")


def _count(r: ParamReader, key: str, default: int, minimum: int) -> int:
    value = r.number(key, default, minimum=minimum)
    if value != int(value):
        raise r.fail(key, "a whole number", value)
    return int(value)


def _one_by_one(c: Cluster, nodes: Sequence[str], step: Callable[[str], object], undo: str) -> None:
    """``step`` on each node in turn; when one fails, the ones done are undone
    (``undo``: ``"add"`` or ``"remove"``), as the window will not be, then it raises."""
    back = c.add_node if undo == "add" else c.remove_node
    start_each(
        "membership change",
        nodes,
        step,
        lambda done: on_every_node(f"{undo} back", done, back),
    )


class Membership(FaultKind):
    """A change of members, undone at the window's end."""

    recovery = RECOVERY
    needs = frozenset({MEMBERSHIP})


class RemoveNode(Membership):
    name = "remove-node"
    f_start, f_end = "remove", "rejoin"
    params: ClassVar[Mapping[str, Any]] = {"target": "follower"}
    min_nodes = 3

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        return {"target": r.text("target", "follower", choices=REMOVE_TARGETS)}

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        nodes = stage.targets(params.get("target", "follower"))[:1]
        c = stage.cluster
        return cls.action(
            {"nodes": nodes},
            lambda: _one_by_one(c, nodes, c.remove_node, "add"),
            lambda: on_every_node("add back", nodes, c.add_node),
        )


class Grow(Membership):
    name = "grow"
    f_start, f_end = "join", "remove"
    params: ClassVar[Mapping[str, Any]] = {"nodes": 2}
    min_nodes = 1

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        return {"nodes": _count(r, "nodes", 2, 1)}

    @classmethod
    def cluster_problem(cls, cluster: Cluster, params: Mapping[str, Any]) -> str | None:
        return cluster.grow_problem(int(params.get("nodes", 2)))

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        c = stage.cluster
        nodes = c.new_node_ids(stage.ids(), int(params.get("nodes", 2)))
        return cls.action(
            {"nodes": nodes},
            lambda: _one_by_one(c, nodes, c.add_node, "remove"),
            lambda: on_every_node("remove", nodes, c.remove_node),
        )


class Shrink(Membership):
    name = "shrink"
    f_start, f_end = "remove", "rejoin"
    params: ClassVar[Mapping[str, Any]] = {"size": 0}
    min_nodes = 3

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        return {"size": _count(r, "size", 0, 0)}

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        ids = stage.ids()
        size = int(params.get("size", 0)) or len(ids) // 2 + 1
        if not 1 <= size < len(ids):
            raise ClusterError(f"cannot shrink {len(ids)} members to {size}")
        leader = stage.leader()
        nodes = stage.rng.sample(sorted(n for n in ids if n != leader), len(ids) - size)
        c = stage.cluster
        return cls.action(
            {"nodes": nodes},
            lambda: _one_by_one(c, nodes, c.remove_node, "add"),
            lambda: on_every_node("add back", nodes, c.add_node),
        )
