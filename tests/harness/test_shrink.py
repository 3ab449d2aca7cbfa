"""The shrink command: its reductions, its decision rule, its files, and one real shrink."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness.scenario import load_scenario
from harness.shrink import ShrinkError, engine_args, load_run
from harness.shrink.search import decided, majority
from harness.shrink.steps import (
    MIN_DURATION,
    candidates,
    cut_to,
    describe,
    fault_windows,
    plain,
    scale_to,
    size,
    to_toml,
    validate,
)
from harness.shrink.trials import reproduces, run_argv


def _data(name: str = "clock-skew", time: float = 20.0) -> dict:
    """The scenario with its whole schedule, fault lengths too, scaled to ``time`` s (as a
    shrink's "scale the run" does; ``--time`` would keep the lengths and drop windows)."""
    data = scale_to(plain(load_scenario(name).to_json()), time)
    assert data is not None
    return data


def test_every_candidate_is_runnable_and_strictly_smaller() -> None:
    for name in ("clock-skew", "lease-expiry", "partition-majority", "steady"):
        data = _data(name)
        cands = candidates(data)
        assert cands, name
        for c in cands:
            validate(c.data)
            assert size(c.data) < size(data), (name, c.change)
            assert c.data["duration"] >= MIN_DURATION


def test_the_reductions_cover_faults_duration_workers_groups_and_nodes() -> None:
    changes = [c.change for c in candidates(_data("partition-majority"))]
    text = "\n".join(changes)
    expected_changes = (
        "cut the run to 10 s", "scale the run", "drop fault 0", "once, not every",
        "1 publisher", "no async claimers", "groups per publisher", "3 nodes",
    )  # fmt: skip
    for expected in expected_changes:
        assert expected in text, (expected, changes)
    # biggest saving first: shortening the run comes before dropping a worker
    assert changes.index("1 publisher") > changes.index("drop fault 0 (partition-majority)")


def test_cutting_drops_late_faults_and_clips_the_rest() -> None:
    data = _data("clock-skew", 20.0)  # worker skew 1.3+7.3 every 10, node skew 3.3+5 every 10
    cut = cut_to(data, 10.0)
    assert cut is not None and cut["duration"] == 10.0
    assert [f["kind"] for f in cut["faults"]] == ["clock-skew-worker", "clock-skew-node"]
    assert all(not f.get("every") for f in cut["faults"])
    assert fault_windows(cut) == 2 < fault_windows(data)
    assert cut_to(data, 25.0) is None  # not shorter
    assert cut_to(data, 1.0)["duration"] == MIN_DURATION


def test_scaling_keeps_the_schedule_shape() -> None:
    data = _data("lease-expiry", 20.0)
    half = scale_to(data, 10.0)
    f = half["faults"][0]
    assert (f["start"], f["duration"], f["every"]) == (0.7, 4.0, 5.0)
    validate(half)


def test_a_scenario_file_round_trips(tmp_path: Path) -> None:
    data = _data("clock-skew", 15.0)
    path = tmp_path / "x.toml"
    path.write_text(to_toml(data, "a header\nof two lines"))
    assert path.read_text().startswith("# a header\n# of two lines\n")
    back = plain(load_scenario(path).to_json())
    for key in ("nodes", "duration", "workload", "faults"):
        assert back[key] == data[key], key
    assert describe(back) == describe(data)


def test_the_majority_rule_decides_as_early_as_it_can() -> None:
    assert majority(3) == 2 and majority(1) == 1 and majority(5) == 3
    assert decided(2, 0, 3) is True
    assert decided(0, 2, 3) is False
    assert decided(1, 1, 3) is None
    assert decided(1, 0, 1) is True and decided(0, 1, 1) is False


def test_a_trial_reproduces_only_with_a_sought_kind() -> None:
    assert reproduces({"stale-ack-accepted": 3}, ["stale-ack-accepted", "lost"])
    assert not reproduces({"fifo-violation": 3}, ["duplicate-group-lease"])
    assert not reproduces({"duplicate-group-lease": 0}, ["duplicate-group-lease"])
    argv = run_argv("x.toml", 7, "seed-reference", ("--engine", "embedded"))
    assert argv == ["python", "-m", "harness", "run", "x.toml", "--seed", "7",
                    "--subject", "seed-reference", "--engine", "embedded"]  # fmt: skip


def test_engine_arguments_come_from_the_run() -> None:
    assert engine_args({"engine": "embedded", "backend": "local"}) == ("--engine", "embedded")
    assert engine_args({"engine": "rqlited", "rqlited": "/x/rqlited", "backend": "docker"}) == (
        "--engine", "rqlited", "--rqlited", "/x/rqlited", "--backend", "docker")  # fmt: skip


def test_a_folder_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ShrinkError, match="is not a run folder"):
        load_run(tmp_path)
    (tmp_path / "run.json").write_text("{}")
    (tmp_path / "scenario.json").write_text("[")
    with pytest.raises(ShrinkError, match="not JSON"):
        load_run(tmp_path)


