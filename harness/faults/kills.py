"""Kill nodes (SIGKILL) and restart them on their data: ``kill-leader``, ``kill-random``,
``kill-all``. Recorded as ``kill`` then ``restart``, the value naming the ``nodes``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..cluster.base import KILL, Cluster, ClusterError
from .base import RECOVERY, Action, FaultKind, Stage

log = logging.getLogger(__name__)


class Kill(FaultKind):
    """Kill the nodes :meth:`nodes` picks; restart them at the window's end."""

    recovery = RECOVERY
    needs = frozenset({KILL})

    @classmethod
    def nodes(cls, stage: Stage) -> list[str]:
        raise NotImplementedError

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        nodes = cls.nodes(stage)
        c = stage.cluster

        def act() -> None:
            for i, n in enumerate(nodes):
                try:
                    c.kill(n)
                except Exception:
                    # the fault is recorded as failed and will not be undone: restart the
                    # nodes it did kill, or they would stay down for the rest of the run
                    try:
                        _restart(c, nodes[:i])
                    except ClusterError:
                        log.exception("after a failed kill of %s", n)
                    raise

        return Action("kill", "restart", {"nodes": nodes}, act, lambda: _restart(c, nodes))


def _restart(c: Cluster, which: list[str]) -> None:
    """Restart every node in ``which``, also after one fails; then raise."""
    failed = []
    for n in which:
        try:
            c.restart(n)
        except Exception as e:
            failed.append(f"{n}: {e}")
    if failed:
        raise ClusterError(f"could not restart {'; '.join(failed)}")


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
