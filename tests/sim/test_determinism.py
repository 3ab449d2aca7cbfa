"""A seed is a run: the same seed gives the same history, byte for byte (issue 44)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.sim.run import SimOptions, simulate


@pytest.mark.parametrize(
    ("scenario", "seed", "time"),
    [("steady", 4, 4.0), ("leader-failover", 2, 14.0), ("chaos", 9, 10.0)],
)
def test_same_seed_same_history(tmp_path: Path, scenario: str, seed: int, time: float) -> None:
    runs = []
    for k in ("a", "b"):
        out = tmp_path / k
        result = simulate(SimOptions(scenario, seed, time=time, out=out, report=False))
        assert result.exit_code == 0, result.anomalies
        runs.append(out)
    a, b = ((r / "history.jsonl").read_bytes() for r in runs)
    assert a and a == b
    assert (runs[0] / "replicas.json").read_bytes() == (runs[1] / "replicas.json").read_bytes()


def test_another_seed_another_history(tmp_path: Path) -> None:
    for seed in (1, 2):
        simulate(SimOptions("steady", seed, time=3.0, out=tmp_path / str(seed), report=False))
    assert (tmp_path / "1" / "history.jsonl").read_bytes() != (
        tmp_path / "2" / "history.jsonl"
    ).read_bytes()


def test_a_seed_replays_in_a_fresh_process_as_it_ran_after_others(tmp_path: Path) -> None:
    """What a sweep's worker ran before a seed leaves no trace in it: its replay command,
    in a fresh process, writes the same history."""
    import subprocess
    import sys

    for seed in (1, 2):
        simulate(SimOptions("steady", seed, time=3.0, out=tmp_path / str(seed), report=False))
    cmd = [sys.executable, "-m", "harness", "sim", "steady", "--seed", "2", "--time", "3"]
    cmd += ["--no-plots", "--out", str(tmp_path / "replay")]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    replayed = (tmp_path / "replay" / "history.jsonl").read_bytes()
    assert replayed == (tmp_path / "2" / "history.jsonl").read_bytes()
