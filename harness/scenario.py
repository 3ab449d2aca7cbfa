"""Declarative run scenarios: what to run, for how long, and which faults when.

A scenario is a TOML file in ``harness/scenarios/`` (or any path)::

    description = "Kill the Raft leader every 15 s; claims must fail over."
    nodes = 3
    duration = 60.0            # seconds of workload (the fault schedule's time base)

    [workload]
    publishers = 2
    visibility = 3.0

    [[faults]]
    kind = "kill-leader"
    start = 10.0               # seconds after the workload starts
    duration = 5.0             # then the fault is undone (restart, resume, heal, ...)
    every = 15.0               # optional: repeat until the workload ends

``--time S`` (:meth:`Scenario.scaled`) moves the fault windows to ``S / duration`` of
their times but keeps each fault's own duration (a 6 s outage stays 6 s); a shortened
schedule keeps room after each window for the cluster to recover and for the run's
coverage to judge the window, and drops, naming each, the windows that no longer fit.
Workload timings (visibility, work times) stay as written. Every key is checked: a
malformed file raises :class:`ScenarioError` naming the file, the key and what was
expected.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import chaos as _chaos
from .cluster.base import NETNS_CAPABILITIES, PARTITIONS, TIME_ZONES
from .faults import KINDS, RECOVERY, Fault, kind_of, needs_of
from .scenario_reader import Reader as _Reader
from .scenario_reader import ScenarioError

__all__ = [
    "FAULT_KINDS",
    "OUTAGE_KINDS",
    "RECOVERY",
    "SCENARIO_DIR",
    "Fault",
    "Scenario",
    "ScenarioError",
    "WorkloadSpec",
    "dropped_count",
    "list_scenarios",
    "load_scenario",
    "parse_scenario",
    "scenario_path",
]

#: the scenarios shipped with the package (package data: an installed wheel has them too)
SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"

#: fault kind -> optional parameters it accepts (beyond start/duration/every); each kind
#: declares its own in :mod:`harness.faults`
FAULT_KINDS: dict[str, frozenset[str]] = {n: frozenset(k.params) for n, k in KINDS.items()}
#: faults that take nodes away: the cluster needs :data:`RECOVERY` after them to elect and
#: serve again (a kind's ``recovery``)
OUTAGE_KINDS = frozenset(n for n, k in KINDS.items() if k.recovery)


@dataclass(frozen=True)
class WorkloadSpec:
    """Sizes and behaviour of the publishers and claimers."""

    publishers: int = 2
    groups_per_publisher: int = 4
    sync_claimers: int = 3
    async_claimers: int = 3
    visibility: float = 3.0
    priorities: tuple[int, ...] = (0, 1, 2)
    min_priority_probability: float = 0.1
    publish_pause: tuple[float, float] = (0.0, 0.02)
    max_outstanding: int = 60
    work: tuple[float, float] = (0.0, 0.1)
    stall_probability: float = 0.01
    nack_probability: float = 0.08
    nack_delay_probability: float = 0.04
    nack_delay: tuple[float, float] = (0.2, 1.0)
    extend_probability: float = 0.05
    idle_pause: float = 0.05
    drain_timeout: float = 60.0
    #: the sync claimers share one transport, the async claimers another (group commit)
    shared_transport: bool = False
    #: how often an ack is sent as ``ack_and_claim`` (ack and next claim in one request)
    ack_and_claim: float = 0.0
    #: the queue's ``max_deliveries`` (0: off); ``poison``: share of messages whose
    #: handler always fails (always nacked, never acked: they must end dead-lettered)
    max_deliveries: int = 0
    poison: float = 0.0
    #: share of the claimers (drawn per claimer) that long-poll: ``claim(wait=...)`` of
    #: ``long_poll_wait`` seconds instead of a claim and an idle pause
    long_poll: float = 0.0
    long_poll_wait: float = 1.0
    #: share of the claimers (drawn per claimer) that claim in batches: ``claim_many`` of
    #: up to ``batch_size`` leases, settled one by one (``ack``/``nack``) or with one
    #: ``ack_many``; such a claimer does not long-poll
    batch: float = 0.0
    batch_size: int = 10
    #: share of the publishes that are delayed (``publish(..., delay=...)``), by a delay
    #: drawn from ``delay_range`` seconds
    delay: float = 0.0
    delay_range: tuple[float, float] = (0.2, 2.0)
    #: share of the groups whose ids, and of the bodies whose extra field, are adversarial
    #: text (harness.workload.text: blob literals as rqlite binds them, quotes, NUL, ...)
    adversarial_text: float = 0.0
    #: ``python -m rqueue worker`` processes as claimers (harness.workload.processes):
    #: each with ``worker_concurrency`` slots and ``worker_grace`` seconds after SIGTERM;
    #: every ``worker_disrupt_every`` seconds (0: never) one is SIGKILLed or SIGTERMed
    #: and replaced. Their handler works ``work`` seconds, fails (nack) with
    #: ``nack_probability``, and outlives the visibility (heartbeats) with
    #: ``extend_probability``
    worker_processes: int = 0
    worker_concurrency: int = 2
    worker_grace: float = 2.0
    worker_disrupt_every: float = 0.0


@dataclass(frozen=True)
class Scenario:
    """A resolved scenario: the file's values with defaults and any CLI overrides."""

    name: str
    description: str
    nodes: int = 3
    duration: float = 60.0
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    faults: tuple[Fault, ...] = ()
    source: str = ""
    #: the fault windows ``--time`` dropped, each with why (see :meth:`scaled`)
    dropped: tuple[str, ...] = ()
    #: the fault windows left out on purpose (``--skip-fault``, see :meth:`without`)
    skipped: tuple[str, ...] = ()
    #: the essential faults (``essential = true``) ``--time`` kept no window of, each with
    #: the shortest ``--time`` that keeps one: the run is inconclusive
    essential_dropped: tuple[str, ...] = ()
    #: a random schedule to draw (``[chaos]``, :mod:`harness.chaos`; :meth:`drawn_from`
    #: turns it into ``faults``), and once drawn, what was drawn (:func:`chaos.record`)
    chaos: _chaos.ChaosSpec | None = None
    drawn: dict[str, Any] | None = None

    @property
    def needs(self) -> frozenset[str]:
        """The cluster capabilities its faults need (``Cluster.capabilities``); a schedule
        still to draw: what its pool's kinds need."""
        if self.chaos is not None:
            return needs_of(self.chaos.names())
        return needs_of(f.kind for f in self.faults)

    def drawn_from(self, seed: int, capabilities: frozenset[str]) -> Scenario:
        """A ``[chaos]`` scenario with its schedule drawn from ``seed`` for a cluster that
        can do ``capabilities`` (:mod:`harness.chaos`); any other scenario as it is.
        :class:`ScenarioError` when no kind of the pool fits."""
        spec = self.chaos
        if spec is None:
            return self
        kinds, left = _chaos.pool(spec, self.nodes, self.workload, capabilities)
        if not kinds:
            why = "; ".join(f"{k}: {w}" for k, w in left.items())
            raise ScenarioError(
                f"{self.source or self.name}: no fault kind of [chaos] fits ({why})"
            )
        faults = _chaos.draw(spec, seed, self.duration, kinds)
        record = _chaos.record(spec, seed, kinds, left, faults)
        return dataclasses.replace(self, faults=tuple(faults), chaos=None, drawn=record)

    @property
    def needs_partitions(self) -> bool:
        return PARTITIONS in self.needs

    @property
    def needs_netns(self) -> bool:
        """Whether a local cluster must put each node in a network namespace (root)."""
        return bool(self.needs & NETNS_CAPABILITIES)

    @property
    def needs_time_zones(self) -> bool:
        """Whether a fault sets nodes' time zones (``Cluster.set_time_zone``)."""
        return TIME_ZONES in self.needs

    def scaled(self, time: float) -> Scenario:
        """This scenario run for ``time`` seconds, its fault windows moved to match.

        Each window (every repetition of a fault) starts at ``time / duration`` of its
        time but keeps its own length; then, in order, a window starts no sooner than the
        scenario had it after an earlier one: windows that overlapped keep their offset,
        and after an outage (:data:`OUTAGE_KINDS`) at least ``min(RECOVERY, the scenario's
        gap)`` passes, so the cluster recovers before the next fault. A window is dropped
        when, moved, it would leave less than ``min(RECOVERY, what the scenario left)``
        after an outage (nothing after other faults) before the run ends; ``dropped``
        says which and why. The result lists each kept window as a fault of its own.
        Raises :class:`ScenarioError` when no window is left of a schedule that had some.
        """
        if time <= 0:
            raise ScenarioError(f"--time must be > 0 seconds, got {time}")
        if self.chaos is not None:  # fewer windows to draw, in the shorter run
            n = max(1, round(self.chaos.windows * time / self.duration))
            return dataclasses.replace(
                self, duration=time, chaos=dataclasses.replace(self.chaos, windows=n)
            )
        windows = sorted(
            (a, b, i, f) for i, f in enumerate(self.faults) for a, b in f.windows(self.duration)
        )
        kept, dropped = self._fit(windows, time)
        if windows and not kept:
            raise ScenarioError(
                f"--time {time:g} leaves no room for any fault of {self.name}: "
                f"{dropped[0]}; the shortest run that keeps one is "
                f"{self._shortest_with_a_fault(windows):g} s"
            )
        faults = tuple(
            dataclasses.replace(f, start=a1, duration=round(b1 - a1, 6), every=None)
            for _, _, a1, b1, f in sorted(kept, key=lambda w: w[2])
        )
        lacking = tuple(
            self._essential_dropped(f, windows, time)
            for f in self.faults
            if f.essential and not any(g is f for *_, g in kept)
        )
        return dataclasses.replace(
            self,
            duration=time,
            faults=faults,
            dropped=self.dropped + tuple(dropped),
            essential_dropped=self.essential_dropped + lacking,
        )

    def _essential_dropped(
        self, f: Fault, windows: list[tuple[float, float, int, Fault]], time: float
    ) -> str:
        """What a run of ``time`` s lacks when no window of the essential fault ``f`` fits,
        and the shortest whole ``--time`` that keeps one."""
        shortest = next(
            (
                t
                for t in range(math.floor(time) + 1, math.ceil(self.duration) + 1)
                if any(g is f for *_, g in self._fit(windows, float(t))[0])
            ),
            math.ceil(self.duration),
        )
        first = f.windows(self.duration)[0]
        return (
            f"{f.kind} at {first[0]:g}-{first[1]:g} s of the scenario, which it cannot do "
            f"without, did not fit in {time:g} s; the shortest --time that keeps it is "
            f"{shortest} s"
        )

    def _fit(
        self, windows: list[tuple[float, float, int, Fault]], time: float
    ) -> tuple[list[tuple[float, float, float, float, Fault]], list[str]]:
        """The windows kept in a run of ``time`` s (scenario's start and end, new start and
        end, the fault) and why each other one was dropped (see :meth:`scaled`)."""
        k = time / self.duration
        kept: list[tuple[float, float, float, float, Fault]] = []  # scenario's a, b; new a, b
        dropped: list[str] = []
        for a, b, _, f in windows:
            start, after = a * k, None  # after: the kept window that pushed it later
            for a0, b0, a1, b1, g in kept:
                if b0 <= a:  # apart in the scenario: keep the recovery room between them
                    later, why = b1 + min(_room(g), a - b0), "and its recovery"
                else:  # overlapping by design: keep the overlap
                    later, why = a1 + (a - a0), "as the scenario overlaps them"
                if later > start:
                    start, after = later, f"after the {g.kind} kept at {a1:g}-{b1:g} s {why}"
            start = round(start, 3)
            end = start + (b - a)
            need = min(_room(f), self.duration - b)
            if end + need > time + 1e-6:
                dropped.append(_why_dropped(f, a, b, start, end, need, time, after))
                continue
            kept.append((a, b, start, end, f))
        return kept, dropped

    def _shortest_with_a_fault(self, windows: list[tuple[float, float, int, Fault]]) -> float:
        """The shortest ``--time`` at which some window is kept (taken alone, a window
        needs ``length + room <= time * (1 - start / duration)``)."""
        return min(
            math.ceil((b - a + min(_room(f), self.duration - b)) / (1 - a / self.duration) - 1e-9)
            for a, b, _, f in windows
        )

    def without(self, kinds: Iterable[str]) -> Scenario:
        """This scenario without its faults of ``kinds`` (``--skip-fault``: a backend or
        image that cannot inject them, say), every window left out named in ``skipped``.
        A kind no fault of this scenario has is fine (the nightly job passes what an image
        lacks to every scenario); a kind that does not exist is a :class:`ScenarioError`."""
        kinds = set(kinds)
        unknown = sorted(kinds - FAULT_KINDS.keys())
        if unknown:
            raise ScenarioError(
                f"--skip-fault {unknown[0]}: no such fault kind; known: "
                + ", ".join(sorted(FAULT_KINDS))
            )
        if self.chaos is not None:
            spec = self.chaos
            out = sorted(kinds & set(spec.names()))
            exclude = tuple(spec.exclude) + tuple(out)
            return dataclasses.replace(
                self,
                chaos=dataclasses.replace(spec, exclude=exclude),
                skipped=self.skipped
                + tuple(f"{k} from the [chaos] pool (--skip-fault)" for k in out),
            )
        left_out = [
            f"{f.kind} at {a:g}-{b:g} s (--skip-fault)"
            for f in self.faults
            if f.kind in kinds
            for a, b in f.windows(self.duration)
        ]
        return dataclasses.replace(
            self,
            faults=tuple(f for f in self.faults if f.kind not in kinds),
            skipped=self.skipped + tuple(left_out),
        )

    def with_nodes(self, nodes: int) -> Scenario:
        """This scenario on ``nodes`` nodes (checked against what its faults need)."""
        s = dataclasses.replace(self, nodes=nodes)
        _check_nodes(s, f"{self.source or self.name}: --nodes")
        return s

    def to_json(self) -> dict[str, Any]:
        """The resolved scenario as plain data (each fault with only its own parameters, and
        ``every`` only when it repeats: what a scenario file holds); :meth:`from_json` reads
        it back."""
        data = dataclasses.asdict(self)
        data["faults"] = [f.to_json() for f in self.faults]
        for key in ("chaos", "drawn"):
            if getattr(self, key) is None:
                del data[key]
        if self.chaos is not None:
            data["chaos"] = self.chaos.to_json()
        return data

    @classmethod
    def from_json(cls, data: Any, where: str | None = None, name: str = "scenario") -> Scenario:
        """The scenario :meth:`to_json` wrote (a run's ``scenario.json``), checked as a file
        is (``ScenarioError`` naming ``where`` and the key). A fault's ``"every": null``
        (what earlier versions saved for a fault that does not repeat) is accepted."""
        if not isinstance(data, Mapping):
            raise ScenarioError(f"{where or 'scenario.json'}: expected an object, got {data!r}")
        data = json.loads(json.dumps(data))  # tuples as lists, as a file holds them
        name = str(data.get("name") or name)
        where = where or f"scenario.json of {name}"
        doc = {
            k: v
            for k, v in data.items()
            if k not in ("name", "source", "dropped", "skipped", "essential_dropped", "drawn")
        }
        if isinstance(doc.get("faults"), list):
            doc["faults"] = [
                {k: v for k, v in f.items() if v is not None} if isinstance(f, dict) else f
                for f in doc["faults"]
            ]
        lists = {}
        for key in ("dropped", "skipped", "essential_dropped"):
            items = data.get(key) or []
            if not isinstance(items, list) or not all(isinstance(d, str) for d in items):
                raise ScenarioError(f"{where}: key '{key}': expected a list of strings")
            lists[key] = tuple(items)
        drawn = data.get("drawn")
        if drawn is not None and not isinstance(drawn, dict):
            raise ScenarioError(f"{where}: key 'drawn': expected an object")
        return dataclasses.replace(
            parse_scenario(name, doc, where),
            source=str(data.get("source") or ""),
            drawn=drawn,
            **lists,
        )


