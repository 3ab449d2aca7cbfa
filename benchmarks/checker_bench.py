"""Benchmark the checker on a realistic simulated history (default one million events).

    python benchmarks/checker_bench.py [--events 1000000] [--seed 1] [--keep PATH]

Simulates a correct queue (publishers, claimers that stall, nack, extend and ack;
``fail`` and ``info`` outcomes, more of them during kill/pause/partition faults; a
drain at the end), writes it as ``history.jsonl``, then prints how long reading,
checking and both take. The simulated history must check valid: that is part of what
the benchmark shows. :func:`simulate` is also the generator of the checker's
property tests.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import io
import json
import os
import random
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FAULTS = (("kill", "restart"), ("pause", "resume"), ("partition", "heal"))


@dataclass
class Message:
    msg: str
    seq: int  # the stored copy's, kept for its whole life (docs/history-format.md)
    token: str | None = None
    expiry: float = 0.0
    visible_at: float = 0.0


@dataclass
class Worker:
    wid: int
    publisher: bool
    process: int
    groups: list[str] = field(default_factory=list)
    lease: dict | None = None
    plan: list[tuple[str, float]] = field(default_factory=list)
    sent: int = 0
    done: bool = False


class Simulation:
    """A discrete-event simulation of a correct queue, recording a history as it goes.

    Every operation has an invoke, an effect at a random instant before its completion
    (the linearization point, where the queue state changes) and a completion. ``fail``
    has no effect; ``info`` takes effect or not at random and retires the process.
    """

    def __init__(
        self,
        seed: int,
        *,
        publishers: int = 4,
        claimers: int = 12,
        groups_per_publisher: int = 6,
        visibility: float = 2.0,
        p_fail: float = 0.01,
        p_info: float = 0.004,
        fault_every: float = 10.0,
    ) -> None:
        self.rng = random.Random(seed)
        self.visibility = visibility
        self.p_fail, self.p_info = p_fail, p_info
        self.fault_every = fault_every
        self.events: list[dict] = []
        self.heap: list[tuple[float, int, str, Any]] = []
        self.seq = 0
        self.stored = 0  # the seq of the last message stored
        self.next_process = 0
        self.next_token = 0
        self.queues: dict[str, deque[Message]] = {}
        self.draining = False
        self.stopped = False
        self.faulty = False
        self.workers: list[Worker] = []
        for w in range(publishers + claimers):
            worker = Worker(w, w < publishers, self._new_process())
            if worker.publisher:
                worker.groups = [f"g{w}-{k}" for k in range(groups_per_publisher)]
                for g in worker.groups:
                    self.queues[g] = deque()
            self.workers.append(worker)
        self.group_order = list(self.queues)

    # -- scheduling ---------------------------------------------------------------------
    def _new_process(self) -> int:
        self.next_process += 1
        return self.next_process - 1

    def _at(self, t: float, kind: str, payload: Any) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, payload))

    def _record(self, t: float, process: Any, typ: str, f: str, value: Any, error: Any) -> dict:
        ev = {
            "index": len(self.events),
            "time": round(t, 6),
            "process": process,
            "type": typ,
            "f": f,
            "value": value,
        }
        if error:
            ev["error"] = error
        self.events.append(ev)
        return ev

    def run(self, workload_events: int) -> list[dict]:
        """Run the workload until ``workload_events`` events, then drain; return events."""
        for w in self.workers:
            self._at(self.rng.uniform(0, 0.05), "next", w)
        self._at(self.fault_every, "fault", None)
        while self.heap:
            t, _, kind, payload = heapq.heappop(self.heap)
            if not self.draining and len(self.events) >= workload_events:
                self.draining = True
            getattr(self, "_on_" + kind)(t, payload)
        return self.events

    # -- faults -------------------------------------------------------------------------
    def _on_fault(self, t: float, _: Any) -> None:
        if self.draining:
            return
        start, end = self.rng.choice(FAULTS)
        node = f"n{self.rng.randint(1, 3)}"
        self._nemesis(t, start, node)
        self.faulty = True
        length = self.rng.uniform(2.0, 5.0)
        self._at(t + length, "heal", (end, node))

    def _nemesis(self, t: float, f: str, node: str) -> None:
        self._record(t, "nemesis", "invoke", f, {"node": node}, None)
        self._at(t + 0.01, "nemesis_done", (f, node))

    def _on_nemesis_done(self, t: float, payload: tuple[str, str]) -> None:
        f, node = payload
        self._record(t, "nemesis", "info", f, {"node": node}, None)

    def _on_heal(self, t: float, payload: tuple[str, str]) -> None:
        end, node = payload
        self._nemesis(t, end, node)
        self.faulty = False
        if not self.draining:
            self._at(t + self.fault_every, "fault", None)

    # -- workers ------------------------------------------------------------------------
    def _on_next(self, t: float, w: Worker) -> None:
        rng = self.rng
        if w.publisher:
            if self.draining:
                w.done = True
                return
            w.sent += 1
            g = rng.choice(w.groups)
            value = {"group": g, "msg": f"m-{w.wid}-{w.sent}", "priority": rng.randint(0, 4)}
            self._invoke(t, w, "publish", value)
        elif w.lease is None:
            self._invoke(t, w, "claim", {"visibility": self.visibility, "min_priority": 0})
        else:
            f, arg = w.plan.pop(0)
            value = {k: w.lease[k] for k in ("group", "msg", "seq", "token")}
            if f == "nack":
                value["delay"] = arg
            elif f == "extend":
                value["visibility"] = self.visibility
            self._invoke(t, w, f, value)

    def _invoke(self, t: float, w: Worker, f: str, value: dict) -> None:
        rng = self.rng
        inv = self._record(t, w.process, "invoke", f, value, None)
        slow = 3.0 if self.faulty else 1.0
        p_fail = 0 if self.draining else self.p_fail * (10 if self.faulty else 1)
        p_info = 0 if self.draining else self.p_info * (5 if self.faulty else 1)
        r = rng.random()
        outcome = "fail" if r < p_fail else "info" if r < p_fail + p_info else "ok"
        latency = rng.uniform(0.002, 0.03) * slow
        t_effect = t + rng.uniform(0, latency)
        t_done = t + latency + (1.0 if outcome == "info" else 0.0)
        self._at(t_effect, "effect", (w, inv, outcome, t_done))

    def _on_effect(self, t: float, payload: tuple) -> None:
        w, inv, outcome, t_done = payload
        applies = outcome == "ok" or (outcome == "info" and self.rng.random() < 0.5)
        typ, result, error = outcome, inv["value"], None
        if outcome == "fail":
            error = "Unavailable: no leader"
        if applies:
            ok, result, error2 = getattr(self, "_apply_" + inv["f"])(t, w, inv["value"])
            if outcome == "ok" and not ok:
                typ, error = "fail", error2
        if outcome == "info":
            error = "OutcomeUnknown: timed out"
        self._at(t_done, "complete", (w, inv, typ, result, error))

    def _on_complete(self, t: float, payload: tuple) -> None:
        w, inv, typ, result, error = payload
        f = inv["f"]
        self._record(t, w.process, typ, f, result if typ == "ok" else inv["value"], error)
        rng = self.rng
        think = rng.uniform(0.08, 0.2) if w.publisher else rng.uniform(0.0, 0.02)
        if typ == "info":
            w.process = self._new_process()
        if f == "claim":
            if typ == "ok" and result is not None:
                w.lease = result
                w.plan = self._plan()
                think = w.plan.pop(0)[1]
            elif self.draining and typ == "ok" and self._empty():
                w.done = True
                return
            elif result is None:
                think = rng.uniform(0.02, 0.1)
        elif f in ("ack", "nack") or (f == "extend" and typ != "ok") or typ == "info":
            w.lease, w.plan = None, []
        elif f == "extend":
            think = w.plan.pop(0)[1]
        self._at(t + think, "next", w)

    def _plan(self) -> list[tuple[str, float]]:
        """What to do with a fresh lease: [("work", s), (op, arg), ...]."""
        rng, vis = self.rng, self.visibility
        if self.draining:
            return [("work", rng.uniform(0.0, 0.02)), ("ack", 0)]
        r = rng.random()
        if r < 0.05:
            return [("work", vis * rng.uniform(1.3, 2.0)), ("ack", 0)]
        if r < 0.12:
            return [("work", rng.uniform(0.0, 0.3)), ("nack", rng.choice((0.0, 0.5)))]
        if r < 0.2:
            return [
                ("work", vis * rng.uniform(0.3, 0.6)),
                ("extend", 0),
                ("work", vis * rng.uniform(0.3, 0.6)),
                ("ack", 0),
            ]
        return [("work", rng.uniform(0.005, 0.3)), ("ack", 0)]

    def _empty(self) -> bool:
        return not any(self.queues.values())

    # -- the queue itself ---------------------------------------------------------------
    def _apply_publish(self, t: float, w: Worker, value: dict) -> tuple[bool, Any, Any]:
        self.stored += 1
        self.queues[value["group"]].append(Message(value["msg"], self.stored))
        return True, {**value, "seq": self.stored}, None

    def _apply_claim(self, t: float, w: Worker, value: dict) -> tuple[bool, Any, Any]:
        order = self.group_order
        start = self.rng.randrange(len(order))
        for k in range(len(order)):
            g = order[(start + k) % len(order)]
            q = self.queues[g]
            if not q:
                continue
            head = q[0]
            if (head.token is None or head.expiry < t) and head.visible_at <= t:
                self.next_token += 1
                head.token = f"t{self.next_token}"
                head.expiry = t + value["visibility"]
                lease = {
                    "group": g,
                    "msg": head.msg,
                    "seq": head.seq,
                    "token": head.token,
                    "visibility": value["visibility"],
                }
                return True, lease, None
        return True, None, None

    def _holder(self, value: dict) -> tuple[deque[Message], Message | None]:
        q = self.queues[value["group"]]
        head = q[0] if q else None
        if head is None or head.msg != value["msg"] or head.token != value["token"]:
            return q, None
        return q, head

    def _apply_ack(self, t: float, w: Worker, value: dict) -> tuple[bool, Any, Any]:
        q, head = self._holder(value)
        if head is None:
            return False, value, "LeaseLost: lease lost"
        q.popleft()
        return True, value, None

    def _apply_nack(self, t: float, w: Worker, value: dict) -> tuple[bool, Any, Any]:
        _, head = self._holder(value)
        if head is None:
            return False, value, "LeaseLost: lease lost"
        head.token, head.expiry, head.visible_at = None, 0.0, t + value["delay"]
        return True, value, None

    def _apply_extend(self, t: float, w: Worker, value: dict) -> tuple[bool, Any, Any]:
        _, head = self._holder(value)
        if head is None:
            return False, value, "LeaseLost: lease lost"
        head.expiry = t + value["visibility"]
        return True, value, None


def simulate(seed: int, events: int = 1000, **options: Any) -> list[dict]:
    """A valid history of roughly ``events`` events from a correct simulated queue."""
    return Simulation(seed, **options).run(events)


def write_history(events: list[dict], path: Path) -> None:
    """Write events as JSON Lines."""
    dumps = json.dumps
    with path.open("w", encoding="utf-8") as out:
        out.writelines(dumps(ev, separators=(", ", ": ")) + "\n" for ev in events)


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from harness.check_cli import main_check
    from harness.checker import check
    from harness.history import gc_paused, read_history

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="history size (workload part)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", type=Path, help="write the history here instead of a temp dir")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    events = simulate(args.seed, args.events)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "history.jsonl"
        write_history(events, path)
        del events
        size = path.stat().st_size
        with gc_paused():  # as main_check does
            t2, c2 = time.perf_counter(), time.process_time()
            loaded = read_history(path)
            t3, c3 = time.perf_counter(), time.process_time()
            result = check(loaded)
            t4, c4 = time.perf_counter(), time.process_time()
        del loaded
        # the whole command as `python -m harness check FILE` runs it (minus start-up)
        with contextlib.redirect_stdout(io.StringIO()):
            t5, c5 = time.perf_counter(), time.process_time()
            status = main_check(path)
            t6, c6 = time.perf_counter(), time.process_time()
    stats = result["stats"]
    print(f"simulated {stats['events']:,} events ({size / 1e6:.0f} MB) in {t1 - t0:.1f} s")
    print(
        f"  leases {stats['leases']:,}, published {stats['published']:,}, "
        f"redeliveries {stats['redeliveries']:,}, faults {len(stats['availability'])}"
    )
    print("                wall s   cpu s")
    print(f"read_history: {t3 - t2:8.2f} {c3 - c2:7.2f}")
    print(f"check:        {t4 - t3:8.2f} {c4 - c3:7.2f}")
    print(f"total:        {t4 - t2:8.2f} {c4 - c2:7.2f}   (target: 10 s for 1M events)")
    print(f"main_check:   {t6 - t5:8.2f} {c6 - c5:7.2f}   (read, check, check.json, summary)")
    print(
        f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores"
    )
    print(f"valid: {result['valid']} (main_check exit status {status})")
    if not result["valid"]:
        bad = {k: v for k, v in result["anomalies"].items() if v["count"]}
        print(f"unexpected anomalies in a correct queue's history: {bad}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
