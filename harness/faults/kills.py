"""Kill nodes (SIGKILL) and restart them on their data: ``kill-leader``, ``kill-random``,
``kill-all``. Recorded as ``kill`` then ``restart``, the value naming the ``nodes``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..cluster.base import KILL
from .base import RECOVERY, Action, FaultKind, Stage
from .nodes import on_every_node, start_each


class Kill(FaultKind):
    """Kill the nodes :meth:`nodes` picks; restart them at the window's end."""

    f_start, f_end = "kill", "restart"
    recovery = RECOVERY
    needs = frozenset({KILL})

    @classmethod
    def nodes(cls, stage: Stage) -> list[str]:
        raise NotImplementedError

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        nodes = cls.nodes(stage)
        c = stage.cluster

        def restart(which: Sequence[str]) -> None:
            # the nodes a failed kill did kill would stay down for the rest of the run
            on_every_node("restart", which, c.restart)

        return cls.action(
            {"nodes": nodes},
            lambda: start_each("kill", nodes, c.kill, restart),
            lambda: restart(nodes),
        )


class KillLeader(Kill):
    name = "kill-leader"

    @classmethod
    def nodes(cls, stage: Stage) -> list[str]:
        return [stage.leader()]


class KillRandom(Kill):
    """One node no other fault keeps down, at random."""

    name = "kill-random"

    @classmethod
    def nodes(cls, stage: Stage) -> list[str]:
        return [stage.rng.choice(stage.live())]


class KillAll(Kill):
    """Every node no other fault keeps down."""

    name = "kill-all"

    @classmethod
    def nodes(cls, stage: Stage) -> list[str]:
        return stage.live()
