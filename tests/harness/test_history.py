"""HistoryRecorder writes what read_history accepts; fault intervals from nemesis events."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from harness.checker import check
from harness.history import (
    HistoryFormatError,
    HistoryRecorder,
    fault_intervals,
    pairs,
    read_history,
)


class StepClock:
    """A fake monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_recorder_writes_the_format(tmp_path: Path) -> None:
    clock = StepClock()
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path, clock=clock) as rec:
        clock.now += 0.5
        op = rec.invoke(0, "publish", {"group": "g", "msg": "m1", "priority": 0})
        # each line is on disk as soon as it is written
        assert json.loads(path.read_text().splitlines()[0])["type"] == "invoke"
        clock.now += 0.25
        rec.complete(op, "ok", {"group": "g", "msg": "m1", "priority": 0, "seq": 1})
        rec.nemesis("kill", {"node": "n1"}, type="invoke")
        op = rec.invoke(1, "claim", {"visibility": 2.0, "min_priority": 0})
        rec.complete(op, "fail", {"visibility": 2.0, "min_priority": 0}, error="Unavailable: x")
    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["index"] for e in events] == [0, 1, 2, 3, 4]
    assert events[0] == {
        "index": 0,
        "time": 0.5,
        "process": 0,
        "type": "invoke",
        "f": "publish",
        "value": {"group": "g", "msg": "m1", "priority": 0},
    }
    assert events[1]["time"] == 0.75 and events[1]["value"]["seq"] == 1
    assert events[2]["process"] == "nemesis" and events[2]["type"] == "invoke"
    assert events[4]["error"] == "Unavailable: x"
    assert read_history(path) == events


def test_time_never_goes_backwards_even_if_the_clock_does(tmp_path: Path) -> None:
    clock = StepClock()
    rec = HistoryRecorder(tmp_path / "h.jsonl", clock=clock)
    clock.now += 2.0
    rec.nemesis("pause", None)
    clock.now -= 1.0
    rec.nemesis("resume", None)
    rec.close()
    times = [e["time"] for e in read_history(tmp_path / "h.jsonl")]
    assert times == [2.0, 2.0]


def test_recorder_refuses_what_would_make_the_file_unreadable(tmp_path: Path) -> None:
    rec = HistoryRecorder(tmp_path / "h.jsonl")
    op = rec.invoke(0, "claim", {"visibility": 1.0})
    with pytest.raises(ValueError, match="still has 'claim' open"):
        rec.invoke(0, "claim", {"visibility": 1.0})
    with pytest.raises(ValueError, match="completion type"):
        rec.complete(op, "done", None)
    rec.complete(op, "info", None, error="OutcomeUnknown: timeout")
    with pytest.raises(ValueError, match="got 'info'"):
        rec.invoke(0, "claim", {"visibility": 1.0})
    with pytest.raises(ValueError, match="is not open"):
        rec.complete(op, "ok", None)
    with pytest.raises(ValueError, match="unknown client operation 'enqueue'"):
        rec.invoke(1, "enqueue", {})
    with pytest.raises(TypeError, match="process must be an int"):
        rec.invoke("w1", "claim", {})  # type: ignore[arg-type]
    rec.close()
    with pytest.raises(ValueError, match="closed"):
        rec.nemesis("kill", None)
    assert len(read_history(tmp_path / "h.jsonl")) == 2


