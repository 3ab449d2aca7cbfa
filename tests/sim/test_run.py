"""``python -m harness sim``: the run folder, the checker's verdict, mutants caught."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.sim.run import SimOptions, simulate
from harness.subjects import SubjectError


def test_cli_writes_a_run_folder_judged_by_the_checker(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "harness", "sim", "steady", "--seed", "3", "--time", "3"]
    done = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "verdict: exit 0" in done.stdout
    for name in ("history.jsonl", "check.json", "report.md", "run.json", "scenario.json"):
        assert (out / name).is_file(), name
    check = json.loads((out / "check.json").read_text())
    assert check["valid"] is True
    assert json.loads((out / "replicas.json").read_text())["error"] is None


@pytest.mark.parametrize(
    ("subject", "scenario", "time", "anomaly"),
    [
        ("mutant-no-exclusivity", "steady", 8.0, "duplicate-group-lease"),
        ("mutant-subquery-now", "steady", 8.0, "replica-divergence"),
        ("seed-reference", "lease-expiry", 26.0, "stale-ack-accepted"),
    ],
)
def test_a_mutant_is_caught(
    tmp_path: Path, subject: str, scenario: str, time: float, anomaly: str
) -> None:
    opts = SimOptions(scenario, 1, subject, time=time, out=tmp_path / "m", report=False)
    result = simulate(opts)
    assert result.exit_code == 1
    assert result.anomalies[anomaly] > 0


def test_a_subject_with_its_own_io_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SubjectError, match="not simulated"):
        simulate(SimOptions("steady", 1, "kombu", time=3.0, out=tmp_path / "k", report=False))


def test_seeds_print_a_table_failing_seeds_first_with_their_replay(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "harness", "sim", "steady", "--seeds", "1-2", "--time", "3"]
    cmd += ["--subject", "mutant-lifo", "--jobs", "1", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert "python -m harness sim steady --seed 1 --subject mutant-lifo --time 3" in lines[1]
    assert "fifo-violation" in lines[1]
    rows = json.loads((out / "sweep.json").read_text())["rows"]
    assert [r["seed"] for r in rows] == [1, 2]
    assert (out / "seed-1" / "history.jsonl").is_file()  # a failing seed's folder is kept


def test_fault_points_inside_the_core_leave_rqueue_valid(tmp_path: Path) -> None:
    opts = SimOptions("steady", 2, time=6.0, out=tmp_path / "f", report=False, core_faults=0.05)
    result = simulate(opts)
    assert result.exit_code == 0, result.anomalies
    history = (tmp_path / "f" / "history.jsonl").read_text()
    assert "died between two steps" in history  # recorded as an unknown outcome (info)


def test_a_lease_whose_extend_is_unknown_is_left_to_lapse(tmp_path: Path) -> None:
    """Found by the simulation (lost-replies, seed 8, --core-faults 0.05): a claimer whose
    extend ended ``info`` acked its lease on its next process, which the history does not
    link to the lease, so the group's next lease read as a duplicate. It lets it lapse."""
    opts = SimOptions("lost-replies", 8, out=tmp_path / "r", report=False, core_faults=0.05)
    result = simulate(opts)
    assert result.exit_code == 0, result.anomalies
    events = [json.loads(line) for line in (tmp_path / "r" / "history.jsonl").open()]
    holders = {}
    for e in events:
        v = e.get("value") or {}
        if e["f"] in ("claim",) and e["type"] == "ok" and v:
            holders[v["token"]] = e["process"]
    for e in events:  # every ack comes from the process that holds the lease
        v = e.get("value") or {}
        if e["f"] == "ack" and e["type"] == "invoke" and v.get("token") in holders:
            fused = any(  # ack_and_claim: the claim half's process takes the lease over
                x["f"] == "claim" and x["type"] == "invoke" and x["index"] == e["index"] - 1
                for x in events[max(0, e["index"] - 1) : e["index"]]
            )
            assert fused or holders[v["token"]] == e["process"], e


def test_a_task_that_dies_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in a simulated worker is the harness's failure (exit 2), not a quieter run."""
    from harness.sim import client

    def broken(self, *args, **kwargs):
        raise RuntimeError("broken on purpose")
        yield  # a generator, as the operations are

    monkeypatch.setattr(client.SimClient, "ack", broken)
    monkeypatch.setattr(client.SimClient, "_drive", broken)
    result = simulate(SimOptions("steady", 1, time=3.0, out=tmp_path / "b", report=False))
    assert result.exit_code == 2
    assert result.reason is not None and "broken on purpose" in result.reason


def test_claimers_sharing_a_transport_merge_their_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """workload.shared_transport: the claimers of a kind share one client, whose
    concurrent mergeable calls go as one request through rqueue's coalescer."""
    from harness.sim import merger

    made: list[merger.SimMerger] = []
    init = merger.SimMerger.__init__

    def keep(self: merger.SimMerger, *args: object) -> None:
        init(self, *args)  # type: ignore[arg-type]
        made.append(self)

    monkeypatch.setattr(merger.SimMerger, "__init__", keep)
    result = simulate(SimOptions("group-commit", 1, time=20.0, out=tmp_path / "g", report=False))
    assert result.exit_code == 0, result.anomalies
    assert len(made) == 2  # one transport for the sync claimers, one for the async ones
    assert sum(m.coalescer.merged_requests for m in made) > 0