def dropped_count(s: Scenario) -> str:
    """How much of a shortened scenario's schedule runs: "3 of 4 fault windows dropped
    (no room left in 15 s), 1 kept"."""
    total = len(s.faults) + len(s.dropped)
    return (
        f"{len(s.dropped)} of {total} fault windows dropped (no room left in "
        f"{s.duration:g} s), {len(s.faults)} kept"
    )


def _room(f: Fault) -> float:
    return kind_of(f.kind).recovery


def _why_dropped(
    f: Fault,
    a: float,
    b: float,
    start: float,
    end: float,
    need: float,
    time: float,
    after: str | None,
) -> str:
    """Why one window did not fit. It names the earliest the window could start (the
    windows kept before it decide that, not the ones dropped), so two dropped windows can
    name the same earliest start without either claiming it would run there."""
    where = (
        f"{f.kind} at {a:g}-{b:g} s of the scenario: the earliest it could start is "
        f"{start:g} s ({after or 'its start scaled to the run'}), so it would end at {end:g} s"
    )
    if end > time:
        return f"{where}, past the run's end ({time:g} s)"
    return (
        f"{where}, {time - end:.1f} s before the run's end, where it needs {need:g} s to "
        "recover and be judged"
    )


# -- parsing -------------------------------------------------------------------------------
def _parse_workload(where: str, table: Any) -> WorkloadSpec:
    if not isinstance(table, dict):
        raise ScenarioError(f"{where}: key 'workload': expected a table, got {table!r}")
    r = _Reader(where, "workload.", table)
    d = WorkloadSpec()
    w = WorkloadSpec(
        publishers=r.integer("publishers", d.publishers, minimum=1),
        groups_per_publisher=r.integer("groups_per_publisher", d.groups_per_publisher, minimum=1),
        sync_claimers=r.integer("sync_claimers", d.sync_claimers),
        async_claimers=r.integer("async_claimers", d.async_claimers),
        visibility=r.number("visibility", d.visibility, strict=True),
        priorities=r.int_list("priorities", d.priorities, 0, 4),
        min_priority_probability=r.probability(
            "min_priority_probability", d.min_priority_probability
        ),
        publish_pause=r.span("publish_pause", d.publish_pause),
        max_outstanding=r.integer("max_outstanding", d.max_outstanding, minimum=1),
        work=r.span("work", d.work),
        stall_probability=r.probability("stall_probability", d.stall_probability),
        nack_probability=r.probability("nack_probability", d.nack_probability),
        nack_delay_probability=r.probability("nack_delay_probability", d.nack_delay_probability),
        nack_delay=r.span("nack_delay", d.nack_delay),
        extend_probability=r.probability("extend_probability", d.extend_probability),
        idle_pause=r.number("idle_pause", d.idle_pause, strict=True),
        drain_timeout=r.number("drain_timeout", d.drain_timeout, strict=True),
        shared_transport=r.flag("shared_transport", d.shared_transport),
        ack_and_claim=r.probability("ack_and_claim", d.ack_and_claim),
        max_deliveries=r.integer("max_deliveries", d.max_deliveries),
        poison=r.probability("poison", d.poison),
        long_poll=r.probability("long_poll", d.long_poll),
        long_poll_wait=r.number("long_poll_wait", d.long_poll_wait, strict=True),
        batch=r.probability("batch", d.batch),
        batch_size=r.integer("batch_size", d.batch_size, minimum=1),
        delay=r.probability("delay", d.delay),
        delay_range=r.span("delay_range", d.delay_range),
        adversarial_text=r.probability("adversarial_text", d.adversarial_text),
        worker_processes=r.integer("worker_processes", d.worker_processes),
        worker_concurrency=r.integer("worker_concurrency", d.worker_concurrency, minimum=1),
        worker_grace=r.number("worker_grace", d.worker_grace),
        worker_disrupt_every=r.number("worker_disrupt_every", d.worker_disrupt_every),
    )
    r.done()
    if w.poison > 0 and w.max_deliveries < 1:
        raise r.fail("max_deliveries", "an integer >= 1 when 'workload.poison' is above 0", 0)
    if w.sync_claimers + w.async_claimers + w.worker_processes < 1:
        raise r.fail(
            "sync_claimers",
            "at least one claimer in sync_claimers + async_claimers + worker_processes",
            0,
        )
    if w.nack_probability + w.nack_delay_probability + w.stall_probability > 1:
        raise r.fail("nack_probability", "nack + nack_delay + stall probabilities summing to <= 1")
    return w


