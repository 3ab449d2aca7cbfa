"""The checker against hand-written histories (tests/harness/histories/, expected.json).

Each history shows one anomaly, one ambiguity rule (where an ``info`` or concurrency makes
it not an anomaly), or one way a file is unreadable; ``expected.json`` holds what
``python -m harness check`` must say about it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.check_cli import main_check
from harness.checker import ANOMALIES, CLOCK_TOLERANCE, check
from harness.history import HistoryFormatError, read_history
from rqueue._statements import DEFAULT_CLOCK_TOLERANCE, SERVER_CLOCK_STEP

HISTORIES = Path(__file__).parent / "histories"
EXPECTED: dict[str, dict[str, Any]] = {
    k: v
    for k, v in json.loads((HISTORIES / "expected.json").read_text()).items()
    if not k.startswith("_")
}
READABLE = sorted(k for k, v in EXPECTED.items() if "error" not in v)
UNREADABLE = sorted(k for k, v in EXPECTED.items() if "error" in v)


def test_every_history_file_has_an_expectation() -> None:
    files = {p.stem for p in HISTORIES.glob("*.jsonl")}
    assert files == set(EXPECTED)


def _fragment_matches(actual: Any, expected: Any, where: str = "") -> None:
    if isinstance(expected, dict):
        for key, value in expected.items():
            assert key in actual, f"{where}/{key} missing in {actual}"
            _fragment_matches(actual[key], value, f"{where}/{key}")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


@pytest.mark.parametrize("name", READABLE)
def test_check_result(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = EXPECTED[name]
    path = tmp_path / "history.jsonl"
    shutil.copy(HISTORIES / f"{name}.jsonl", path)
    status = main_check(path)
    result = json.loads((tmp_path / "check.json").read_text())
    # every anomaly name is present; those not expected are zero
    assert list(result["anomalies"]) == list(ANOMALIES)
    wanted = expected.get("anomalies", {})
    for anomaly, body in result["anomalies"].items():
        if anomaly not in wanted:
            assert body == {"count": 0, "examples": []}, anomaly
    _fragment_matches(result, expected)
    assert result["valid"] == (not wanted)
    assert status == (0 if result["valid"] else 1)
    out = capsys.readouterr().out
    assert ("history is valid" in out) == result["valid"]
    assert ("anomalies found" in out) != result["valid"]


@pytest.mark.parametrize("name", UNREADABLE)
def test_unreadable_file(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    error = EXPECTED[name]["error"]
    path = HISTORIES / f"{name}.jsonl"
    with pytest.raises(HistoryFormatError) as e:
        check(read_history(path))
    assert e.value.line == error["line"]
    assert error["reason"] in e.value.reason
    copy = tmp_path / "history.jsonl"
    shutil.copy(path, copy)
    assert main_check(copy) == 2
    err = capsys.readouterr().err
    assert f"{copy}:{error['line']}: " in err and error["reason"] in err
    assert not (tmp_path / "check.json").exists()


def test_missing_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main_check(tmp_path / "nope.jsonl") == 2
    assert "cannot read" in capsys.readouterr().err


def test_run_folder_names_its_history(tmp_path: Path) -> None:
    shutil.copy(HISTORIES / "lost.jsonl", tmp_path / "history.jsonl")
    assert main_check(tmp_path) == 1
    assert json.loads((tmp_path / "check.json").read_text())["anomalies"]["lost"]["count"] == 1


def test_empty_history_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text("")
    assert main_check(path) == 0


def test_crlf_line_ends_are_accepted(tmp_path: Path) -> None:
    text = (HISTORIES / "valid-basic.jsonl").read_text()
    path = tmp_path / "history.jsonl"
    path.write_bytes(text.replace("\n", "\r\n").encode())
    assert check(read_history(path))["valid"]


def test_check_is_pure(tmp_path: Path) -> None:
    events = read_history(HISTORIES / "stale-ack-ambiguous.jsonl")
    before = json.dumps(events)
    assert check(events) == check(events)
    assert json.dumps(events) == before


def test_extra_value_keys_are_ignored() -> None:
    events = read_history(HISTORIES / "fifo-violation.jsonl")
    for ev in events:
        if isinstance(ev["value"], dict):
            ev["value"]["note"] = {"anything": [1, 2]}
    assert check(events)["anomalies"]["fifo-violation"]["count"] == 1


def test_examples_are_capped_at_ten() -> None:
    events: list[dict] = []

    def add(process: Any, typ: str, f: str, value: Any) -> None:
        t = len(events) * 0.01
        events.append(
            {
                "index": len(events),
                "time": t,
                "process": process,
                "type": typ,
                "f": f,
                "value": value,
            }
        )

    for k in range(15):
        add(0, "invoke", "publish", {"group": f"g{k}", "msg": f"m{k}", "priority": 0})
        add(0, "ok", "publish", {"group": f"g{k}", "msg": f"m{k}", "priority": 0})
    lost = check(events)["anomalies"]["lost"]
    assert lost["count"] == 15
    assert lost["examples"] == [[2 * k, 2 * k + 1] for k in range(10)]


def test_statistics_count_ops_and_availability() -> None:
    stats = check(read_history(HISTORIES / "valid-basic.jsonl"))["stats"]
    assert stats["ops"]["claim"] == {"ok": 4, "fail": 0, "info": 0, "open": 0}
    assert stats["ops"]["nack"]["ok"] == 1
    assert stats["events"] == 22
    # the kill at 0.30 s: the next claim invoked after it leased at 0.41 s
    [fault] = stats["availability"]
    assert fault["kind"] == "kill" and fault["label"] == "kill n1"
    assert fault["start"] == 0.30 and fault["end"] == 0.90
    assert fault["recovery"] == pytest.approx(0.11)
    assert set(stats["latency"]["claim"]) == {"p50", "p99", "max"}


def test_availability_counts_only_claims_sent_once_the_fault_is_in_place() -> None:
    """A claim sent while the partition was still being applied says nothing about
    recovery: the first lease invoked after the fault's start action completed does."""

    def ev(i: int, t: float, p: Any, typ: str, f: str, value: Any) -> dict:
        return {"index": i, "time": t, "process": p, "type": typ, "f": f, "value": value}

    part = {"fault": "partition-leader", "phase": "start", "components": [["n1"], ["n2"]]}
    heal = dict(part, phase="end")
    claim = {"visibility": 5.0, "min_priority": 0}
    events = [
        ev(0, 0.0, 0, "invoke", "publish", {"group": "g", "msg": "a", "priority": 0}),
        ev(1, 0.1, 0, "ok", "publish", {"group": "g", "msg": "a", "priority": 0}),
        ev(2, 0.2, 0, "invoke", "publish", {"group": "h", "msg": "b", "priority": 0}),
        ev(3, 0.3, 0, "ok", "publish", {"group": "h", "msg": "b", "priority": 0}),
        ev(4, 1.0, "nemesis", "invoke", "partition", part),
        ev(5, 1.01, 1, "invoke", "claim", claim),  # sent before the rules bit
        ev(6, 1.02, 1, "ok", "claim", {"group": "g", "msg": "a", "seq": 1, "token": "t1"}),
        ev(7, 1.2, "nemesis", "info", "partition", part),  # now in place
        ev(8, 3.0, 2, "invoke", "claim", claim),
        ev(9, 3.4, 2, "ok", "claim", {"group": "h", "msg": "b", "seq": 2, "token": "t2"}),
        ev(10, 4.0, "nemesis", "invoke", "heal", heal),
        ev(11, 4.1, "nemesis", "info", "heal", heal),
    ]
    events[6]["value"]["visibility"] = events[9]["value"]["visibility"] = 5.0
    [fault] = check(events)["stats"]["availability"]
    assert fault["start"] == 1.0
    assert fault["recovery"] == pytest.approx(2.4)


