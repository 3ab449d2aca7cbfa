"""Make claimers stall past their lease with ``probability``: ``lease-expiry``, recorded
as ``start-stall`` then ``stop-stall``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from .base import Action, FaultKind, ParamReader, Stage


class LeaseExpiry(FaultKind):
    name = "lease-expiry"
    f_start, f_end = "start-stall", "stop-stall"
    params: ClassVar[Mapping[str, Any]] = {"probability": 0.6}

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        return {"probability": r.probability("probability", 0.6)}

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        w, p = stage.workload, params["probability"]
        return cls.action(
            {"probability": p},
            lambda: w.set_stall_probability(p),
            lambda: w.set_stall_probability(None),
        )
