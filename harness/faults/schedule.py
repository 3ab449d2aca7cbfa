"""One entry of a scenario's fault schedule: a kind, its window, its parameters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .registry import kind_of


@dataclass(frozen=True, init=False, repr=False)
class Fault:
    """One entry of the fault schedule (times in seconds from the workload's start).

    ``Fault("clock-skew-node", 10.0, 5.0, offset=2.0)``: the parameters its kind declares
    (:attr:`harness.faults.base.FaultKind.params`), the others at their defaults, read as
    attributes (``fault.offset``); a parameter the kind lacks is a ``TypeError``.
    """

    kind: str
    start: float
    duration: float
    every: float | None = None
    #: (name, value) of each parameter, in the order its kind declares them
    params: tuple[tuple[str, Any], ...] = ()
    #: the scenario cannot do without it: a run that keeps none of its windows (``--time``
    #: too short) is inconclusive
    essential: bool = False

    def __init__(
        self,
        kind: str,
        start: float,
        duration: float,
        every: float | None = None,
        params: tuple[tuple[str, Any], ...] | Mapping[str, Any] = (),
        essential: bool = False,
        **given: Any,
    ) -> None:
        declared = kind_of(kind).params
        values = {**dict(params), **given}
        extra = sorted(set(values) - set(declared))
        if extra:
            known = ", ".join(declared) or "none"
            raise TypeError(f"fault {kind!r} takes no parameter {extra[0]!r} (its: {known})")
        set_ = object.__setattr__
        set_(self, "kind", kind)
        set_(self, "start", start)
        set_(self, "duration", duration)
        set_(self, "every", every)
        set_(self, "essential", essential)
        set_(self, "params", tuple((k, values.get(k, d)) for k, d in declared.items()))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "params":  # copying, pickling: not a parameter
            raise AttributeError(name)
        for k, v in self.params:
            if k == name:
                return v
        raise AttributeError(f"fault {self.kind!r} has no parameter {name!r}")

    def __repr__(self) -> str:
        shown = [f"{self.kind!r}", f"start={self.start!r}", f"duration={self.duration!r}"]
        shown += [f"every={self.every!r}"] * (self.every is not None)
        shown += [f"{k}={v!r}" for k, v in self.params]
        shown += ["essential=True"] * self.essential
        return f"Fault({', '.join(shown)})"

    def windows(self, until: float) -> list[tuple[float, float]]:
        """The ``(start, end)`` intervals of this fault that begin before ``until``."""
        out: list[tuple[float, float]] = []
        t = self.start
        while t < until:
            out.append((t, min(t + self.duration, until)))
            if not self.every:
                break
            t += self.every
        return out

    def to_json(self) -> dict[str, Any]:
        """What a scenario file holds: ``every`` only when it repeats, the parameters that
        are set (floats rounded to the microsecond)."""
        items = [("kind", self.kind), ("start", self.start), ("duration", self.duration)]
        items += [("every", self.every)] * (self.every is not None)
        items += [(k, v) for k, v in self.params if v is not None]
        items += [("essential", True)] * self.essential
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in items}
