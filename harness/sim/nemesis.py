"""The harness's nemesis on the virtual clock.

:class:`SimNemesis` is :class:`harness.nemesis.Nemesis` (its schedule of windows, its
stage and random draws, its records) with each start and end run as an event of the
simulation instead of by a thread that sleeps. A clock strobe, which the real kinds
flip from a thread, flips on simulation timers here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..faults.clock_jumps import Strobe
from ..faults.registry import kind_of
from ..faults.schedule import Fault
from ..nemesis import Active, Nemesis
from .loop import Loop


class SimNemesis(Nemesis):
    """The real nemesis, scheduled on ``loop``."""

    def schedule(self, loop: Loop, t0: float) -> None:
        """Put every start and end of the schedule on the loop, times counted from ``t0``
        (in the schedule's order: ends first at a tie)."""
        self.loop = loop
        for ev in self.events:
            loop.at(t0 + ev.at, self._act, ev)

    def _record(self, f: str, value: dict[str, Any], action: Callable[[], Any]) -> Any:
        def act() -> Any:
            try:
                return action()
            finally:
                self.cluster.flush()  # what the action's threads asked, in a fixed order

        return super()._record(f, value, act)

    def _begin(self, key: tuple[int, int], fault: Fault) -> None:
        action = kind_of(fault.kind).begin(self.stage, dict(fault.params))
        strobe = getattr(action.act, "__self__", None)
        if isinstance(strobe, Strobe):
            flipping = _Flipper(self.loop, strobe)
            action.act, action.undo = flipping.start, flipping.stop
        value = {"fault": fault.kind, "phase": "start", **action.value}
        self._record(action.f, value, action.act)
        self.active[key] = Active(fault, action.f_end, value, action.undo, action.background)
        self.counts[fault.kind] = self.counts.get(fault.kind, 0) + 1


class _Flipper:
    """A clock strobe's flips (offset, 0, offset, ...) every period, on the loop."""

    def __init__(self, loop: Loop, strobe: Strobe) -> None:
        self.loop, self.strobe, self.on = loop, strobe, False

    def start(self) -> None:
        self.on = True
        self._flip(0)

    def _flip(self, k: int) -> None:
        if not self.on:
            return
        s = self.strobe
        for n in s.who:
            s.set_one(n, 0.0 if k % 2 else s.offset)
        s.flips = k + 1
        self.loop.after(s.period, self._flip, k + 1)

    def stop(self) -> None:
        self.on = False
        for n in self.strobe.who:
            self.strobe.set_one(n, 0.0)