def _fake_run(folder: Path, anomalies: dict[str, int], subject: str = "seed-reference") -> None:
    folder.mkdir(parents=True)
    (folder / "scenario.json").write_text(json.dumps(_data("lease-expiry", 10.0)))
    options = {"subject": subject, "engine": "embedded", "backend": "local", "seed": 1}
    (folder / "run.json").write_text(
        json.dumps({"options": options, "summary": {"anomalies": anomalies}})
    )


def test_the_command_refuses_a_valid_run_and_an_unseen_kind(tmp_path: Path) -> None:
    _fake_run(tmp_path / "valid", {"lost": 0})
    _fake_run(tmp_path / "bad", {"stale-ack-accepted": 2})
    for folder, kind, message in (
        ("valid", [], "found no anomalies"),
        ("bad", ["--kind", "lost"], "--kind lost: the run did not find it"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "harness", "shrink", str(tmp_path / folder), *kind],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr


@pytest.mark.slow
def test_a_real_shrink_of_a_mutant(tmp_path: Path) -> None:
    """mutant-lifo on an 8 s steady run: the shrink keeps a reduction and confirms it.

    The budget ends the search after a few trials (about 10 s each; the first always
    fits): the test needs one kept reduction, not the smallest scenario."""
    run = tmp_path / "run"
    base = [sys.executable, "-m", "harness"]
    proc = subprocess.run(
        [*base, "run", "steady", "--time", "8", "--seed", "1", "--subject", "mutant-lifo",
         "--out", str(run), "--no-progress", "--no-plots"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    proc = subprocess.run(
        [*base, "shrink", str(run), "--kind", "fifo-violation", "--tries", "1", "--confirm", "1",
         "--budget", "50"],
        capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((run / "shrink" / "search.json").read_text())
    assert result["kinds"] == ["fifo-violation"]
    kept = [s for s in result["steps"] if s["kept"]]
    assert len(kept) >= 2, result["steps"]  # the original and at least one reduction
    assert result["confirmed"][0] >= 1
    minimal = tomllib.loads(next((run / "shrink").glob("*-min.toml")).read_text())
    assert minimal["duration"] < 8.0 or minimal["workload"]["publishers"] < 2
    md = (run / "shrink" / "shrink.md").read_text()
    assert "python -m harness run" in md and "| # | change |" in md
    assert "shrinking:" in proc.stdout and "REPRODUCED" in proc.stdout


def _node_processes(under: Path) -> list[int]:
    """Pids of live processes whose command line names a path under ``under``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(under) in cmdline and "harness.node" in cmdline:
            pids.append(int(proc.name))
    return pids


def test_ctrl_c_stops_the_shrink_and_its_trial_cluster(tmp_path: Path) -> None:
    """SIGINT while a trial runs: the trial's nodes are gone and the search is written."""
    import signal
    import time

    run = tmp_path / "run"
    _fake_run(run, {"stale-ack-accepted": 2})
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "shrink", str(run), "--budget", "600"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    trials = run / "shrink" / "trials"
    deadline = time.monotonic() + 60
    while not _node_processes(trials):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no trial cluster started within 60 s"
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=150)
    assert proc.returncode == 2, out + err
    assert "interrupted" in err
    assert _node_processes(trials) == []
    result = json.loads((run / "shrink" / "search.json").read_text())
    assert result["stopped"].startswith("interrupted")


def test_each_step_tries_the_runs_seed_then_seeds_no_earlier_step_used() -> None:
    from harness.shrink.search import trial_seeds

    assert trial_seeds(1, 1, 3) == [1, 2, 3]
    assert trial_seeds(1, 2, 3) == [1, 4, 5]
    assert trial_seeds(7, 1, 1) == [7]


def test_a_smallest_scenario_that_fails_confirmation_falls_back(tmp_path, monkeypatch) -> None:
    """Pure logic, with a stand-in for the runs: during the search every scenario
    reproduces; on the fresh confirmation seeds only runs of 10 s or more do."""
    from harness.shrink import search as search_mod
    from harness.shrink.trials import Trial

    def fake_run_trial(candidate, scenario, seed, subject, engine_args, kinds, out, **kw):
        duration = load_scenario(scenario).duration
        hit = seed < search_mod.CONFIRM_SEED_OFFSET or duration >= 10
        return Trial(candidate, seed, 1 if hit else 0, {"lost": 1} if hit else {}, hit, 0.1,
                     str(out))  # fmt: skip

    monkeypatch.setattr(search_mod, "run_trial", fake_run_trial)
    opts = search_mod.Options(
        data=_data("lease-expiry", 20.0), subject="x", engine_args=(), kinds=("lost",),
        seed=1, out=tmp_path, budget=10_000, tries=3, confirm=5,
    )  # fmt: skip
    s = search_mod.Search(opts, say=lambda _text: None)
    s.run()
    smallest = [st for st in s.steps if st.kept][-1]
    assert smallest.duration == MIN_DURATION
    conf = s.confirm()
    assert conf is not None and conf.reproduced == 5
    assert s.best["duration"] >= 10
    confirmations = [st for st in s.steps if st.change.startswith("confirmation")]
    assert len(confirmations) >= 2 and confirmations[0].reproduced == 0
    assert len(confirmations[0].tries) == 3  # stopped once the majority was out of reach
