"""A run or ``cluster up`` refused before anything started leaves no folder behind (the
error says why); a run that failed after its cluster started keeps its folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _harness(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def _one_host(tmp_path: Path) -> Path:
    """An inventory of one loopback host: too few for a 3-node scenario, refused before
    any host is reached."""
    (tmp_path / "data").mkdir()
    inventory = tmp_path / "one.toml"
    inventory.write_text(f'[hosts.n1]\naddress = "127.0.0.1"\ndata_dir = "{tmp_path / "data"}"\n')
    return inventory


def test_a_run_refused_before_it_starts_leaves_no_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _harness(
        "run", "leader-failover", "--backend", "ssh", "--inventory", str(_one_host(tmp_path)),
        "--out", str(out), "--no-progress", "--no-plots",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "1 host, but 3 nodes are asked for" in proc.stderr
    assert not out.exists()


def test_a_refused_run_leaves_an_empty_out_folder_it_was_given_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "given"
    out.mkdir()
    proc = _harness(
        "run", "leader-failover", "--backend", "ssh", "--inventory", str(_one_host(tmp_path)),
        "--out", str(out), "--no-progress", "--no-plots",
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert out.is_dir() and list(out.iterdir()) == []


def test_a_refused_cluster_up_leaves_no_folder(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    proc = _harness(
        "cluster", "up", "--backend", "ssh", "--inventory", str(_one_host(tmp_path)),
        "--nodes", "3", "--dir", str(directory),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert not directory.exists()
