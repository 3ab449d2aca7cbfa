"""What every fault kind declares, and what it acts on.

A kind (:class:`FaultKind`) is a class: its name, its parameters with their defaults and
how a scenario file gives them (:meth:`FaultKind.read`), its recovery room, the cluster
capabilities it needs (:mod:`harness.cluster.base`), the smallest cluster it fits, and
what it does and undoes (:meth:`FaultKind.begin`, an :class:`Action` the nemesis records
and runs). A kind acts through a :class:`Stage`: the cluster, the workload's controls and
the nemesis's random draws.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from ..cluster.base import Cluster, ClusterError

#: how long a fault waits for the cluster to name a leader before it gives up
LEADER_WAIT = 5.0
#: then how long a fault waits for an agreed leader alone, some node not ready (it strikes)
AGREED_LEADER_WAIT = 1.0
#: seconds a shortened schedule leaves after an outage window before the next window and
#: before the run's end (never more than the scenario itself left): measured here, an
#: election takes under 2 s and a restart of every node about 3.5 s, and the run's coverage
#: (:mod:`harness.coverage`) judges a window by the work done in it and the seconds after
RECOVERY = 5.0
#: the nodes a fault with a ``target`` acts on: the leader, one follower, one node at
#: random, a minority at random (the most nodes short of a majority), or every node
NODE_TARGETS = ("leader", "follower", "random", "minority", "all")


class ParamReader(Protocol):
    """One ``[[faults]]`` table of a scenario file, read and checked key by key; its
    errors name the file and the key (``harness.scenario``'s reader)."""

    table: Mapping[str, Any]

    def fail(self, key: str, expected: str, got: Any = ...) -> Exception: ...

    def number(
        self, key: str, default: float, *, minimum: float = 0.0, strict: bool = False
    ) -> float: ...

    def probability(self, key: str, default: float) -> float: ...

    def text(
        self, key: str, default: str | None = None, *, choices: Sequence[str] | None = None
    ) -> str: ...


class WorkloadShape(Protocol):
    """The scenario's workload as far as a fault kind asks (``harness.scenario.WorkloadSpec``)."""

    @property
    def shared_transport(self) -> bool: ...


class WorkloadControls(Protocol):
    """What a fault may change in the running workload (:class:`harness.workload.Workload`)."""

    @property
    def claimer_names(self) -> Sequence[str]: ...

    def set_clock_offset(self, worker: str, seconds: float) -> None: ...

    def set_stall_probability(self, probability: float | None) -> None: ...


@dataclass
class Action:
    """What one fault window does: ``act`` recorded as ``f``, later undone by ``undo``
    recorded as ``f_end``; ``value`` is what the history's nemesis operations carry."""

    f: str
    f_end: str
    value: dict[str, Any]
    act: Callable[[], None]
    undo: Callable[[], None]
    #: ``act`` leaves something running (a thread) that only ``undo`` stops: a run that
    #: ends without healing still undoes it (:meth:`harness.nemesis.Nemesis.release`)
    background: bool = False


class Stage:
    """What a fault acts on: the cluster, the workload and the nemesis's random draws;
    ``down`` names the nodes an earlier fault still keeps down."""

    def __init__(
        self,
        cluster: Cluster,
        workload: WorkloadControls,
        rng: random.Random,
        down: Callable[[], set[str]] = set,
    ) -> None:
        self.cluster, self.workload, self.rng, self._down = cluster, workload, rng, down

    def leader(self) -> str:
        """The leader's id: up to :data:`LEADER_WAIT` for a leader with every live node
        ready (the fault strikes a recovered cluster), then up to :data:`AGREED_LEADER_WAIT` for
        an agreed leader alone (a node still catching up on a loaded machine must not stop
        the fault: it strikes the cluster as it is)."""
        try:
            return self.cluster.wait_for_leader(LEADER_WAIT).id
        except ClusterError as ready_error:
            try:
                return self.cluster.wait_for_leader(AGREED_LEADER_WAIT, all_ready=False).id
            except ClusterError:
                waited = LEADER_WAIT + AGREED_LEADER_WAIT
                why = f"no leader to target within {waited:g}s: {ready_error}"
                raise ClusterError(why) from None

    def ids(self) -> list[str]:
        return [n.id for n in self.cluster.nodes()]

    def live(self) -> list[str]:
        """The nodes no fault keeps down."""
        down = self._down()
        return [n for n in self.ids() if n not in down]

    def targets(self, target: str) -> list[str]:
        """The nodes a fault's ``target`` names (:data:`NODE_TARGETS`), sorted."""
        ids = self.ids()
        if target == "all":
            return ids
        if target == "leader":
            return [self.leader()]
        if target == "follower":
            leader = self.leader()
            return [self.rng.choice([n for n in ids if n != leader])]
        if target == "minority":
            return sorted(self.rng.sample(ids, (len(ids) - 1) // 2))
        return [self.rng.choice(ids)]


class FaultKind:
    """One kind of fault; subclasses set the class attributes and :meth:`begin`."""

    #: the name a scenario's ``kind`` gives
    name: ClassVar[str]
    #: the ``f`` of the history operations that start and end its window (the nemesis
    #: records them; docs/history-format.md, "Fault events", lists every kind's)
    f_start: ClassVar[str]
    f_end: ClassVar[str]
    #: parameters beyond start/duration/every, with their defaults, in the order a
    #: resolved scenario lists them
    params: ClassVar[Mapping[str, Any]] = {}
    #: seconds the cluster needs after a window to elect and serve again (an outage:
    #: :data:`RECOVERY`; a fault that leaves the nodes up: 0)
    recovery: ClassVar[float] = 0.0
    #: the cluster capabilities it needs (:data:`harness.cluster.base.CAPABILITY_NAMES`)
    needs: ClassVar[frozenset[str]] = frozenset()
    #: the fewest nodes it makes sense on (0: any)
    min_nodes: ClassVar[int] = 0
    #: the window lengths (seconds, low and high) a random schedule draws for it (None:
    #: the ``[chaos]`` table's ``length``), for a kind that needs a long window
    draw_length: ClassVar[tuple[float, float] | None] = None

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        """Its parameters from a ``[[faults]]`` table (``length``: the window's seconds),
        checked; the reader raises naming the key."""
        return {}

    @classmethod
    def draw(cls, rng: random.Random, length: float) -> dict[str, Any]:
        """The parameters a random schedule (``[chaos]``, :mod:`harness.chaos`) gives one
        window of ``length`` seconds, drawn from ``rng``: the declared defaults unless a
        kind whose defaults do nothing (an offset of 0) draws its own."""
        return dict(cls.params)

    @classmethod
    def workload_problem(cls, workload: WorkloadShape) -> str | None:
        """Why it cannot run beside the scenario's workload (None: it can)."""
        return None

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        """What to do for one window with ``params``, and how to undo it (:meth:`action`)."""
        raise NotImplementedError(f"fault kind {cls.name} does nothing")

    @classmethod
    def action(
        cls,
        value: dict[str, Any],
        act: Callable[[], None],
        undo: Callable[[], None],
        background: bool = False,
    ) -> Action:
        """One window's :class:`Action`, recorded under the kind's ``f_start`` and ``f_end``."""
        return Action(cls.f_start, cls.f_end, value, act, undo, background)

    @classmethod
    def cluster_problem(cls, cluster: Cluster, params: Mapping[str, Any]) -> str | None:
        """Why ``cluster``, which has the capabilities this kind needs, still cannot run it
        with ``params`` (None: it can), in one line; asked before the workload starts."""
        return None
