"""Faults on a schedule: kill, pause, partition, skew clocks, stall workers — and undo them.

Each fault window of the scenario becomes two nemesis operations in the history, one at
its start and one at its end, each written as an ``invoke`` before acting and an
``info`` after (``fail``, with ``error`` in the value, when the action raised: the
history's fault intervals then ignore it). Every value carries
``"fault"`` (the scenario's kind) and ``"phase"`` (``"start"`` or ``"end"``):

=====================  ===================  ===================
fault kind             start ``f``          end ``f``
=====================  ===================  ===================
kill-leader/-random    ``kill``             ``restart``
kill-all               ``kill``             ``restart``
pause-leader           ``pause``            ``resume``
partition-*            ``partition``        ``heal``
clock-skew-node        ``clock-skew``       ``clock-reset``
clock-skew-worker      ``clock-skew``       ``clock-reset``
lease-expiry           ``start-stall``      ``stop-stall``
timezone               ``timezone``         ``timezone-reset``
=====================  ===================  ===================

``timezone`` restarts the target nodes together in a zone (``Cluster.set_time_zone``:
rqlite and the embedded node rewrite ``'now'`` in their local time), a zone file built
by :mod:`harness.zonefile`: ``offset`` seconds off UTC, and with a ``transition``, a
daylight-saving change by ``jump`` seconds that many seconds after the fault's start,
so that it happens while the nodes run; its end restarts them in UTC.

:meth:`Nemesis.heal_all` undoes whatever is still in effect when the workload ends.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import zonefile
from .cluster.base import Cluster, ClusterError
from .scenario import Fault

log = logging.getLogger(__name__)

#: how long a fault waits for the cluster to name a leader before it gives up
LEADER_WAIT = 5.0


@dataclass
class Active:
    """A fault in effect, with what is needed to undo it."""

    fault: Fault
    f_end: str
    value: dict[str, Any]
    undo: Callable[[], None]


@dataclass(order=True)
class _Event:
    at: float
    order: int  # ends (0) before starts (1) at the same instant
    seq: int
    fault: Fault = field(compare=False)
    window: int = field(compare=False)


class Nemesis:
    """Runs a scenario's fault schedule against a cluster and a workload."""

    def __init__(
        self,
        cluster: Cluster,
        recorder: Any,
        workload: Any,
        faults: tuple[Fault, ...] | list[Fault],
        duration: float,
        *,
        seed: int = 0,
    ) -> None:
        self.cluster, self.recorder, self.workload = cluster, recorder, workload
        self.rng = random.Random(f"{seed}-nemesis")
        self.events: list[_Event] = []
        n = 0
        for fault in faults:
            for w, (start, end) in enumerate(fault.windows(duration)):
                self.events.append(_Event(start, 1, n, fault, w))
                self.events.append(_Event(end, 0, n + 1, fault, w))
                n += 2
        self.events.sort()
        self.active: dict[tuple[int, int], Active] = {}
        self.counts: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.errors: list[str] = []

    # -- what the progress line shows ---------------------------------------------------------
    @property
    def current(self) -> str:
        with self._lock:
            items = list(self.active.values())
        if not items:
            return "none"
        return ", ".join(_describe(a) for a in items)

    # -- schedule -----------------------------------------------------------------------------
    def start(self, t0: float | None = None) -> None:
        """Run the schedule in a thread; times count from ``t0`` (monotonic, default now)."""
        base = time.monotonic() if t0 is None else t0
        self._thread = threading.Thread(target=self._run, args=(base,), name="nemesis", daemon=True)
        self._thread.start()

    def _run(self, t0: float) -> None:
        for ev in self.events:
            if self._stop.wait(max(0.0, t0 + ev.at - time.monotonic())):
                return
            key = (id(ev.fault), ev.window)
            try:
                if ev.order == 1:
                    self._begin(key, ev.fault)
                else:
                    self._end(key)
            except Exception as e:  # a fault that cannot act is recorded, the run goes on
                log.exception("nemesis %s failed", ev.fault.kind)
                self.errors.append(f"{ev.fault.kind}: {e}")

    def stop(self, timeout: float = 120.0) -> None:
        """Start no further faults; wait (bounded) for the one acting now to finish."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise ClusterError(f"the nemesis did not finish its fault within {timeout:g}s")

    def heal_all(self) -> None:
        """Undo every fault still in effect (restart, resume, heal, reset clocks, unstall)."""
        with self._lock:
            keys = list(self.active)
        for key in keys:
            try:
                self._end(key)
            except Exception as e:
                log.exception("undoing %s failed", key)
                self.errors.append(f"heal: {e}")

    # -- recording ----------------------------------------------------------------------------
    def _record(self, f: str, value: dict[str, Any], action: Callable[[], Any]) -> Any:
        self.recorder.nemesis(f, value, type="invoke")
        try:
            result = action()
        except Exception as e:  # the action did nothing (or we cannot tell: still "fail")
            err = f"{type(e).__name__}: {e}"
            self.recorder.nemesis(f, {**value, "error": err}, type="fail")
            raise
        self.recorder.nemesis(f, value, type="info")
        return result

    def _begin(self, key: tuple[int, int], fault: Fault) -> None:
        begin = getattr(self, "_begin_" + fault.kind.replace("-", "_"))
        active: Active | None = begin(fault)
        if active is not None:
            with self._lock:
                self.active[key] = active
            self.counts[fault.kind] = self.counts.get(fault.kind, 0) + 1

    def _end(self, key: tuple[int, int]) -> None:
        with self._lock:
            active = self.active.pop(key, None)
        if active is not None:
            value = {**active.value, "phase": "end"}
            self._record(active.f_end, value, active.undo)

    def _start(self, fault: Fault, f: str, f_end: str, value: dict, act, undo) -> Active:
        value = {"fault": fault.kind, "phase": "start", **value}
        self._record(f, value, act)
        return Active(fault, f_end, value, undo)

    # -- targets ------------------------------------------------------------------------------
    def _leader(self) -> str:
        try:
            node = self.cluster.wait_for_leader(LEADER_WAIT)
        except ClusterError as e:
            raise ClusterError(f"no leader to target within {LEADER_WAIT:g}s: {e}") from None
        return node.id

    def _ids(self) -> list[str]:
        return [n.id for n in self.cluster.nodes()]

    def _down(self) -> set[str]:
        with self._lock:
            items = list(self.active.values())
        return {n for a in items if a.f_end == "restart" for n in a.value.get("nodes", [])}

    # -- the faults ---------------------------------------------------------------------------
    def _kill(self, fault: Fault, nodes: list[str]) -> Active:
        c = self.cluster

        def restart(which: list[str]) -> None:
            """Restart every node in ``which``, also after one fails; then raise."""
            failed = []
            for n in which:
                try:
                    c.restart(n)
                except Exception as e:
                    failed.append(f"{n}: {e}")
            if failed:
                raise ClusterError(f"could not restart {'; '.join(failed)}")

        def act() -> None:
            for i, n in enumerate(nodes):
                try:
                    c.kill(n)
                except Exception:
                    # the fault is recorded as failed and will not be undone: restart the
                    # nodes it did kill, or they would stay down for the rest of the run
                    try:
                        restart(nodes[:i])
                    except ClusterError:
                        log.exception("after a failed kill of %s", n)
                    raise

        def undo() -> None:
            restart(nodes)

        return self._start(fault, "kill", "restart", {"nodes": nodes}, act, undo)

    def _begin_kill_leader(self, fault: Fault) -> Active:
        return self._kill(fault, [self._leader()])

    def _begin_kill_random(self, fault: Fault) -> Active:
        live = [n for n in self._ids() if n not in self._down()]
        return self._kill(fault, [self.rng.choice(live)])

    def _begin_kill_all(self, fault: Fault) -> Active:
        return self._kill(fault, [n for n in self._ids() if n not in self._down()])

    def _begin_pause_leader(self, fault: Fault) -> Active:
        node = self._leader()
        c = self.cluster
        return self._start(
            fault,
            "pause",
            "resume",
            {"nodes": [node]},
            lambda: c.pause(node),
            lambda: c.resume(node),
        )

    def _partition(self, fault: Fault, components: list[list[str]]) -> Active:
        c = self.cluster
        return self._start(
            fault,
            "partition",
            "heal",
            {"components": components},
            lambda: c.partition(components),
            c.heal,
        )

    def _begin_partition_leader(self, fault: Fault) -> Active:
        leader = self._leader()
        return self._partition(fault, [[leader], [n for n in self._ids() if n != leader]])

    def _begin_partition_majority(self, fault: Fault) -> Active:
        leader = self._leader()
        others = [n for n in self._ids() if n != leader]
        self.rng.shuffle(others)
        k = (len(others) + 1) // 2 - 1  # the minority: the leader plus k others
        minority = [leader, *others[:k]]
        return self._partition(fault, [sorted(minority), sorted(others[k:])])

    def _begin_partition_bridge(self, fault: Fault) -> Active:
        leader = self._leader()
        others = [n for n in self._ids() if n != leader]
        self.rng.shuffle(others)
        order = [leader, *others]
        half = len(order) // 2
        return self._partition(fault, [order[: half + 1], order[half:]])

    def _targets(self, target: str) -> list[str]:
        """The nodes a fault's ``target`` names (scenario.NODE_TARGETS), sorted."""
        ids = self._ids()
        if target == "all":
            return ids
        if target == "leader":
            return [self._leader()]
        if target == "follower":
            leader = self._leader()
            return [self.rng.choice([n for n in ids if n != leader])]
        if target == "minority":
            return sorted(self.rng.sample(ids, (len(ids) - 1) // 2))
        return [self.rng.choice(ids)]

    def _begin_clock_skew_node(self, fault: Fault) -> Active:
        nodes = self._targets(fault.target)
        c = self.cluster

        def set_all(seconds: float) -> Callable[[], None]:
            def act() -> None:
                for n in nodes:
                    c.set_clock_offset(n, seconds)

            return act

        return self._start(
            fault,
            "clock-skew",
            "clock-reset",
            {"nodes": nodes, "offset": fault.offset},
            set_all(fault.offset),
            set_all(0.0),
        )

    def _begin_clock_skew_worker(self, fault: Fault) -> Active:
        names = list(self.workload.claimer_names)
        k = max(1, math.ceil(fault.fraction * len(names)))
        workers = sorted(self.rng.sample(names, min(k, len(names))))
        w = self.workload

        def set_all(seconds: float) -> Callable[[], None]:
            def act() -> None:
                for n in workers:
                    w.set_clock_offset(n, seconds)

            return act

        return self._start(
            fault,
            "clock-skew",
            "clock-reset",
            {"targets": workers, "offset": fault.offset},
            set_all(fault.offset),
            set_all(0.0),
        )

    def _begin_lease_expiry(self, fault: Fault) -> Active:
        w = self.workload
        return self._start(
            fault,
            "start-stall",
            "stop-stall",
            {"probability": fault.probability},
            lambda: w.set_stall_probability(fault.probability),
            lambda: w.set_stall_probability(None),
        )

    def _begin_timezone(self, fault: Fault) -> Active:
        nodes = self._targets(fault.target)
        c = self.cluster
        offset = int(fault.offset)
        value: dict[str, Any] = {"nodes": nodes, "offset": offset}
        at = math.inf
        if fault.transition is None:
            tzif = zonefile.fixed(offset)
            value["zone"] = f"UTC{_hhmm(offset)}"
        else:
            now = time.time()
            at = math.ceil(now + fault.transition)  # a zone file's moments are whole seconds
            jump = int(fault.jump or 3600)
            tzif = zonefile.dst_jump(at, offset, jump)
            value.update(jump=jump, transition=round(at - now, 3))
            label = f"UTC{_hhmm(offset)}, UTC{_hhmm(offset + jump)}"
            value["zone"] = f"{label} from +{value['transition']:.1f} s"

        def set_zones(zone: bytes | None) -> Callable[[], None]:
            def act() -> None:
                """Every node in ``zone`` at once (one restart's time, so that the
                transition finds them running), also after one fails; then raise."""
                failed: list[str] = []

                def one(n: str) -> None:
                    try:
                        c.set_time_zone(n, zone)
                    except Exception as e:
                        failed.append(f"{n}: {e}")

                threads = [threading.Thread(target=one, args=(n,)) for n in nodes]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()  # set_time_zone itself waits, bounded, for the node to answer
                failed.sort()
                if failed:
                    if zone is not None:  # a failed start is not undone later: UTC now
                        try:
                            set_zones(None)()
                        except ClusterError:
                            log.exception("after a failed time zone change")
                    raise ClusterError(f"could not set the time zone of {'; '.join(failed)}")
                if zone is not None and time.time() > at:
                    log.warning(
                        "timezone: the transition came %.1f s before %s ran in the zone: "
                        "it happened before their start, not while they ran",
                        time.time() - at,
                        ",".join(nodes),
                    )

            return act

        return self._start(
            fault, "timezone", "timezone-reset", value, set_zones(tzif), set_zones(None)
        )


def _hhmm(seconds: int) -> str:
    """An offset as a zone names it: ``+01:00``, ``-03:30``, ``+00:00``."""
    sign = "-" if seconds < 0 else "+"
    h, rest = divmod(abs(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{sign}{h:02d}:{m:02d}" + (f":{s:02d}" if s else "")


def _describe(a: Active) -> str:
    v = a.value
    who = v.get("nodes") or v.get("targets") or v.get("components") or ""
    return f"{a.fault.kind} {who}".strip()