def _parse_fault(where: str, i: int, table: Any, duration: float) -> Fault:
    if not isinstance(table, dict):
        raise ScenarioError(f"{where}: key 'faults[{i}]': expected a table, got {table!r}")
    r = _Reader(where, f"faults[{i}].", table)
    kind = r.text("kind", choices=tuple(FAULT_KINDS))
    start = r.number("start", 0.0)
    if "duration" not in table:
        raise r.fail("duration", "a number > 0 (this key is required)")
    length = r.number("duration", 0.0, strict=True)
    every_raw = table.get("every")
    every = r.number("every", 0.0, strict=True) if every_raw is not None else None
    if every is not None and every < length:
        raise r.fail("every", f"a period >= the fault's duration ({length:g})", every)
    if start >= duration:
        raise r.fail("start", f"a time before the scenario's duration ({duration:g})", start)
    params = KINDS[kind].read(r, length)
    essential = r.flag("essential", False)
    r.done()
    return Fault(kind, start, length, every, params, essential=essential)


def _parse_chaos(where: str, table: Any, duration: float, faults: bool) -> _chaos.ChaosSpec | None:
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ScenarioError(f"{where}: key 'chaos': expected a table, got {table!r}")
    if faults:
        raise ScenarioError(f"{where}: key 'chaos': a random schedule or [[faults]], not both")
    return _chaos.read(_Reader(where, "chaos.", table), duration)


