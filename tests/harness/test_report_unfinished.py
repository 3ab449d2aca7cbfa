"""The report of a run that did not finish (interrupted, or the harness failed) shows no
anomaly that needs the heal and the drain: it says it could not judge it, and why."""

from __future__ import annotations

import json
from pathlib import Path

from harness.html import write_html
from harness.report import write_report
from harness.scenario import load_scenario
from tests.harness.report_pages import HISTORIES, write_run

INTERRUPTED = {
    "exit": 2,
    "reason": "interrupted (Ctrl-C)",
    "summary": {"verdict": "no verdict", "anomalies": {}, "exit": 2},
}


def _run(folder: Path, run: dict) -> Path:
    """A run folder as the runner leaves it: history, run.json, scenario.json."""
    write_run(folder, _lost_history(), run=run)
    (folder / "scenario.json").write_text(json.dumps(load_scenario("steady").to_json()))
    return folder


def _lost_history() -> list[dict]:
    """A publish acknowledged and never claimed: lost, had the run drained the queue."""
    return [json.loads(x) for x in (HISTORIES / "lost.jsonl").read_text().splitlines()]


def test_an_interrupted_run_does_not_report_a_message_lost(tmp_path: Path) -> None:
    folder = _run(tmp_path / "run", INTERRUPTED)
    text = write_report(folder).read_text()
    assert "No verdict: the run failed:" in text and "interrupted (Ctrl-C)" in text
    assert "| lost | not judged |" in text
    assert "Not judged: lost: the run did not finish (interrupted (Ctrl-C))" in text
    assert "### lost" not in text and "healed every fault" not in text
    page = write_html(folder).read_text()
    assert '<td class="num">not judged</td>' in page
    assert 'id="anomaly-lost"' not in page and "healed every fault" not in page


def test_a_finished_run_still_reports_the_message_lost(tmp_path: Path) -> None:
    run = {"exit": 1, "summary": {"verdict": "ANOMALIES", "exit": 1}}
    folder = _run(tmp_path / "run", run)
    text = write_report(folder).read_text()
    assert "### lost: 1" in text and "| lost | 1 |" in text and "not judged" not in text
