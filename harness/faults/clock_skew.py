"""Skew wall clocks by ``offset`` seconds and set them right again: ``clock-skew-node``
(the ``target`` nodes) and ``clock-skew-worker`` (a ``fraction`` of the claimers).
Recorded as ``clock-skew`` then ``clock-reset``."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ..cluster.base import CLOCK_SKEW
from .base import NODE_TARGETS, Action, FaultKind, ParamReader, Stage, WorkloadShape

#: the largest node clock offset a random schedule draws (seconds): inside rqueue's
#: ``clock_tolerance`` (0.25 s), the bound its lease margin assumes node clocks keep
NODE_DRAW_LIMIT = 0.2
#: the worker clock offsets a random schedule draws (seconds, either sign): past the
#: scenarios' visibility, as clock-skew.toml's 8 s
WORKER_DRAW_RANGE = (2.0, 10.0)


def drawn_sign(rng: random.Random) -> int:
    return rng.choice((-1, 1))


def pick_workers(stage: Stage, fraction: float) -> list[str]:
    """A ``fraction`` of the claimers (at least one), drawn by the nemesis, sorted."""
    names = list(stage.workload.claimer_names)
    k = max(1, math.ceil(fraction * len(names)))
    return sorted(stage.rng.sample(names, min(k, len(names))))


def _offsets(
    kind: type[FaultKind],
    set_one: Callable[[str, float], None],
    who: list[str],
    offset: float,
    value: dict[str, Any],
) -> Action:
    """Set every clock in ``who`` ``offset`` ahead, and back to 0 at the end."""

    def set_all(seconds: float) -> Callable[[], None]:
        def act() -> None:
            for n in who:
                set_one(n, seconds)

        return act

    return kind.action(value, set_all(offset), set_all(0.0))


class ClockSkewNode(FaultKind):
    name = "clock-skew-node"
    f_start, f_end = "clock-skew", "clock-reset"
    params: ClassVar[Mapping[str, Any]] = {"offset": 0.0, "target": "leader"}
    needs = frozenset({CLOCK_SKEW})

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        return {
            "offset": r.number("offset", 0.0, minimum=-1e9),
            "target": r.text("target", "leader", choices=NODE_TARGETS),
        }

    @classmethod
    def draw(cls, rng: random.Random, length: float) -> dict[str, Any]:
        offset = drawn_sign(rng) * round(rng.uniform(0.05, NODE_DRAW_LIMIT), 3)
        return {"offset": offset, "target": rng.choice(("leader", "follower", "random", "all"))}

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        nodes, offset, c = stage.targets(params["target"]), params["offset"], stage.cluster
        value = {"nodes": nodes, "offset": offset}
        return _offsets(cls, lambda n, s: c.set_clock_offset(n, s), nodes, offset, value)


class ClockSkewWorker(FaultKind):
    name = "clock-skew-worker"
    f_start, f_end = "clock-skew", "clock-reset"
    params: ClassVar[Mapping[str, Any]] = {"offset": 0.0, "fraction": 0.5}

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        return {
            "offset": r.number("offset", 0.0, minimum=-1e9),
            "fraction": r.probability("fraction", 0.5),
        }

    @classmethod
    def workload_problem(cls, workload: WorkloadShape) -> str | None:
        if not workload.shared_transport:
            return None
        return (
            "skews each claimer's own clock, but with 'workload.shared_transport' the "
            "claimers share one transport and its clock"
        )

    @classmethod
    def draw(cls, rng: random.Random, length: float) -> dict[str, Any]:
        return {
            "offset": drawn_sign(rng) * round(rng.uniform(*WORKER_DRAW_RANGE), 3),
            "fraction": 0.5,
        }

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        workers = pick_workers(stage, params["fraction"])
        w, offset = stage.workload, params["offset"]
        value = {"targets": workers, "offset": offset}
        return _offsets(cls, lambda n, s: w.set_clock_offset(n, s), workers, offset, value)
