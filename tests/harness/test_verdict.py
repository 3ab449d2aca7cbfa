"""One verdict per run: check, the runner and report.md decide it alike (issue 21)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.check_cli import main_check
from harness.report import write_report
from harness.scenario import load_scenario
from harness.verdict import decide

HISTORIES = Path(__file__).parent / "histories"
CLEAN = {"valid": True, "anomalies": {"lost": {"count": 0}}}


@pytest.mark.parametrize(
    ("check", "failed", "label", "code"),
    [
        (CLEAN, None, "valid", 0),
        ({**CLEAN, "coverage": {"reasons": ["no operation succeeded for 17.5 s"]}}, None,
         "INCONCLUSIVE", 3),
        ({"valid": False, "anomalies": {"lost": {"count": 2}}}, None, "ANOMALIES", 1),
        ({"valid": False, "anomalies": {"lost": {"count": 2}}}, "interrupted", "no verdict", 2),
        (CLEAN, "interrupted", "no verdict", 2),
        # what already happened proves a duplicate lease, whatever came after
        ({"valid": False, "anomalies": {"lost": {"count": 2},
                                        "duplicate-group-lease": {"count": 1}}},
         "interrupted", "ANOMALIES", 1),
        (None, "Client lacks extend", "no verdict", 2),
        (None, None, "no verdict", 2),
    ],
)  # fmt: skip
def test_the_verdict_table(check, failed, label, code) -> None:
    v = decide(check, failed)
    assert (v.label, v.exit_code) == (label, code)
    if label == "ANOMALIES" and failed:
        assert v.line() == (
            f"ANOMALIES: duplicate-group-lease (1), in the history of a run that failed: {failed}"
        )
    elif failed and check and not check["valid"]:  # an interrupted run's history stops mid-way
        assert v.line() == (
            f"no verdict: the run failed: {failed}; in the history it recorded the checker "
            "found lost (2)"
        )
    elif failed:
        assert v.line() == f"no verdict: the run failed: {failed}"


def _run_folder(root: Path, run: dict | None) -> Path:
    """A run folder of a 30 s fault-free run whose operations all completed in its first
    second: the cluster was then unavailable for the rest (no operation for > 15 s)."""
    root.mkdir()
    shutil.copy(HISTORIES / "valid-basic.jsonl", root / "history.jsonl")
    scenario = load_scenario("steady").scaled(30)
    (root / "scenario.json").write_text(json.dumps(scenario.to_json()))
    if run is not None:
        (root / "run.json").write_text(json.dumps(run))
    return root


def test_check_recomputes_a_runs_coverage_and_the_report_follows(tmp_path: Path) -> None:
    summary = {"verdict": "INCONCLUSIVE", "exit": 3}
    root = _run_folder(tmp_path / "run", {"exit": 3, "summary": summary})
    assert main_check(root / "history.jsonl") == 3
    coverage = json.loads((root / "check.json").read_text())["coverage"]
    assert coverage["conclusive"] is False
    assert any(r.startswith("no operation succeeded for ") for r in coverage["reasons"])
    text = write_report(root).read_text()
    assert "**Verdict: INCONCLUSIVE**" in text and "| verdict | INCONCLUSIVE |" in text
    # a check.json without coverage (as `check` wrote it before): the report recomputes it
    check = json.loads((root / "check.json").read_text())
    del check["coverage"]
    (root / "check.json").write_text(json.dumps(check))
    text = write_report(root).read_text()
    assert "**Verdict: INCONCLUSIVE**" in text and "Verdict: valid" not in text


def test_a_run_that_failed_or_never_finished_has_no_verdict(tmp_path: Path) -> None:
    failed = {"exit": 2, "reason": "cluster did not start: boom", "summary": {"exit": 2}}
    root = _run_folder(tmp_path / "failed", failed)
    text = write_report(root).read_text()
    assert "**No verdict: the run failed:** cluster did not start: boom" in text
    assert "Verdict: valid" not in text
    assert main_check(root / "history.jsonl") == 2
    killed = _run_folder(tmp_path / "killed", None)  # run.json is written at the end
    text = write_report(killed).read_text()
    assert "**No verdict: the run failed:** it never finished" in text


def test_a_history_alone_is_judged_by_its_anomalies(tmp_path: Path) -> None:
    shutil.copy(HISTORIES / "valid-basic.jsonl", tmp_path / "history.jsonl")
    assert main_check(tmp_path / "history.jsonl") == 0
    assert "coverage" not in json.loads((tmp_path / "check.json").read_text())
    assert "**Verdict: valid** — no anomaly found." in write_report(tmp_path).read_text()


def test_a_run_whose_plan_cannot_be_read_is_not_valid(tmp_path: Path) -> None:
    root = _run_folder(tmp_path / "run", {"exit": 0, "summary": {"verdict": "valid"}})
    (root / "scenario.json").write_text("{")
    assert main_check(root / "history.jsonl") == 3
    reasons = json.loads((root / "check.json").read_text())["coverage"]["reasons"]
    assert reasons[0].startswith("the run's plan is unknown: ")
