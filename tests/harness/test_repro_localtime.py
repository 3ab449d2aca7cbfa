"""scripts/repro_rqlite_now_localtime.py on the embedded node (its default), an rqlited
given by RQUEUE_TEST_RQLITED (v8.33 or later), and its Docker mode's skip line."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness import zonefile

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "repro_rqlite_now_localtime.py"
RQLITED = os.environ.get("RQUEUE_TEST_RQLITED")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TZ"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env
    )


def _shifts(text: str) -> list[float]:
    return [float(m) for m in re.findall(r"rewritten minus SQLite's own: ([+-][\d.]+) s", text)]


def test_the_embedded_node_shows_now_in_local_time() -> None:
    proc = _run()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    shifts = _shifts(proc.stdout)
    assert len(shifts) == 2 and all(abs(s - 19800) < 2 for s in shifts), proc.stdout
    assert "verdict: SEEN" in proc.stdout and "offset now +19800 s (+0530)" in proc.stdout


def test_a_zone_at_utc_is_not_seen() -> None:
    proc = _run("--offset", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all(abs(s) < 2 for s in _shifts(proc.stdout)) and "(not seen)" in proc.stdout


@pytest.mark.skipif(not RQLITED, reason="RQUEUE_TEST_RQLITED names no rqlited binary")
def test_a_real_rqlited_in_a_zone() -> None:
    proc = _run("--rqlited", str(RQLITED), "--offset", "-12600")
    version = re.search(r"rqlite v(\d+)\.(\d+)", proc.stdout)
    if version and (int(version[1]), int(version[2])) < (8, 33):
        assert proc.returncode == 0, proc.stdout  # before 8.33 nothing is rewritten
    else:
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert all(abs(s + 12600) < 2 for s in _shifts(proc.stdout)), proc.stdout


def test_no_image_is_a_one_line_skip() -> None:
    proc = _run("--image", "rqueue-tests/no-such-image:0")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stdout.startswith("skip: ") and proc.stdout.count("\n") == 1


def test_a_missing_binary_is_a_clear_error() -> None:
    proc = _run("--rqlited", "/nonexistent/rqlited")
    assert proc.returncode == 2 and "cannot start /nonexistent/rqlited" in proc.stderr


def test_its_zone_file_is_the_harness_s() -> None:
    """The script writes its own (it is standard library only): the same bytes."""
    spec = importlib.util.spec_from_file_location("repro_localtime", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for offset in (19800, 0, -12600, 3600, 20730, -86399):
        assert module.fixed_zone(offset) == zonefile.fixed(offset), offset
