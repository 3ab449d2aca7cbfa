"""Stalls outside the fault windows: found in the history, named in the report with what
the clients were waiting on."""

from __future__ import annotations

from harness.checker.stalls import describe, stalls


class _History:
    """A history built operation by operation (each process one operation at a time)."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def _add(self, t: float, process: object, typ: str, f: str, value: dict) -> None:
        self.events.append(
            {"index": len(self.events), "time": t, "process": process, "type": typ,
             "f": f, "value": value}
        )  # fmt: skip

    def op(self, process: int, f: str, t0: float, t1: float) -> None:
        self._add(t0, process, "invoke", f, {})
        self._add(t1, process, "ok", f, {})

    def fault(self, t0: float, t1: float) -> None:
        value = {"fault": "kill-leader", "nodes": ["n1"]}
        self._add(t0, "nemesis", "invoke", "kill", {**value, "phase": "start"})
        self._add(t1, "nemesis", "invoke", "restart", {**value, "phase": "end"})


def _sorted(h: _History) -> list[dict]:
    ordered = sorted(h.events, key=lambda e: (e["time"], e["index"]))
    return [{**e, "index": i} for i, e in enumerate(ordered)]


def test_a_gap_outside_the_faults_is_named_with_what_was_in_flight() -> None:
    h = _History()
    for k in range(20):  # steady work, 0.2 s apart, on process 0
        h.op(0, "publish", k * 0.2, k * 0.2 + 0.1)
    h.op(1, "claim", 4.0, 5.8)  # a claim and an ack held 1.8 s at 4 s: no completion
    h.op(2, "ack", 4.05, 5.9)
    h.fault(10.0, 12.0)  # a kill, and a gap across its window: not a stall
    h.op(0, "publish", 6.0, 6.1)
    h.op(0, "publish", 9.9, 10.0)
    h.op(0, "publish", 12.5, 12.6)
    h.op(0, "publish", 20.0, 20.1)  # 3.4 s with nothing in flight after the recovery
    found = stalls(_sorted(h))
    assert [(s["start"], s["end"]) for s in found] == [(3.9, 5.8), (6.1, 10.0), (12.6, 20.1)]
    first = found[0]
    assert first["in_flight"] == {"ack": 1, "claim": 1} and first["oldest_sent"] == 4.0
    assert describe(first) == (
        "3.90-5.80 s (1.90 s): waiting on the cluster: 1 ack, 1 claim in flight, "
        "the oldest sent at 4.00 s"
    )
    assert found[2]["in_flight"] == {}
    assert "nothing in flight: the clients sent nothing" in describe(found[2])


def test_steady_work_has_no_stall() -> None:
    h = _History()
    for k in range(50):
        h.op(k % 3, "claim", k * 0.5, k * 0.5 + 0.3)
    assert stalls(_sorted(h)) == []
