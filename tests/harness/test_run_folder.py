"""The run folder's one owner (issue 33): its names and reading its files; and judging the run
it holds (harness.judgement, issue 42)."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

import harness
from harness import store
from harness.check_cli import main_check
from harness.history import HistoryFormatError, read_history
from harness.judgement import NEVER_FINISHED, Plan, failure_of, judge, judge_run, plan_of
from harness.plots.run import plot_run
from harness.report import write_report
from harness.scenario import load_scenario
from harness.store import (
    CHECK,
    HISTORY,
    REPLICAS,
    RUN,
    SCENARIO,
    RunStore,
)

HISTORIES = Path(__file__).parent / "histories"
PACKAGE = Path(harness.__file__).parent
#: the names only the store spells (replicas.json: its format's module names it too)
NAMES = {
    store.HISTORY, store.CHECK, store.SCENARIO, store.VERSIONS, store.RUN, store.REPORT,
    store.REPORT_HTML,
    store.THROUGHPUT, store.LATENCY, store.ANOMALY_TIMELINE, store.REPLICAS,
}  # fmt: skip


def _folder(root: Path, history: str = "valid-basic.jsonl", run: dict | None = None) -> Path:
    """A run folder: a history, the steady scenario at 30 s, and ``run`` as run.json."""
    root.mkdir()
    shutil.copy(HISTORIES / history, root / HISTORY)
    (root / SCENARIO).write_text(json.dumps(load_scenario("steady").scaled(30).to_json()))
    if run is not None:
        (root / RUN).write_text(json.dumps(run))
    return root


#: where another module may spell one: a scenario read from JSON without a path names
#: the file it usually comes from
SPELLED_ELSEWHERE = [("scenario.py", "scenario.json")]


def test_no_module_but_the_store_spells_a_run_folder_file_name() -> None:
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "store.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in NAMES:
                spelled.append((str(path.relative_to(PACKAGE)), node.value))
    assert spelled == SPELLED_ELSEWHERE


def test_a_history_alone_is_checked_without_coverage() -> None:
    events = read_history(HISTORIES / "valid-basic.jsonl")
    judged = judge(events)
    assert judged.result is not None and "coverage" not in judged.result
    assert judged.result["stats"]["replicas"]["compared"] is False
    assert judged.verdict.label == "valid"
    lost = judge(read_history(HISTORIES / "lost.jsonl"))
    assert lost.verdict.label == "ANOMALIES" and lost.result["anomalies"]["lost"]["count"]


def test_a_plan_adds_the_coverage_and_a_failure_takes_the_verdict() -> None:
    events = read_history(HISTORIES / "valid-basic.jsonl")
    plan = Plan(load_scenario("steady").scaled(30))
    judged = judge(events, plan=plan)
    assert list(judged.result) == ["valid", "anomalies", "stats", "coverage"]
    # the replicas were not compared: a run cannot be valid without them
    assert judged.verdict.label == "INCONCLUSIVE"
    assert judged.result["coverage"]["conclusive"] is False
    failed = judge(events, plan=plan, failed="interrupted (Ctrl-C)")
    assert failed.verdict.line() == "no verdict: the run failed: interrupted (Ctrl-C)"


def test_an_unknown_plan_is_inconclusive() -> None:
    events = read_history(HISTORIES / "valid-basic.jsonl")
    judged = judge(events, plan=Plan(None, unknown="scenario.json: cannot read: boom"))
    assert judged.result["coverage"] == {
        "conclusive": False,
        "reasons": ["the run's plan is unknown: scenario.json: cannot read: boom"],
    }


def test_a_stored_result_is_kept_and_no_history_means_not_checked() -> None:
    stored = {"valid": False, "anomalies": {"lost": {"count": 1}}, "coverage": {}}
    assert judge([], result=stored).result is stored
    assert judge(None, result=stored).verdict.label == "ANOMALIES"
    nothing = judge(None)
    assert nothing.result is None and nothing.verdict.line() == "no verdict: it was not checked"


def test_holding_names_the_history_and_its_folder(tmp_path: Path) -> None:
    folder = RunStore.holding(tmp_path)
    assert (folder.root, folder.history) == (tmp_path, tmp_path / HISTORY)
    other = RunStore.holding(tmp_path / "copy.jsonl")
    assert (other.root, other.history) == (tmp_path, tmp_path / "copy.jsonl")
    assert other.path(REPLICAS) == tmp_path / "replicas.json"


def test_json_is_read_one_way(tmp_path: Path) -> None:
    folder = RunStore(tmp_path)
    assert folder.json_or_none(RUN) is None and folder.summary() == {}
    with pytest.raises(FileNotFoundError):
        folder.read_json(RUN)
    (tmp_path / RUN).write_text("{nope")
    assert folder.json_or_none(RUN) is None and folder.summary() == {}
    with pytest.raises(ValueError):
        folder.read_json(RUN)
    (tmp_path / RUN).write_text("[1]")
    assert folder.summary() == {}
    folder.write_json(RUN, {"summary": {"b": 1, "a": 2}, "exit": 0})
    assert folder.summary() == {"a": 2, "b": 1}
    assert list(folder.read_json(RUN)) == ["exit", "summary"]  # sorted, as runs write it
    folder.write_json(CHECK, {"valid": True, "anomalies": {}}, sort_keys=False)
    assert list(folder.read_json(CHECK)) == ["valid", "anomalies"]
    assert not list(tmp_path.glob("*.tmp"))


def test_only_a_check_result_is_a_stored_check(tmp_path: Path) -> None:
    folder = RunStore(tmp_path)
    for text in ("{nope", "[]", '{"valid": true}'):
        (tmp_path / CHECK).write_text(text)
        assert folder.stored_check() is None
    (tmp_path / CHECK).write_text('{"valid": true, "anomalies": {}}')
    assert folder.stored_check() == {"valid": True, "anomalies": {}}


def test_a_folder_without_run_json_never_finished(tmp_path: Path) -> None:
    folder = RunStore(_folder(tmp_path / "run"))
    judged = judge_run(folder)
    assert judged.verdict.reasons == (NEVER_FINISHED,)
    assert failure_of(RunStore(tmp_path)) is None  # no scenario.json: no run, a history
    # the record in memory is taken over run.json (the runner's, before it is written)
    assert judge_run(folder, {"exit": 0}).verdict.label == "INCONCLUSIVE"


def test_the_plan_reads_the_scenario_and_the_nemesis_errors(tmp_path: Path) -> None:
    folder = RunStore(_folder(tmp_path / "run", run={"nemesis_errors": ["kill: no leader"]}))
    plan = plan_of(folder)
    assert plan is not None and plan.scenario == load_scenario("steady").scaled(30)
    assert plan.errors == ("kill: no leader",)
    assert plan_of(folder, {"nemesis_errors": []}).errors == ()
    (folder.path(SCENARIO)).write_text("{")
    unknown = plan_of(folder)
    assert unknown is not None and unknown.scenario is None
    assert unknown.unknown.startswith(f"{folder.path(SCENARIO)}: cannot read: ")


def test_a_stored_check_with_coverage_is_judged_without_the_history(tmp_path: Path) -> None:
    folder = RunStore(_folder(tmp_path / "run", run={"exit": 0}))
    folder.history.write_text("not a history\n")
    stored = {"valid": True, "anomalies": {}, "coverage": {"reasons": []}}
    assert judge_run(folder, result=stored).verdict.label == "valid"
    with pytest.raises(HistoryFormatError):
        judge_run(folder, result={"valid": True, "anomalies": {}})  # its coverage is missing


def test_the_report_and_the_plots_take_the_runs_record_in_memory(tmp_path, monkeypatch):
    root = _folder(tmp_path / "run", run={"exit": 2, "reason": "on disk, not what ran"})
    record = {"exit": 0, "reason": None, "phases": {"workload": 1, "heal": 0, "drain": 1}}

    def unread(self: RunStore) -> None:
        raise AssertionError("run.json read back")

    monkeypatch.setattr(RunStore, "run_info", unread)
    text = write_report(root, {"verdict": "valid"}, record).read_text()
    assert "on disk" not in text and "**Verdict: INCONCLUSIVE**" in text
    assert [p.name for p in plot_run(root, record)] == ["throughput.png", "latency.png"]


def test_check_writes_its_result_in_the_checkers_order(tmp_path: Path) -> None:
    root = _folder(tmp_path / "run", run={"exit": 3})
    assert main_check(root) == 3  # a folder names its history.jsonl
    assert list(json.loads((root / CHECK).read_text())) == [
        "valid", "anomalies", "stats", "coverage",
    ]  # fmt: skip


def test_the_store_imports_nothing_of_the_harness() -> None:
    """It knows paths and formats; judging a run is harness.judgement's (issue 42)."""
    tree = ast.parse((PACKAGE / "store.py").read_text(encoding="utf-8"))
    imported = [
        node.module or "." * node.level
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.level or (node.module or "").startswith("harness"))
    ]
    imported += [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith(("harness", "rqueue"))
    ]
    assert imported == []


def test_results_latest_links_the_newest_run_made_there(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    latest = tmp_path / "results" / store.LATEST
    first = RunStore.create("steady")
    assert latest.is_symlink() and latest.resolve() == first.root.resolve()
    second = RunStore.create("steady")
    assert latest.readlink() == Path(second.root.name)  # relative: the folder can move
    RunStore.create("steady", out=tmp_path / "elsewhere")  # --out leaves it
    assert latest.resolve() == second.root.resolve()
    second.remove(folder=True)  # a refused run: its folder and the link to it go
    assert not latest.is_symlink() and first.root.is_dir()
    assert not list((tmp_path / "results").glob(".latest*"))
    elsewhere = tmp_path / "mine"
    elsewhere.mkdir()
    (elsewhere / store.LATEST).symlink_to("gone")  # someone's own link beside an --out
    RunStore.create("steady", out=elsewhere / "run").remove(folder=True)
    assert (elsewhere / store.LATEST).is_symlink()


def test_results_latest_leaves_a_folder_of_that_name_alone(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / store.LATEST).mkdir(parents=True)
    RunStore.create("steady")
    assert not (tmp_path / "results" / store.LATEST).is_symlink()