def test_threads_and_tasks_record_one_consistent_history(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    rec = HistoryRecorder(path)

    def worker(process: int) -> None:
        for k in range(200):
            value = {"group": f"g{process}", "msg": f"m-{process}-{k}", "priority": 0}
            op = rec.invoke(process, "publish", value)
            rec.complete(op, "ok", {**value, "seq": k})

    async def task(process: int) -> None:
        for k in range(200):
            op = rec.invoke(process, "ack", {"group": "g", "msg": f"x-{process}-{k}"})
            await asyncio.sleep(0)
            rec.complete(op, "fail", None, error="LeaseLost: gone")

    async def tasks() -> None:
        await asyncio.gather(*(task(p) for p in range(100, 104)))

    threads = [threading.Thread(target=worker, args=(p,)) for p in range(6)]
    for t in threads:
        t.start()
    asyncio.run(tasks())
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a recording thread did not finish within 30 s"
    rec.close()
    events = read_history(path)  # raises on any interleaving defect
    assert len(events) == 2 * 200 * 10
    assert sum(1 for _ in pairs(events)) == 200 * 10
    assert check(events)["stats"]["published"] == 1200


def test_crashed_run_leaves_a_checkable_file(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    rec = HistoryRecorder(path)
    op = rec.invoke(0, "publish", {"group": "g", "msg": "m", "priority": 0})
    rec.complete(op, "ok", {"group": "g", "msg": "m", "priority": 0})
    rec.invoke(1, "claim", {"visibility": 1.0})
    # no close(): the process "crashed" with an operation open
    events = read_history(path)
    assert [(i, c is None) for i, c in ((i["index"], c) for i, c in pairs(events))] == [
        (0, False),
        (2, True),
    ]
    assert check(events)["anomalies"]["lost"]["count"] == 1
    rec.close()


def test_pairs_reports_what_does_not_pair() -> None:
    ev = {"index": 0, "time": 0.0, "process": 4, "type": "ok", "f": "claim", "value": None}
    with pytest.raises(HistoryFormatError, match="no open invoke") as e:
        list(pairs([ev]))
    assert e.value.line == 1


def _nemesis(rows: list[tuple[float, str, str, object]]) -> list[dict]:
    return [
        {"index": i, "time": t, "process": "nemesis", "type": typ, "f": f, "value": v}
        for i, (t, typ, f, v) in enumerate(rows)
    ]


def test_fault_intervals_from_the_harness_nemesis() -> None:
    start = {"fault": "kill-leader", "phase": "start", "nodes": ["n2"]}
    end = {**start, "phase": "end"}
    failed = {"fault": "partition-leader", "phase": "start", "error": "ClusterError: x"}
    events = _nemesis(
        [
            (1.0, "invoke", "kill", start),
            (1.2, "info", "kill", start),
            (2.0, "invoke", "partition", failed),
            (2.1, "fail", "partition", failed),
            (5.0, "invoke", "restart", end),
            (5.5, "info", "restart", end),
        ]
    )
    [fault] = fault_intervals(events)
    assert (fault.kind, fault.label, fault.start, fault.end) == (
        "kill-leader",
        "kill-leader n2",
        1.0,
        5.0,
    )
    assert (fault.start_index, fault.end_index) == (0, 4)


def test_a_partition_label_names_the_node_cut_off() -> None:
    """As a kill's label names the node killed, a partition's names its sides, the
    smaller (the node cut off) first."""
    comps = [["n2", "n3"], ["n1"]]
    start = {"fault": "partition-leader", "phase": "start", "components": comps}
    events = _nemesis(
        [(1.0, "invoke", "partition", start), (4.0, "invoke", "heal", {**start, "phase": "end"})]
    )
    [fault] = fault_intervals(events)
    assert (fault.label, fault.start, fault.end) == ("partition-leader n1 | n2,n3", 1.0, 4.0)


def test_fault_intervals_from_plain_names() -> None:
    events = _nemesis(
        [
            (1.0, "info", "kill", {"node": "n1"}),
            (2.0, "info", "kill", {"node": "n2"}),
            (3.0, "info", "restart", {"node": "n2"}),
            (4.0, "info", "partition", [["n1"], ["n2", "n3"]]),
            (5.0, "info", "clock-skew", {"node": "n3", "offset": 0.5}),
            (6.0, "info", "heal", None),
            (7.0, "info", "clock-skew", {"node": "n3", "offset": 0}),
            (8.0, "info", "restart", None),
            (9.0, "info", "pause", "n1"),
        ]
    )
    got = [(f.label, f.start, f.end) for f in fault_intervals(events)]
    assert got == [
        ("kill n1", 1.0, 8.0),
        ("kill n2", 2.0, 3.0),
        ("partition n1 | n2,n3", 4.0, 6.0),
        ("clock-skew n3", 5.0, 7.0),
        ("pause n1", 9.0, None),
    ]


def test_values_that_look_like_two_objects_still_read(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path) as rec:
        op = rec.invoke(0, "claim", {"visibility": 1.0})
        rec.complete(op, "fail", {"visibility": 1.0}, error='bad answer: [{"a": 1}, {"b": 2}]')
    assert read_history(path)[1]["error"] == 'bad answer: [{"a": 1}, {"b": 2}]'


def test_rebase_moves_time_0_only_while_nothing_is_recorded(tmp_path):
    from harness.history import HistoryRecorder

    now = [100.0]
    rec = HistoryRecorder(tmp_path / "h.jsonl", clock=lambda: now[0])
    now[0] = 110.0  # opening the clients took 10 s
    assert rec.rebase() and rec.elapsed() == 0.0
    now[0] = 111.0
    op = rec.invoke(0, "publish", {"msg": "m"})
    assert op.time == 1.0
    assert not rec.rebase() and rec.elapsed() == 1.0
    rec.close()
