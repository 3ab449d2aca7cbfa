"""The matrix command: engine specs, the table, and one real cell."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.matrix import Cell, Engine, table


def test_engine_specs(tmp_path) -> None:
    assert Engine.parse("embedded").args == ("--engine", "embedded")
    with pytest.raises(ValueError, match="expected 'embedded', 'rqlited:PATH', 'docker:IMAGE' "):
        Engine.parse("docker")
    with pytest.raises(ValueError, match="no inventory file"):
        Engine.parse(f"ssh:{tmp_path / 'none.toml'}")
    (tmp_path / "inv.toml").write_text("")
    s = Engine.parse(f"ssh:{tmp_path / 'inv.toml'}")
    assert s.label == "ssh" and s.args == (
        "--backend",
        "ssh",
        "--inventory",
        str(tmp_path / "inv.toml"),
    )
    d = Engine.parse("docker:rqueue/node:local")  # the Docker backend with that image
    assert d.args == ("--backend", "docker", "--image", "rqueue/node:local")
    assert d.label == "docker-rqueue_node_local"  # a folder name for the cell's run
    with pytest.raises(ValueError, match="not an executable file"):
        Engine.parse("rqlited:/nonexistent/rqlited")
    e = Engine.parse(f"rqlited:{sys.executable}")
    assert e.args[-1] == sys.executable and e.label.startswith("python")


def test_the_table_names_what_each_run_found() -> None:
    cells = [
        Cell("steady", "embedded", "rqueue", 1, exit=0, verdict="valid", seconds=31.0),
        Cell("mixed", "rqlited-v8.36.18", "mutant-subquery-now", 2, exit=1,
             verdict="ANOMALIES", anomalies={"replica-divergence": 3}, replicas="3 nodes"),
        Cell("pause-leader", "embedded", "rqueue", 3, exit=3, verdict="inconclusive",
             reason="1 of 2 planned faults did not happen"),
        Cell("pause-leader", "embedded", "rqueue", 4, exit=0, verdict="valid", windows=4,
             dropped=3),
    ]  # fmt: skip
    text = table(cells)
    # a shortened run is valid only for the part of its schedule that ran: it says so
    assert "| 4 | valid (only 1 of 4 fault windows ran: 3 dropped by --time) |" in text
    assert "| steady | embedded | rqueue | 1 | valid | none | - | 31 |" in text
    assert "replica-divergence 3" in text
    assert "inconclusive: 1 of 2 planned faults did not happen" in text


@pytest.mark.slow
def test_one_real_cell(tmp_path) -> None:
    out = tmp_path / "m"
    argv = [sys.executable, "-m", "harness", "matrix", "--scenario", "steady",
            "--seeds", "7", "--time", "5", "--out", str(out)]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (cell,) = json.loads((out / "matrix.json").read_text())
    assert cell["verdict"] == "valid" and cell["seed"] == 7
    assert (out / "matrix.md").read_text().count("| steady |") == 1
