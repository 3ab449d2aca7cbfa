"""scripts/repro_rqlite_now_subquery.py against a live cluster (exit status and verdicts)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from harness.cluster.local.cluster import LocalCluster

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "repro_rqlite_now_subquery.py"
RQLITED = os.environ.get("RQUEUE_TEST_RQLITED")


def _engines() -> list:
    v8 = pytest.param(
        "rqlited",
        marks=pytest.mark.skipif(
            not RQLITED or "v8" not in Path(RQLITED).name,
            reason="RQUEUE_TEST_RQLITED does not name an rqlited v8 binary",
        ),
    )
    return ["embedded", v8]


@pytest.mark.parametrize("engine", _engines())
def test_the_script_shows_which_writes_diverge(engine: str, tmp_path: Path) -> None:
    with LocalCluster.start(
        nodes=3, directory=tmp_path / "c", engine=engine, rqlited=RQLITED
    ) as cluster:
        # one node's clock 0.25 s ahead: a 'now' evaluated at apply time then differs
        # between replicas whatever the apply timing (SQLite reads the clock to the
        # millisecond, and replicas applying within one millisecond of each other would
        # agree), while a rewritten 'now' is one literal on every replica
        cluster.set_clock_offset("n2", 0.25)
        proc = subprocess.run(
            [sys.executable, str(SCRIPT), *cluster.urls, "--rounds", "3"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        left = requests.get(
            f"{cluster.urls[0]}/db/query",
            params={"q": "SELECT name FROM sqlite_master", "level": "strong"},
            timeout=10,
        ).json()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = proc.stdout
    cases = [
        line.split(":")[0] for line in text.splitlines() if ": UPDATE" in line or ": INSERT" in line
    ]
    assert cases == ["control", "subquery", "groups", "insert-groups", "quoted-groups"], text
    assert text.count("-> identical") == 3 and text.count("-> DIVERGED") == 2, text
    lines = text.splitlines()
    diverged = [
        line.split(":")[0]
        for line, nxt in itertools.pairwise(lines)
        if "DIVERGED" in nxt and (": UPDATE" in line or ": INSERT" in line)
    ]
    assert diverged == ["subquery", "groups"], text
    assert "verdict: replicas DIVERGED" in text
    assert "repro_now" not in str(left) and "groups" not in str(left)  # dropped after


def test_a_dead_url_is_a_clear_error() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "http://127.0.0.1:9"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "repro: error: http://127.0.0.1:9" in proc.stderr
