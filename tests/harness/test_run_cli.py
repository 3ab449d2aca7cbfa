"""``python -m harness``: commands, exit statuses, one-line errors, teardown on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.runner import RunOptions, run

REPO = Path(__file__).resolve().parents[2]


def test_list_prints_every_scenario_with_its_description(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("leader-failover", "partition-majority", "clock-skew", "mixed"):
        assert name in out
    line = next(x for x in out.splitlines() if x.startswith("partition-leader"))
    assert "3 nodes" in line and "[root/docker]" in line and "Cut the leader off" in line


def test_help_teaches_the_commands():
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 0
    for word in ("run", "list", "check", "plot", "cluster", "bench", "exit status"):
        assert word in proc.stdout


def test_a_closed_stdout_ends_the_command_quietly():
    """`python -m harness list | head -2`: the reader goes away; no traceback, 141 (as
    a Unix tool killed by SIGPIPE shows in a shell). The reader here closes before the
    first byte, so every write meets the closed pipe, whatever the output's size."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert err.decode() == ""
    assert proc.returncode == 141


def test_unknown_scenario_exits_2_with_one_line(capsys, tmp_path):
    assert main(["run", "no-such-scenario", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [err[0]] and err[0].startswith("harness: error: no scenario 'no-such-scenario'")


def test_bad_time_is_an_argument_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "steady", "--time", "-3"])
    assert info.value.code == 2
    assert "expected a number of seconds > 0" in capsys.readouterr().err


