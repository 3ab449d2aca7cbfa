"""Random fault schedules: a scenario's ``[chaos]`` table, drawn from the run's seed.

Jepsen's combined nemesis, as a scenario key::

    [chaos]
    pool = "all"             # or a list of fault kinds
    exclude = ["kill-all"]   # optional: kinds "all" leaves out
    windows = 6              # fault windows in the scenario's duration
    length = [3.0, 8.0]      # each window's seconds, drawn in this range
    min_gap = 2.0            # seconds after a window before the next (at least the
                             # kind's recovery after an outage)
    start = 3.0              # no window before this
    [chaos.weights]          # optional: how likely each kind is (default 1)
    timezone = 2

:func:`pool` keeps the kinds the cluster can run (its capabilities), whose smallest
cluster fits and which can run beside the workload; ``"all"`` is every kind of the
registry (:data:`harness.faults.KINDS`), so kinds added later join it. :func:`draw`
turns the pool into a concrete schedule, one window after another (they never overlap):
for each window a kind (weighted), a length (the kind's ``draw_length`` or ``length``)
and the kind's parameters (:meth:`harness.faults.FaultKind.draw`); the windows that do
not fit in the run are dropped from the end, and the free time is spread at random
between the rest. Targets (the leader, a random node, ...) are drawn by the nemesis when
a window starts, as in any scenario. Everything comes from ``random.Random(f"{seed}-chaos")``:
the same seed, pool and run length give the same schedule.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .faults import KINDS, Fault, kind_of
from .faults.base import WorkloadShape


@dataclass(frozen=True)
class ChaosSpec:
    """A scenario's ``[chaos]`` table, checked (see the module's docstring)."""

    #: the kinds to draw from (None: every registered kind)
    pool: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    windows: int = 6
    length: tuple[float, float] = (3.0, 8.0)
    min_gap: float = 2.0
    start: float = 3.0
    weights: Mapping[str, float] = field(default_factory=dict)

    def names(self) -> list[str]:
        """The kinds the pool names, less those excluded, in the registry's order."""
        named = set(KINDS) if self.pool is None else set(self.pool)
        return [k for k in KINDS if k in named and k not in self.exclude]

    def to_json(self) -> dict[str, Any]:
        """The table as a scenario file holds it."""
        out: dict[str, Any] = {
            "pool": "all" if self.pool is None else list(self.pool),
            "windows": self.windows,
            "length": list(self.length),
            "min_gap": self.min_gap,
            "start": self.start,
        }
        if self.exclude:
            out["exclude"] = list(self.exclude)
        if self.weights:
            out["weights"] = dict(self.weights)
        return out


def pool(
    spec: ChaosSpec, nodes: int, workload: WorkloadShape, capabilities: Iterable[str]
) -> tuple[list[str], dict[str, str]]:
    """The kinds a schedule may draw on this cluster, and each one left out with why."""
    can = frozenset(capabilities)
    kept: list[str] = []
    left: dict[str, str] = {k: "excluded" for k in spec.exclude}
    for name in spec.names():
        k = kind_of(name)
        lacking = sorted(k.needs - can)
        if lacking:
            left[name] = f"the cluster cannot: {', '.join(lacking)}"
        elif nodes < k.min_nodes:
            left[name] = f"needs {k.min_nodes} nodes"
        elif (why := k.workload_problem(workload)) is not None:
            left[name] = why
        elif spec.weights.get(name, 1.0) > 0:
            kept.append(name)
        else:
            left[name] = "weight 0"
    return kept, left


def draw(spec: ChaosSpec, seed: int, duration: float, kinds: Sequence[str]) -> list[Fault]:
    """The schedule for a run of ``duration`` seconds drawn from ``kinds`` (see the
    module's docstring); empty when ``kinds`` is."""
    if not kinds:
        return []
    rng = random.Random(f"{seed}-chaos")
    weights = [spec.weights.get(k, 1.0) for k in kinds]
    picks: list[tuple[str, float, dict[str, Any], float]] = []  # kind, length, params, room
    for _ in range(spec.windows):
        kind = kind_of(rng.choices(list(kinds), weights)[0])
        lo, hi = kind.draw_length or spec.length
        length = round(rng.uniform(lo, hi), 1)
        room = max(spec.min_gap, kind.recovery)
        picks.append((kind.name, length, kind.draw(rng, length), room))
    while picks and spec.start + sum(p[1] + p[3] for p in picks) > duration:
        picks.pop()
    free = duration - spec.start - sum(p[1] + p[3] for p in picks)
    shares = [rng.random() for _ in range(len(picks) + 1)]
    total = sum(shares) or 1.0
    faults: list[Fault] = []
    t = spec.start
    for (name, length, params, room), share in zip(picks, shares, strict=False):
        t = round(t + free * share / total, 1)
        faults.append(Fault(name, t, length, None, params))
        t += length + room
    return faults


def record(
    spec: ChaosSpec,
    seed: int,
    kinds: Sequence[str],
    left: Mapping[str, str],
    faults: Sequence[Fault],
) -> dict[str, Any]:
    """What a run keeps of the draw (``scenario.json``'s ``drawn``, the report's list)."""
    return {
        "seed": seed,
        "table": spec.to_json(),
        "pool": list(kinds),
        "left_out": dict(left),
        "asked": spec.windows,
        "schedule": [describe(f) for f in faults],
    }


def describe(f: Fault) -> str:
    """One drawn window as a line: ``clock-strobe-node 12.3+5.1 s (offset=0.15, ...)``."""
    params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in f.params)
    return f"{f.kind} {f.start:g}+{f.duration:g} s" + (f" ({params})" if params else "")


def read(r: Any, duration: float) -> ChaosSpec:
    """The ``[chaos]`` table through the scenario's reader (``harness.scenario``), whose
    errors name the file and the key."""
    d = ChaosSpec()
    raw_pool = r.raw("pool")
    if raw_pool is None or raw_pool == "all":
        pool_: tuple[str, ...] | None = None
    elif isinstance(raw_pool, list) and raw_pool and all(k in KINDS for k in raw_pool):
        pool_ = tuple(dict.fromkeys(raw_pool))
    else:
        raise r.fail(
            "pool", f'"all" or a non-empty list of fault kinds ({", ".join(KINDS)})', raw_pool
        )
    exclude = r.raw("exclude") or []
    if not isinstance(exclude, list) or not all(k in KINDS for k in exclude):
        raise r.fail("exclude", "a list of fault kinds", exclude)
    weights = r.raw("weights") or {}
    ok = isinstance(weights, dict) and all(
        k in KINDS and isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
        for k, v in weights.items()
    )
    if not ok:
        raise r.fail("weights", "a table of fault kind = weight >= 0", weights)
    spec = ChaosSpec(
        pool=pool_,
        exclude=tuple(exclude),
        windows=r.integer("windows", d.windows, minimum=1),
        length=r.span("length", d.length),
        min_gap=r.number("min_gap", d.min_gap),
        start=r.number("start", d.start),
        weights={k: float(v) for k, v in weights.items()},
    )
    if spec.length[0] <= 0:
        raise r.fail("length", "[low, high] seconds with 0 < low <= high", list(spec.length))
    if spec.start >= duration:
        raise r.fail("start", f"a time before the scenario's duration ({duration:g})", spec.start)
    if not spec.names():
        raise r.fail("pool", "at least one fault kind that 'exclude' leaves in", raw_pool)
    r.done()
    return spec
