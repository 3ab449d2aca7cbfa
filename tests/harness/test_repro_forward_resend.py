"""scripts/repro_rqlite_forward_resend.py on the embedded node (its default: v10 applies
the write twice, v9 once), on an rqlited given by RQUEUE_TEST_RQLITED, and its skip lines
(no binary; no Docker engine or image)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "repro_rqlite_forward_resend.py"
RQLITED = os.environ.get("RQUEUE_TEST_RQLITED")

pytestmark = pytest.mark.timeout(240)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=180
    )


def test_the_embedded_node_following_v10_applies_the_write_twice() -> None:
    proc = _run()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "rows on the leader: 2" in proc.stdout and "verdict: SEEN" in proc.stdout
    assert '"last_insert_id": 2' in proc.stdout, "the client got the second application"


def test_the_embedded_node_following_v9_applies_it_once() -> None:
    proc = _run("--version", "9.4.5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rows on the leader: 1" in proc.stdout and '"results": []' in proc.stdout


def test_no_binary_is_a_one_line_skip(tmp_path: Path) -> None:
    proc = _run("--rqlited", str(tmp_path / "rqlited"))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.strip().count("\n") == 0 and proc.stdout.startswith("skip: no rqlited")


def test_a_missing_image_is_a_one_line_skip() -> None:
    proc = _run("--image", "rqueue-test/no-such-image:0")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.strip().count("\n") == 0 and proc.stdout.startswith("skip: ")


@pytest.mark.skipif(not RQLITED, reason="RQUEUE_TEST_RQLITED names no rqlited binary")
def test_a_real_rqlited() -> None:
    proc = _run("--rqlited", str(RQLITED))
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    version = next(line for line in proc.stdout.splitlines() if ": rqlite v" in line)
    major = int(version.split(": rqlite v")[1].split(".")[0])
    assert proc.returncode == (1 if major >= 10 else 0), proc.stdout
