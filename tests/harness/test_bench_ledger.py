"""The bench's ledger (harness.bench.ledger): figures by name, regressions against the
same machine's earlier runs, the file's lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.bench import ledger

HERE = {"host": "h", "cpu": "c", "cpus": 2}
SETTINGS = {"seconds": 5.0, "concurrency": [8]}


def _doc(claims: float, insert: float = 1000.0, publish: float = 300.0) -> dict:
    return {
        "settings": SETTINGS,
        "parts": ["store", "publish", "claims"],
        "cluster": {"engine": "embedded"},
        "store_insert": [{"concurrency": 8, "per_second": insert}],
        "rqueue_claim_shared": [
            {"concurrency": 8, "per_second": claims, "insert_per_second": insert}
        ],
        "publish": [
            {"concurrency": 8, "batch": 1, "messages_per_second": publish, "per_second": publish}
        ],
    }


def _run(claims: float, commit: str, **kw: float) -> dict:
    return ledger.entry(_doc(claims, **kw), commit, HERE)


def test_figures_are_named_rates_and_ratios() -> None:
    names = ledger.figures(_doc(500.0))
    assert names == {
        "store INSERT at 8, per second": 1000.0,
        "rqueue claim, shared transport at 8, per second": 500.0,
        "rqueue claim, shared transport at 8, ratio to INSERT/s": 0.5,
        "publish at 8, messages per second": 300.0,
    }


def test_a_fall_of_more_than_ten_percent_against_the_median_is_named() -> None:
    earlier = [_run(500.0, "a"), _run(520.0, "b"), _run(480.0, "c")]
    found = ledger.regressions(_run(440.0, "d"), earlier)
    assert {r["figure"] for r in found} == {
        "rqueue claim, shared transport at 8, per second",
        "rqueue claim, shared transport at 8, ratio to INSERT/s",
    }
    ratio = next(r for r in found if r["kind"] == "ratio")
    assert ratio["median_before"] == 0.5 and ratio["ratio"] == 0.88
    assert ratio["commits"] == ["a", "b", "c"]
    assert ledger.regressions(_run(460.0, "d"), earlier) == []  # 0.92 of the median


def test_only_the_latest_three_comparable_runs_count() -> None:
    old_fast = [_run(900.0, "old")] * 5
    recent = [_run(500.0, "x")] * 3
    assert ledger.regressions(_run(480.0, "d"), old_fast + recent) == []


def test_other_machines_and_settings_are_not_compared() -> None:
    elsewhere = ledger.entry(_doc(900.0), "e", {**HERE, "host": "other"})
    shorter = _run(900.0, "s")
    shorter["settings"] = {**SETTINGS, "seconds": 1.0}
    run = _run(400.0, "d")
    assert ledger.regressions(run, [elsewhere, shorter]) == []
    assert ledger.describe([], 0) == [
        "no earlier run on this machine with these settings to compare with"
    ]


def test_the_file_keeps_one_line_per_run_and_names_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "bench-ledger.jsonl"
    assert ledger.read(path) == []
    ledger.append(path, _run(500.0, "a"))
    ledger.append(path, _run(400.0, "b"))
    assert [r["commit"] for r in ledger.read(path)] == ["a", "b"]
    path.write_text(path.read_text() + "not json\n")
    with pytest.raises(ValueError, match=r"bench-ledger.jsonl:3: not a JSON line"):
        ledger.read(path)
    assert json.loads(path.read_text().splitlines()[0])["machine"] == HERE


def test_this_machine_is_named() -> None:
    here = ledger.machine()
    assert here["host"] and here["cpu"] and here["cpus"] >= 1


def test_the_lines_show_rates_whole_and_ratios_short() -> None:
    earlier = [_run(500.0, "a", publish=20000.0)]
    found = ledger.regressions(_run(400.0, "b", publish=12160.0), earlier)
    lines = ledger.describe(found, 1)
    publish = "publish at 8, messages per second: 12,160 vs a median of 20,000"
    assert any(publish in line for line in lines)
    assert any("ratio to INSERT/s: 0.4 vs a median of 0.5 (0.80x; ratio" in x for x in lines)
