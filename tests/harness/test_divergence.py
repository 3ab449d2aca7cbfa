"""The replica comparison as a pure function, and how check, report and plots show it.

Replica records are written by hand here; the runs that record real ones are in
``test_divergence_runs.py``.
"""

from __future__ import annotations

import copy
import html
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness import divergence
from harness.check_cli import main_check
from harness.checker import ANOMALIES, check
from harness.cluster.base import raft_index
from harness.divergence import SnapshotFormatError, compare, describe
from harness.history import read_history
from harness.html import write_html
from harness.plots.timeline import anomaly_timeline_figure
from harness.report import write_report

VALID_HISTORY = Path(__file__).parent / "histories" / "valid-basic.jsonl"
MESSAGES = ["seq", "group_id", "event", "locked_by", "lock_expiry"]


def node(node_id: str, tables: dict[str, Any], applied: int = 40) -> dict[str, Any]:
    return {"id": node_id, "url": f"http://{node_id}", "applied_index": applied, "tables": tables}


def messages(*rows: list) -> dict[str, Any]:
    return {"columns": MESSAGES, "key": ["seq"], "rows": [list(r) for r in rows]}


def record(*nodes: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "error": None, "nodes": list(nodes)}


ROW7 = [7, "g1", "{}", "w-1", 1796293532.3479817]
ROW9 = [9, "g2", "{}", None, 0.0]


def test_identical_replicas_show_no_divergence() -> None:
    tables = {"messages": messages(ROW7, ROW9), "groups": messages()}
    entry, stats = compare(record(node("n1", tables), node("n2", copy.deepcopy(tables))))
    assert entry == {"count": 0, "examples": []}
    assert stats == {
        "compared": True,
        "nodes": ["n1", "n2"],
        "applied_index": {"n1": 40, "n2": 40},
        "tables": {"groups": 0, "messages": 2},
        "differing_tables": [],
    }


def test_row_order_does_not_matter() -> None:
    a = node("n1", {"messages": messages(ROW7, ROW9)})
    b = node("n2", {"messages": messages(ROW9, ROW7)})
    assert compare(record(a, b))[0]["count"] == 0


def test_a_value_that_differs_is_one_example_naming_the_row() -> None:
    other = [*ROW7[:4], 1796293532.4570134]
    a, b = (
        node("n1", {"messages": messages(ROW7, ROW9)}),
        node("n2", {"messages": messages(other, ROW9)}),
    )
    entry, stats = compare(record(a, b, node("n3", {"messages": messages(ROW7, ROW9)})))
    assert entry["count"] == 1
    assert entry["examples"] == [
        {"table": "messages", "key": {"seq": 7}, "rows": {"n1": ROW7, "n2": other, "n3": ROW7}}
    ]
    assert stats["differing_tables"] == ["messages"]
    assert describe(entry["examples"][0]) == "messages [seq=7]: values differ"


def test_a_row_missing_on_one_node_is_an_example_with_null_there() -> None:
    a, b = node("n1", {"messages": messages(ROW7, ROW9)}), node("n2", {"messages": messages(ROW9)})
    entry, _ = compare(record(a, b))
    assert entry["examples"] == [
        {"table": "messages", "key": {"seq": 7}, "rows": {"n1": ROW7, "n2": None}}
    ]
    assert describe(entry["examples"][0]) == "messages [seq=7]: missing on n2"


def test_examples_come_in_key_order_and_the_count_is_not_capped() -> None:
    rows = [[seq, "g", "{}", None, 0.0] for seq in range(1, 26)]
    a, b = node("n1", {"messages": messages(*rows)}), node("n2", {"messages": messages()})
    entry, _ = compare(record(a, b))
    assert entry["count"] == 25
    keys = [ex["key"]["seq"] for ex in entry["examples"]]
    assert keys == list(range(1, divergence.MAX_EXAMPLES + 1))  # numeric, not text, order


def test_a_table_missing_on_a_node_or_shaped_differently_is_an_example() -> None:
    extra = {"columns": ["k", "v"], "key": ["k"], "rows": [["a", 1]]}
    other_shape = {"columns": ["k", "w"], "key": ["k"], "rows": [["a", 1]]}
    a = node("n1", {"messages": messages(), "rqueue_x": extra})
    b = node("n2", {"messages": messages()})
    entry, _ = compare(record(a, b))
    assert entry["examples"] == [
        {
            "table": "rqueue_x",
            "columns": {"n1": {"columns": ["k", "v"], "key": ["k"]}, "n2": None},
        }
    ]
    assert describe(entry["examples"][0]) == "rqueue_x: table missing on n2"
    entry, _ = compare(record(a, node("n2", {"messages": messages(), "rqueue_x": other_shape})))
    assert describe(entry["examples"][0]) == "rqueue_x: columns differ between nodes"


def test_a_table_without_a_key_compares_rows_with_their_copies() -> None:
    def log(*rows: list) -> dict[str, Any]:
        return {"columns": ["a"], "key": [], "rows": [list(r) for r in rows]}

    entry, _ = compare(
        record(node("n1", {"t": log([1], [1], [2])}), node("n2", {"t": log([2], [1])}))
    )
    assert entry["examples"] == [{"table": "t", "key": {}, "rows": {"n1": [1], "n2": None}}]
    assert describe(entry["examples"][0]) == "t [[1]]: missing on n2"