def test_partitions_without_root_exit_2_naming_root_or_docker(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    result = run(RunOptions("partition-leader", out=tmp_path / "r", progress=False))
    assert result.exit_code == 2
    assert "needs root" in result.reason and "--backend docker" in result.reason
    assert not (tmp_path / "r").exists()  # refused before anything was started


def test_a_non_empty_out_folder_is_refused(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "x").write_text("")
    result = run(RunOptions("steady", out=tmp_path / "r", progress=False))
    assert result.exit_code == 2 and "is not empty" in result.reason


def test_unreachable_docker_exits_2_with_the_reason(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    code = main(["run", "steady", "--backend", "docker", "--out", str(tmp_path / "r")])
    assert code == 2
    err = capsys.readouterr().err
    assert "harness: error: cluster did not start:" in err and "Docker" in err


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def _lines(path: Path) -> int:
    try:
        return len(path.read_text().splitlines())
    except FileNotFoundError:
        return 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.slow
def test_a_signalled_run_tears_everything_down(tmp_path, sig):
    if os.environ.get("RQLITE_URLS"):
        pytest.skip("runs start their own cluster")
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "harness", "run", "leader-failover", "--time", "60"),
            *("--out", str(out), "--no-progress", "--seed", "1"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: _lines(out / "history.jsonl") > 50, 60, "the workload to start")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, err
    assert "harness: error: interrupted" in err
    state = json.loads((out / "cluster" / "cluster.json").read_text())
    for node in state["nodes"]:
        assert node["state"] == "stopped"
        with pytest.raises(ProcessLookupError):
            os.kill(node["pid"], 0)
    run_info = json.loads((out / "run.json").read_text())
    assert run_info["exit"] == 2
    assert run_info["reason"] == ("interrupted (Ctrl-C)" if sig == signal.SIGINT else
                                  f"interrupted (signal {int(sig)})")  # fmt: skip
    report = (out / "report.md").read_text()
    assert "**No verdict: the run failed:** interrupted" in report
    assert "Verdict: valid" not in report
    assert run_info["summary"]["ops"]["publish"]["ok"] > 0
    assert _lines(out / "history.jsonl") > 50  # what was recorded stays checkable


def _tiny_history(path: Path) -> None:
    from harness.history import HistoryRecorder

    with HistoryRecorder(path) as rec:
        op = rec.invoke(0, "publish", {"group": "g", "msg": "m1", "priority": 0})
        rec.complete(op, "ok", {"group": "g", "msg": "m1", "priority": 0, "seq": 1})
        op = rec.invoke(1, "claim", {"visibility": 3.0, "min_priority": 0})
        lease = {"group": "g", "msg": "m1", "seq": 1, "token": "t1"}
        rec.complete(op, "ok", {**lease, "visibility": 3.0})
        op = rec.invoke(1, "ack", lease)
        rec.complete(op, "ok", lease)


def test_check_and_plot_commands_work_on_a_hand_written_history(tmp_path, capsys):
    _tiny_history(tmp_path / "history.jsonl")
    assert main(["check", str(tmp_path / "history.jsonl")]) == 0
    assert json.loads((tmp_path / "check.json").read_text())["valid"] is True
    assert main(["plot", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for name in ("throughput.png", "latency.png", "report.md"):
        assert (tmp_path / name).is_file() and name in printed


def test_plot_without_a_history_exits_2(tmp_path, capsys):
    assert main(["plot", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "history.jsonl") in err and "cannot read" in err


def test_progress_line_and_summary_table():
    import collections
    import io

    from rich.console import Console

    from harness.progress import Progress, summary_table

    counts = collections.Counter({("claim", "ok"): 5, ("ack", "ok"): 4, ("ack", "fail"): 2})
    p = Progress("leader-failover (rqueue)", 30, lambda: counts, lambda: "kill-leader ['n1']")
    p.set_phase("workload")
    line = p.line().plain
    assert "[workload]" in line and "/30s" in line
    assert "ok 9" in line and "fail 2" in line and "info 0" in line
    assert "fault: kill-leader ['n1']" in line
    summary = {
        "scenario": "leader-failover",
        "verdict": "ANOMALIES",
        "ops": {"ack": {"ok": 4, "fail": 2}},
        "faults": {"kill-leader": 2},
        "anomalies": {"lost": 1, "fifo-violation": 0},
        "nemesis_errors": ["kill-leader: no leader to target within 5s"],
        "run_dir": "results/x",
    }
    out = io.StringIO()
    Console(file=out, width=120).print(summary_table(summary))
    text = out.getvalue()
    for part in ("ANOMALIES", "ok 4  fail 2", "kill-leader×2", "lost 1", "no leader", "results/x"):
        assert part in text
    assert "fifo-violation" not in text


INCONCLUSIVE = """\
description = "The leader is killed while every node is down: that fault cannot happen."
nodes = 3
duration = 12.0

[[faults]]
kind = "kill-all"
start = 2.0
duration = 7.0

[[faults]]
kind = "kill-leader"
start = 3.0
duration = 2.0
"""


@pytest.mark.slow
def test_a_run_whose_fault_could_not_happen_exits_3_and_says_why(tmp_path):
    scenario = tmp_path / "doomed.toml"
    scenario.write_text(INCONCLUSIVE)
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(scenario), "--out", str(out),
         "--no-progress", "--no-plots", "--seed", "5"],
        capture_output=True, text=True, cwd=REPO, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "1 of 2 planned faults did not happen (kill-leader: no leader" in proc.stderr
    assert "INCONCLUSIVE" in proc.stdout
    check = json.loads((out / "check.json").read_text())
    assert check["valid"] is True and check["coverage"]["conclusive"] is False
    run_json = json.loads((out / "run.json").read_text())
    assert run_json["exit"] == 3 and run_json["summary"]["verdict"] == "INCONCLUSIVE"
    # issue 21: checking the history again keeps the run's coverage, and the report that
    # `plot` writes then says INCONCLUSIVE everywhere, as the run did
    assert main(["check", str(out / "history.jsonl")]) == 3
    again = json.loads((out / "check.json").read_text())
    assert again["coverage"] == check["coverage"]
    assert main(["plot", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "**Verdict: INCONCLUSIVE**" in report and "1 of 2 planned faults" in report
    assert "Verdict: valid" not in report and "| verdict | INCONCLUSIVE |" in report


TWO_KILLS = """\
description = "Two short leader kills; at --time 10 the second has no room left."
nodes = 3
duration = 20.0

[[faults]]
kind = "kill-leader"
start = 2.0
duration = 2.0

[[faults]]
kind = "kill-leader"
start = 12.0
duration = 2.0
"""


@pytest.mark.slow
def test_a_shortened_run_says_up_front_which_fault_it_dropped(tmp_path):
    scenario = tmp_path / "two-kills.toml"
    scenario.write_text(TWO_KILLS)
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(scenario), "--out", str(out),
         "--time", "10", "--seed", "3"],
        capture_output=True, text=True, cwd=REPO, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    why = (
        "kill-leader at 12-14 s of the scenario: the earliest it could start is 8 s (after the "
        "kill-leader kept at 1-3 s and its recovery), so it would end at 10 s, 0.0 s before "
        "the run's end, where it needs 5 s to recover and be judged"
    )
    first, second = proc.stderr.splitlines()[:2]  # before the cluster starts
    assert first == "--time 10: 1 of 2 fault windows dropped (no room left in 10 s), 1 kept"
    assert second == f"--time 10: dropped {why}", proc.stderr
    resolved = json.loads((out / "scenario.json").read_text())
    assert [(f["start"], f["duration"]) for f in resolved["faults"]] == [(1.0, 2.0)]
    assert resolved["dropped"] == [why]
    assert json.loads((out / "run.json").read_text())["summary"]["dropped"] == [why]
    assert "fault dropped" in proc.stdout
    assert f"- {why}" in (out / "report.md").read_text()


@pytest.mark.slow
def test_a_fault_left_out_with_skip_fault_is_named_up_front_and_in_the_summary(tmp_path):
    scenario = tmp_path / "two-kills.toml"
    scenario.write_text(TWO_KILLS)
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(scenario), "--out", str(out),
         "--time", "10", "--seed", "3", "--skip-fault", "kill-leader", "--no-plots"],
        capture_output=True, text=True, cwd=REPO, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    left_out = ["kill-leader at 2-4 s (--skip-fault)", "kill-leader at 12-14 s (--skip-fault)"]
    assert proc.stderr.splitlines()[:2] == [f"left out: {w}" for w in left_out], proc.stderr
    resolved = json.loads((out / "scenario.json").read_text())
    assert resolved["faults"] == [] and resolved["skipped"] == left_out
    assert json.loads((out / "run.json").read_text())["summary"]["skipped_faults"] == left_out
    assert "fault left out" in proc.stdout
