"""Freeze the leader (SIGSTOP) and let it run again: ``pause-leader``, recorded as
``pause`` then ``resume``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cluster.base import PAUSE
from .base import RECOVERY, Action, FaultKind, Stage


class PauseLeader(FaultKind):
    name = "pause-leader"
    f_start, f_end = "pause", "resume"
    recovery = RECOVERY
    needs = frozenset({PAUSE})

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        node = stage.leader()
        c = stage.cluster
        return cls.action({"nodes": [node]}, lambda: c.pause(node), lambda: c.resume(node))