@pytest.mark.parametrize(
    ("rec", "reason"),
    [
        (None, "no replicas.json beside the history"),
        ({"version": 1, "error": "waited 60.0s for ...", "nodes": []}, "waited 60.0s for ..."),
        (record(node("n1", {})), "fewer than two nodes were read"),
    ],
)
def test_replicas_not_compared_say_why(rec: dict | None, reason: str) -> None:
    entry, stats = compare(rec)
    assert entry == {"count": 0, "examples": []}
    assert stats == {"compared": False, "reason": reason}
    assert divergence.summary(stats) == f"replicas: not compared ({reason})"


@pytest.mark.parametrize(
    ("rec", "message"),
    [
        ([], "must hold a JSON object"),
        ({"version": 2, "nodes": []}, "version 2, expected 1"),
        ({"version": 1, "nodes": {}}, "'nodes' must be a list"),
        (record({"url": "x", "tables": {}}), r"nodes\[0\] must be an object with a string 'id'"),
        (record(node("n1", {}), node("n1", {})), "node 'n1' appears twice"),
        (record(node("n1", {"m": {"columns": ["a"], "key": [], "rows": [[1, 2]]}})), "table 'm'"),
        (record(node("n1", {"m": {"columns": ["a"], "key": ["b"], "rows": []}})), "table 'm'"),
    ],
)
def test_a_malformed_record_is_refused_naming_the_problem(rec: Any, message: str) -> None:
    with pytest.raises(SnapshotFormatError, match=message):
        compare(rec)


def test_summary_line() -> None:
    same = {"messages": messages(ROW7)}
    _, stats = compare(record(node("n1", same), node("n2", copy.deepcopy(same))))
    assert (
        divergence.summary(stats)
        == "replicas: 2 nodes at applied index 40, identical (messages 1 row)"
    )
    _, stats = compare(record(node("n1", same), node("n2", {"messages": messages()})))
    assert "DIFFER in messages" in divergence.summary(stats)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(12, 12), ("12", 12), (" 7", 7), (None, None), (True, None), ("x", None)],
)
def test_raft_indexes_are_read_as_ints_or_decimal_strings(value: Any, expected: int | None) -> None:
    assert raft_index(value) == expected


# -- the check, the CLI, the report and the plots ------------------------------------------------
DIVERGED = record(node("n1", {"messages": messages(ROW7)}), node("n2", {"messages": messages()}))


def test_check_adds_the_divergence_to_the_history_anomalies() -> None:
    events = read_history(VALID_HISTORY)
    alone = check(events)
    assert list(alone["anomalies"]) == list(ANOMALIES) and ANOMALIES[-1] == divergence.NAME
    assert alone["valid"] is True and alone["stats"]["replicas"]["compared"] is False
    result = check(events, DIVERGED)
    assert result["valid"] is False
    assert result["anomalies"][divergence.NAME]["count"] == 1
    assert all(a["count"] == 0 for n, a in result["anomalies"].items() if n != divergence.NAME)


def test_check_command_compares_the_replicas_beside_the_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / "history.jsonl"
    shutil.copy(VALID_HISTORY, history)
    assert main_check(tmp_path) == 0
    assert "replicas: not compared (no replicas.json beside the history)" in capsys.readouterr().out
    (tmp_path / divergence.FILE).write_text(json.dumps(DIVERGED))
    assert main_check(tmp_path) == 1
    out = capsys.readouterr().out
    assert "replica-divergence" in out and "messages [seq=7]: missing on n2" in out
    result = json.loads((tmp_path / "check.json").read_text())
    assert result["anomalies"][divergence.NAME]["examples"][0]["rows"] == {"n1": ROW7, "n2": None}
    (tmp_path / divergence.FILE).write_text("{nope")
    assert main_check(tmp_path) == 2
    assert "replicas.json: not JSON" in capsys.readouterr().err


def test_report_shows_each_nodes_row_and_the_plots_skip_row_examples(tmp_path: Path) -> None:
    shutil.copy(VALID_HISTORY, tmp_path / "history.jsonl")
    (tmp_path / divergence.FILE).write_text(json.dumps(DIVERGED))
    text = write_report(tmp_path).read_text()  # no check.json: the report checks both files
    assert "**Verdict: ANOMALIES** — replica-divergence (1)." in text
    assert "Example 1: messages [seq=7]: missing on n2" in text
    assert f"n1: {json.dumps(ROW7)}" in text and "n2: null" in text
    assert "replicas | 2 nodes at applied index 40, DIFFER in messages" in text
    result = check(read_history(tmp_path / "history.jsonl"), DIVERGED)
    assert anomaly_timeline_figure(read_history(tmp_path / "history.jsonl"), result) is None
    page = write_html(tmp_path).read_text()  # the page shows each node's row too
    assert "<p>Example 1: messages [seq=7]: missing on n2</p>" in page
    assert html.escape(f"n1: {json.dumps(ROW7)}") in page and "n2: null" in page