def test_clock_tolerance_covers_the_queues() -> None:
    """Early delivery is judged with at least the clock disagreement rqueue allows: its
    node clock tolerance plus the rounding of two server timestamps."""
    assert CLOCK_TOLERANCE >= DEFAULT_CLOCK_TOLERANCE + SERVER_CLOCK_STEP


def test_histories_without_batches_or_delays_are_checked_as_before() -> None:
    """A history written before batches and delays existed: valid, nothing delayed."""
    result = check(read_history(HISTORIES / "valid-basic.jsonl"))
    assert result["valid"]
    assert result["anomalies"]["early-delivery"] == {"count": 0, "examples": []}
    assert result["stats"]["delayed"] == 0
    assert "claim-many" not in result["stats"]["ops"]


@pytest.mark.parametrize("skew", [0.0, 0.34])
def test_early_delivery_inside_the_tolerance_is_not_reported(skew: float) -> None:
    """A lease returned up to CLOCK_TOLERANCE before publish invoke + delay may be the
    nodes' clocks disagreeing; only beyond it is the delivery certainly early."""
    events = read_history(HISTORIES / "early-delivery.jsonl")
    ready = events[0]["time"] + events[0]["value"]["delay"]
    for i, ev in enumerate(events[2:], start=2):  # the claim and the ack, moved later
        ev["time"] = round(ready - skew + 0.01 * (i - 3), 6)
    assert check(events)["valid"]
    events[3]["time"] = events[2]["time"] = round(ready - 0.36, 6)
    assert check(events)["anomalies"]["early-delivery"]["count"] == 1
