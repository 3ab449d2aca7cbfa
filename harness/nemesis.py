"""Faults on a schedule: kill, pause, partition, skew clocks, stall workers — and undo them.

Each fault window of the scenario becomes two nemesis operations in the history, one at
its start and one at its end, each written as an ``invoke`` before acting and an
``info`` after (``fail``, with ``error`` in the value, when the action raised: the
history's fault intervals then ignore it). Every value carries
``"fault"`` (the scenario's kind) and ``"phase"`` (``"start"`` or ``"end"``). Each
kind declares the ``f`` of its start and of its end (``FaultKind.f_start`` and
``f_end``: ``kill-leader`` is recorded as ``kill`` then ``restart``);
docs/history-format.md ("Fault events") lists them, checked against the registry by
tests/harness/test_fault_names.py.

What each kind does and undoes lives in its module of :mod:`harness.faults`; the nemesis
finds it in the registry (:data:`harness.faults.KINDS`) and records it.

:meth:`Nemesis.heal_all` undoes whatever is still in effect when the workload ends.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .cluster.base import Cluster, ClusterError
from .faults import Fault, Stage, WorkloadControls, kind_of

log = logging.getLogger(__name__)


class Recorder(Protocol):
    """Where the nemesis writes its operations (:class:`harness.history.HistoryRecorder`)."""

    def nemesis(self, f: str, value: Any = None, type: str = "info") -> Any: ...


@dataclass
class Active:
    """A fault in effect, with what is needed to undo it."""

    fault: Fault
    f_end: str
    value: dict[str, Any]
    undo: Callable[[], None]
    background: bool = False


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
        recorder: Recorder,
        workload: WorkloadControls,
        faults: tuple[Fault, ...] | list[Fault],
        duration: float,
        *,
        seed: int = 0,
    ) -> None:
        self.cluster, self.recorder, self.workload = cluster, recorder, workload
        self.rng = random.Random(f"{seed}-nemesis")
        self.stage = Stage(cluster, workload, self.rng, self._down)
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
            self._act(ev)

    def _act(self, ev: Any) -> None:
        """Start or end one window of the schedule; a fault that cannot act is recorded
        (``errors``), and the run goes on."""
        key = (id(ev.fault), ev.window)
        try:
            if ev.order == 1:
                self._begin(key, ev.fault)
            else:
                self._end(key)
        except Exception as e:
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

    def release(self) -> None:
        """Undo, without recording, the faults still in effect that left something running
        (a clock strobe's thread): for a run that ends without :meth:`heal_all`."""
        with self._lock:
            running = [k for k, a in self.active.items() if a.background]
        for key in running:
            with self._lock:
                active = self.active.pop(key, None)
            if active is not None:
                try:
                    active.undo()
                except Exception:
                    log.exception("releasing %s failed", active.fault.kind)

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
        action = kind_of(fault.kind).begin(self.stage, dict(fault.params))
        value = {"fault": fault.kind, "phase": "start", **action.value}
        self._record(action.f, value, action.act)
        with self._lock:
            self.active[key] = Active(fault, action.f_end, value, action.undo, action.background)
        self.counts[fault.kind] = self.counts.get(fault.kind, 0) + 1

    def _end(self, key: tuple[int, int]) -> None:
        with self._lock:
            active = self.active.pop(key, None)
        if active is not None:
            value = {**active.value, "phase": "end"}
            self._record(active.f_end, value, active.undo)

    def _down(self) -> set[str]:
        """The nodes a kill in effect keeps down."""
        with self._lock:
            items = list(self.active.values())
        return {n for a in items if a.f_end == "restart" for n in a.value.get("nodes", [])}


def _describe(a: Active) -> str:
    v = a.value
    who = v.get("nodes") or v.get("targets") or v.get("components") or ""
    return f"{a.fault.kind} {who}".strip()
