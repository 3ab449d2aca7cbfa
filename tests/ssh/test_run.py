"""Whole scenarios on the SSH backend (local test hosts): valid, replicas identical, the
nodes' logs and data listings in the run folder, nothing left on the hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ssh.conftest import SshTestHosts

pytestmark = [pytest.mark.slow, pytest.mark.root]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("scenario", ["leader-failover", "partition-leader"])
def test_a_scenario_runs_valid_over_ssh(
    scenario: str, ssh_hosts: SshTestHosts, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "harness", "run", scenario, "--backend", "ssh"]
    argv += ["--inventory", str(ssh_hosts.inventory_path), "--time", "30", "--seed", "1"]
    argv += ["--out", str(out), "--no-progress", "--no-plots"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads((out / "run.json").read_text())["summary"]
    assert summary["backend"] == "ssh" and summary["exit"] == 0
    # the engine and the backend apart: the project's node, run over SSH
    assert summary["engine"] == "embedded", summary["engine"]
    assert json.loads((out / "versions.json").read_text())["engine"] == "embedded"
    assert summary["faults"], "the scenario's faults ran"
    assert "identical" in str(summary["replicas"])
    for name in ("n1", "n2", "n3"):
        assert (out / "cluster" / name / "node.log").read_text().startswith("--- starting")
        assert (out / "cluster" / name / "data-listing.txt").exists()
