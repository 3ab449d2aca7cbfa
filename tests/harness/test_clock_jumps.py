"""clock-strobe and clock-jump-back (harness.faults.clock_jumps): the strobe's thread
flips for the whole window and stops cleanly in undo; on a real node the clock the node
reports follows the flips; jump-back holds the clock back until the end."""

from __future__ import annotations

import itertools
import json
import random
import threading
import time

import pytest

from harness.cluster.base import http_get
from harness.faults import Stage, kind_of
from harness.faults.clock_jumps import Strobe


class Workers:
    """The workload's clock knob, recording every setting with its time."""

    claimer_names = ("s0", "s1", "a0", "a1")

    def __init__(self) -> None:
        self.sets: list[tuple[float, str, float]] = []
        self.now: dict[str, float] = {}
        self.lock = threading.Lock()

    def set_clock_offset(self, worker: str, seconds: float) -> None:
        with self.lock:
            self.sets.append((time.monotonic(), worker, seconds))
            self.now[worker] = seconds

    def set_stall_probability(self, p):
        pass


def test_a_worker_strobe_flips_every_period_and_undo_leaves_the_clocks_right():
    w = Workers()
    action = kind_of("clock-strobe-worker").begin(
        Stage(None, w, random.Random(3)), {"offset": 8.0, "period": 0.05, "fraction": 0.5}
    )
    workers = action.value["targets"]
    assert len(workers) == 2 and action.f == "clock-strobe" and action.f_end == "clock-reset"
    assert action.value == {"targets": workers, "offset": 8.0, "period": 0.05}
    action.act()
    deadline = time.monotonic() + 5.0
    while len(w.sets) < 10 and time.monotonic() < deadline:  # five flips of two workers
        time.sleep(0.01)
    action.undo()
    stopped = len(w.sets)
    values = [s for _, who, s in w.sets if who == workers[0]]
    assert values[:5] == [8.0, 0.0, 8.0, 0.0, 8.0], "flips alternate, starting ahead"
    assert values[-1] == 0.0 and w.now == dict.fromkeys(workers, 0.0)
    times = [t for t, who, _ in w.sets if who == workers[0]][:5]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(0.03 < g < 0.5 for g in gaps), gaps
    time.sleep(0.15)  # three periods: no flip lands after the reset
    assert len(w.sets) == stopped


def test_a_worker_jump_back_holds_the_clocks_back_until_the_end():
    w = Workers()
    action = kind_of("clock-jump-back-worker").begin(
        Stage(None, w, random.Random(1)), {"offset": 8.0, "fraction": 1.0}
    )
    assert action.f == "clock-jump" and action.value["offset"] == -8.0
    action.act()
    assert w.now == dict.fromkeys(Workers.claimer_names, -8.0)
    action.undo()
    assert w.now == dict.fromkeys(Workers.claimer_names, 0.0)


def test_a_strobe_whose_writes_fail_goes_on_flipping_and_still_resets():
    calls: list[float] = []

    def set_one(node: str, seconds: float) -> None:
        calls.append(seconds)
        if len(calls) in (2, 3):
            raise OSError("node restarting")

    strobe = Strobe(set_one, ["n1"], 0.2, 0.03)
    strobe.start()
    deadline = time.monotonic() + 5.0
    while len(calls) < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    strobe.stop()
    assert len(strobe.errors) == 2 and calls[-1] == 0.0 and len(calls) >= 6


def _offset(url: str) -> float:
    code, body = http_get(f"{url}/status", 2.0)
    assert code == 200
    return json.loads(body)["node"]["clock_offset"]


@pytest.mark.slow
def test_a_real_nodes_clock_follows_the_strobe_and_the_jump_back(make_cluster):
    c = make_cluster(1)
    node = c.wait_for_leader(30)
    stage = Stage(c, Workers(), random.Random(1))
    strobe = kind_of("clock-strobe-node").begin(
        stage, {"offset": 0.2, "period": 0.2, "target": "leader"}
    )
    assert strobe.value["nodes"] == [node.id]
    strobe.act()
    seen: list[float] = []
    deadline = time.monotonic() + 10.0
    while seen.count(0.2) < 2 or seen.count(0.0) < 2:  # the node re-reads its file
        assert time.monotonic() < deadline, f"the node's offsets seen: {seen}"
        offset = _offset(node.url)
        if not seen or seen[-1] != offset:
            seen.append(offset)
        time.sleep(0.02)
    assert set(seen) == {0.2, 0.0}
    strobe.undo()
    path = c.directory / node.id / "clock-offset"
    assert float(path.read_text()) == 0.0 and _offset(node.url) == 0.0
    back = kind_of("clock-jump-back-node").begin(stage, {"offset": 0.5, "target": "leader"})
    back.act()
    _code, body = http_get(f"{node.url}/status", 2.0)
    reported = json.loads(body)["node"]
    assert reported["clock_offset"] == -0.5
    assert abs(reported["current_time"] - time.time() + 0.5) < 0.2
    back.undo()
    assert _offset(node.url) == 0.0


def test_a_run_that_ends_without_healing_still_stops_the_strobe():
    from harness.faults import Fault
    from harness.nemesis import Nemesis

    class Recorder:
        def __init__(self) -> None:
            self.fs: list[str] = []

        def nemesis(self, f, value=None, type="info"):
            self.fs.append(f)

    w, rec = Workers(), Recorder()
    fault = Fault("clock-strobe-worker", 0.0, 60.0, period=0.05, fraction=1.0)
    n = Nemesis(None, rec, w, [fault], 60.0)
    n.start()
    deadline = time.monotonic() + 5.0
    while len(w.sets) < 12 and time.monotonic() < deadline:  # three flips of four workers
        time.sleep(0.01)
    n.stop()
    n.release()  # what the run's teardown does when it never healed
    stopped = len(w.sets)
    assert w.now == dict.fromkeys(Workers.claimer_names, 0.0) and not n.active
    assert rec.fs == ["clock-strobe", "clock-strobe"]  # released, not recorded as healed
    time.sleep(0.15)
    assert len(w.sets) == stopped
