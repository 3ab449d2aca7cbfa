"""``harness shrink`` on a simulated run: trials are ``harness sim`` runs of the run's
seed, each once (a seed replays exactly), with no confirmation on other seeds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.shrink import engine_args
from harness.shrink.trials import run_argv
from harness.sim.run import SimOptions, simulate


def test_a_simulated_run_is_shrunk_with_sim_trials() -> None:
    args = engine_args({"backend": "sim", "core_faults": 0.0})
    assert args == ("--sim",)
    argv = run_argv("min.toml", 4, "mutant-lifo", args)
    assert argv[3:] == ["sim", "min.toml", "--seed", "4", "--subject", "mutant-lifo"]
    faulty = engine_args({"backend": "sim", "core_faults": 0.05})
    assert run_argv("s.toml", 1, "rqueue", faulty)[-2:] == ["--core-faults", "0.05"]


@pytest.mark.slow
def test_shrink_of_a_simulated_run_is_exact(tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = simulate(SimOptions("steady", 1, "mutant-lifo", time=5.0, out=run, report=False))
    assert result.exit_code == 1
    cmd = [sys.executable, "-m", "harness", "shrink", str(run), "--budget", "600"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    search = json.loads((run / "shrink" / "search.json").read_text())
    assert all(len(s["tries"]) <= 1 for s in search["steps"])  # one try each, one seed
    assert "a simulated seed replays exactly" in (run / "shrink" / "shrink.md").read_text()