def _check_nodes(s: Scenario, where: str) -> None:
    if s.nodes not in (3, 5, 7):
        raise ScenarioError(f"{where}: expected 3, 5 or 7 nodes, got {s.nodes}")
    if s.chaos is not None and s.chaos.pool is not None:
        for k in s.chaos.names():
            if s.nodes < (least := kind_of(k).min_nodes):
                raise ScenarioError(
                    f"{where}: [chaos] pool kind '{k}' needs {least} nodes, the scenario has "
                    f"{s.nodes}"
                )
    for f in s.faults:
        if s.nodes < (least := kind_of(f.kind).min_nodes):
            raise ScenarioError(
                f"{where}: fault '{f.kind}' needs {least} nodes, the scenario has {s.nodes}"
            )


def parse_scenario(name: str, data: Mapping[str, Any], where: str) -> Scenario:
    """Build a :class:`Scenario` from a parsed TOML document; ``where`` names its source."""
    r = _Reader(where, "", data)
    description = r.text("description")
    nodes = r.integer("nodes", 3, minimum=1)
    duration = r.number("duration", 60.0, strict=True)
    workload = _parse_workload(where, r._get("workload") if "workload" in data else {})
    faults_raw = r._get("faults")
    if faults_raw is dataclasses.MISSING:
        faults_raw = []
    if not isinstance(faults_raw, list):
        raise r.fail("faults", "an array of tables ([[faults]])", faults_raw)
    faults = tuple(_parse_fault(where, i, t, duration) for i, t in enumerate(faults_raw))
    spec = _parse_chaos(where, r.raw("chaos"), duration, bool(faults))
    r.done()
    for f in faults:
        if (why := kind_of(f.kind).workload_problem(workload)) is not None:
            raise ScenarioError(f"{where}: fault '{f.kind}' {why}")
    if spec is not None and spec.pool is not None:  # named kinds must fit; "all" filters
        for k in spec.names():
            if (why := kind_of(k).workload_problem(workload)) is not None:
                raise ScenarioError(f"{where}: key 'chaos.pool': fault '{k}' {why}")
    s = Scenario(name, description, nodes, duration, workload, faults, where, chaos=spec)
    _check_nodes(s, f"{where}: key 'nodes'")
    return s


def scenario_path(name_or_path: str | Path) -> Path:
    """The file for a scenario name (``leader-failover``) or an explicit path."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or p.exists():
        return p
    return SCENARIO_DIR / f"{name_or_path}.toml"


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Read and check one scenario file; raises :class:`ScenarioError` naming the problem."""
    path = scenario_path(name_or_path)
    if not path.is_file():
        names = ", ".join(s.name for s in list_scenarios()) or "none"
        raise ScenarioError(f"no scenario {str(name_or_path)!r} ({path} not found; known: {names})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None
    return parse_scenario(path.stem, data, str(path))


def list_scenarios(directory: Path = SCENARIO_DIR) -> list[Scenario]:
    """Every scenario in ``directory``, sorted by name."""
    return [load_scenario(p) for p in sorted(directory.glob("*.toml"))]
