"""Clocks that jump while the workload runs: ``clock-strobe-node`` / ``-worker`` (the
clock flips between ``offset`` ahead and right every ``period`` seconds for the whole
window) and ``clock-jump-back-node`` / ``-worker`` (the clock jumps ``offset`` seconds
back at the window's start and stays there). Every clock is set right at the end.
Recorded as ``clock-strobe`` / ``clock-jump`` then ``clock-reset``.

A strobe runs a thread of its own for the window (:class:`Strobe`): ``act`` sets the
first offset and starts it, ``undo`` stops it (bounded wait), then sets every clock to 0,
so no flip can land after the reset.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ..cluster.base import CLOCK_SKEW
from .base import NODE_TARGETS, Action, FaultKind, ParamReader, Stage, WorkloadShape
from .clock_skew import (
    NODE_DRAW_LIMIT,
    WORKER_DRAW_RANGE,
    ClockSkewWorker,
    drawn_sign,
    pick_workers,
)

log = logging.getLogger(__name__)

#: the shortest strobe period (seconds): a node's clock-offset file is re-read on every
#: clock reading (harness.node.clock); writing it is a rename (a Docker engine elsewhere:
#: an exec into the container, 0.1 s idle, ~0.8 s loaded, which stretches the period)
MIN_PERIOD = 0.05
#: seconds ``undo`` waits for the strobe thread to finish its flip in progress
STOP_WAIT = 10.0

SetOne = Callable[[str, float], None]


class Strobe:
    """Flips the clocks of ``who`` between ``offset`` and 0 every ``period`` seconds,
    in a thread, from :meth:`start` until :meth:`stop`, which leaves them at 0."""

    def __init__(self, set_one: SetOne, who: list[str], offset: float, period: float) -> None:
        self.set_one, self.who, self.offset, self.period = set_one, who, offset, period
        self.flips = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def _set(self, seconds: float) -> None:
        for n in self.who:
            self.set_one(n, seconds)

    def start(self) -> None:
        """Set the clocks ``offset`` ahead now (flip 0), then flip them in a thread."""
        self._t0 = time.monotonic()
        self._set(self.offset)
        self.flips = 1
        self._thread = threading.Thread(target=self._run, name="clock-strobe", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Flip ``k`` is due ``k * period`` after the start: even flips set ``offset``,
        odd ones 0. A flip that came late (a slow exec into a container) skips those it
        missed rather than catching up, so each side keeps about ``period``."""
        while not self._stop.wait(max(0.0, self._t0 + self.flips * self.period - time.monotonic())):
            k = max(self.flips, int((time.monotonic() - self._t0) / self.period))
            self.flips = k + 1
            try:
                self._set(0.0 if k % 2 else self.offset)
            except Exception as e:  # one failed write (a node restarting): go on flipping
                if not self.errors:
                    log.warning("clock strobe on %s: %s", ",".join(self.who), e)
                self.errors.append(str(e))

    def stop(self) -> None:
        """Stop flipping (waiting up to :data:`STOP_WAIT`), then set every clock to 0."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_WAIT)
            if self._thread.is_alive():
                raise RuntimeError(f"the clock strobe did not stop within {STOP_WAIT:g}s")
        self._set(0.0)
        log.info("clock strobe on %s: %d flips", ",".join(self.who), self.flips)


def _strobe_action(
    kind: type[FaultKind], set_one: SetOne, who: list[str], params: Mapping[str, Any], value: dict
) -> Action:
    strobe = Strobe(set_one, who, params["offset"], params["period"])
    value = {**value, "offset": params["offset"], "period": params["period"]}
    return kind.action(value, strobe.start, strobe.stop, background=True)


def _jump_action(
    kind: type[FaultKind], set_one: SetOne, who: list[str], back: float, value: dict
) -> Action:
    def set_all(seconds: float) -> Callable[[], None]:
        def act() -> None:
            for n in who:
                set_one(n, seconds)

        return act

    value = {**value, "offset": -back}
    return kind.action(value, set_all(-back), set_all(0.0))


def _read_strobe(r: ParamReader, offset: float) -> dict[str, Any]:
    out = {"offset": r.number("offset", offset, minimum=-1e9)}
    if out["offset"] == 0:
        raise r.fail("offset", "seconds other than 0 (how far the clock jumps)", 0)
    out["period"] = r.number("period", 0.3, minimum=MIN_PERIOD)
    return out


def _read_back(r: ParamReader, offset: float) -> dict[str, Any]:
    return {"offset": r.number("offset", offset, minimum=0.0, strict=True)}


def _node_target(rng: random.Random) -> str:
    return rng.choice(("leader", "follower", "random", "all"))


def _node_offset(rng: random.Random) -> float:
    return round(rng.uniform(0.05, NODE_DRAW_LIMIT), 3)


def _worker_offset(rng: random.Random) -> float:
    return round(rng.uniform(*WORKER_DRAW_RANGE), 3)


class ClockStrobeNode(FaultKind):
    name = "clock-strobe-node"
    f_start, f_end = "clock-strobe", "clock-reset"
    #: ``offset``: seconds the clock flips ahead (negative: behind) and back; ``period``:
    #: seconds between two flips
    params: ClassVar[Mapping[str, Any]] = {"offset": 0.2, "period": 0.3, "target": "leader"}
    needs = frozenset({CLOCK_SKEW})

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        return {**_read_strobe(r, 0.2), "target": r.text("target", "leader", choices=NODE_TARGETS)}

    @classmethod
    def draw(cls, rng: random.Random, length: float) -> dict[str, Any]:
        offset = drawn_sign(rng) * _node_offset(rng)
        return {
            "offset": offset,
            "period": round(rng.uniform(0.2, 0.6), 2),
            "target": _node_target(rng),
        }

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        nodes, c = stage.targets(params["target"]), stage.cluster
        return _strobe_action(cls, c.set_clock_offset, nodes, params, {"nodes": nodes})


class ClockStrobeWorker(FaultKind):
    name = "clock-strobe-worker"
    f_start, f_end = "clock-strobe", "clock-reset"
    params: ClassVar[Mapping[str, Any]] = {"offset": 8.0, "period": 0.3, "fraction": 0.5}

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        return {**_read_strobe(r, 8.0), "fraction": r.probability("fraction", 0.5)}

    @classmethod
    def draw(cls, rng: random.Random, length: float) -> dict[str, Any]:
        offset = drawn_sign(rng) * _worker_offset(rng)
        return {"offset": offset, "period": round(rng.uniform(0.2, 0.6), 2), "fraction": 0.5}

    @classmethod
    def workload_problem(cls, workload: WorkloadShape) -> str | None:
        return ClockSkewWorker.workload_problem(workload)

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        workers = pick_workers(stage, params["fraction"])
        w = stage.workload
        return _strobe_action(cls, w.set_clock_offset, workers, params, {"targets": workers})


class ClockJumpBackNode(FaultKind):
    name = "clock-jump-back-node"
    f_start, f_end = "clock-jump", "clock-reset"
    #: ``offset``: seconds the clock jumps back (> 0)
    params: ClassVar[Mapping[str, Any]] = {"offset": 0.2, "target": "leader"}
    needs = frozenset({CLOCK_SKEW})

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        return {**_read_back(r, 0.2), "target": r.text("target", "leader", choices=NODE_TARGETS)}

    @classmethod
    def draw(cls, rng: random.Random, length: float) -> dict[str, Any]:
        return {"offset": _node_offset(rng), "target": _node_target(rng)}

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        nodes, c = stage.targets(params["target"]), stage.cluster
        return _jump_action(cls, c.set_clock_offset, nodes, params["offset"], {"nodes": nodes})


class ClockJumpBackWorker(FaultKind):
    name = "clock-jump-back-worker"
    f_start, f_end = "clock-jump", "clock-reset"
    params: ClassVar[Mapping[str, Any]] = {"offset": 8.0, "fraction": 0.5}

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        return {**_read_back(r, 8.0), "fraction": r.probability("fraction", 0.5)}

    @classmethod
    def draw(cls, rng: random.Random, length: float) -> dict[str, Any]:
        return {"offset": _worker_offset(rng), "fraction": 0.5}

    @classmethod
    def workload_problem(cls, workload: WorkloadShape) -> str | None:
        return ClockSkewWorker.workload_problem(workload)

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        workers = pick_workers(stage, params["fraction"])
        w = stage.workload
        return _jump_action(
            cls, w.set_clock_offset, workers, params["offset"], {"targets": workers}
        )
