"""Calls the queue refuses on purpose (docs/history-format.md, *Refusals*): recorded as a
``fail`` marked ``refused``, counted with their lines, shown in the summary and report.

rqueue's ``ZoneRefused`` (every node rewrites 'now' off UTC) is the one such error; it is
recognised by its class name, so these tests define one of their own, as rqueue does:
an ``Unavailable``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.history import HistoryRecorder, read_history
from harness.report import write_report
from harness.runner import refused_lines
from harness.workload.record import Ops, is_refusal
from rqueue import OutcomeUnknown, Unavailable

HISTORIES = Path(__file__).parent / "histories"
LINE = (
    "rqueue: every node rewrites 'now' off UTC (their local time zones are not UTC), so none "
    "takes a timed call: http://127.0.0.1:4001 +3600 s (+01:00); start rqlited with TZ=UTC"
)


class ZoneRefused(Unavailable):
    """As rqueue names it: a refusal on purpose."""


class Stricter(ZoneRefused):
    """A subclass is a refusal too."""


def test_a_refusal_is_a_fail_marked_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    recorder = HistoryRecorder(path)
    ops = Ops(recorder)
    errors = [ZoneRefused(LINE), Stricter(LINE), Unavailable("no leader"), OutcomeUnknown("?")]
    kinds = []
    for p, exc in enumerate(errors):
        op = ops.start(p, "claim", {"visibility": 1.0, "min_priority": 0})
        kinds.append(ops.failed(op, "claim", op.value, exc))
    recorder.close()
    events = read_history(path)
    completions = [e for e in events if e["type"] != "invoke"]
    assert kinds == ["fail", "fail", "fail", "info"]
    assert [e.get("refused") for e in completions] == [True, True, None, None]
    assert completions[0]["error"] == f"ZoneRefused: {LINE}"
    assert ops.refusals == {f"ZoneRefused: {LINE}": 1, f"Stricter: {LINE}": 1}
    assert is_refusal(Stricter()) and not is_refusal(Unavailable())


def test_only_a_fail_can_be_refused(tmp_path: Path) -> None:
    recorder = HistoryRecorder(tmp_path / "history.jsonl")
    op = recorder.invoke(0, "claim", {"visibility": 1.0, "min_priority": 0})
    with pytest.raises(ValueError, match="only a fail can be refused"):
        recorder.complete(op, "info", None, error="x", refused=True)
    recorder.close()


def test_the_summary_shows_the_lines_with_their_counts() -> None:
    lines = refused_lines({"a": 5, "b": 40, "c": 1, "d": 2, "e": 3})
    assert lines == [
        "40 calls: b",
        "5 calls: a",
        "3 calls: e",
        "3 calls with 2 other lines (check.json)",
    ]


def test_the_report_shows_each_refusal_line(tmp_path: Path) -> None:
    shutil.copy(HISTORIES / "refused.jsonl", tmp_path / "history.jsonl")
    summary = {"scenario": "x", "refused": ["2 calls: ZoneRefused: ..."]}
    report = write_report(tmp_path, summary).read_text()
    section = report.split("## Refusals", 1)[1].split("##", 1)[0]
    assert "refused 2 calls on purpose" in section
    assert "| 2 | 1.10 | 1.30 | ZoneRefused: rqueue: every node rewrites 'now' off UTC" in section
    assert "Unavailable: no leader" not in section  # a failure, not a refusal
    assert "| refused | " in report  # the summary table's row
