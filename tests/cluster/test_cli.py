"""``cluster up|status|down`` run as a user runs them: separate processes, JSON on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from harness.cluster.local import LocalCluster, process_environ
from tests.cluster.helpers import execute, rows

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cluster.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def one_json(out: str) -> dict:
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected exactly one JSON line on stdout, got {out!r}"
    return json.loads(lines[0])


def test_up_status_down(tmp_path: Path) -> None:
    if os.environ.get("RQLITE_URLS"):
        pytest.skip("starts its own cluster")
    d = tmp_path / "c"
    try:
        up = cli("up", "--nodes", "3", "--dir", str(d))
        assert up.returncode == 0, up.stderr
        info = one_json(up.stdout)
        assert info["dir"] == str(d.resolve())
        assert info["leader"] in [n["url"] for n in info["nodes"]]
        assert [n["id"] for n in info["nodes"]] == ["n1", "n2", "n3"]
        pids = [n["pid"] for n in info["nodes"]]
        assert all(process_environ(p) for p in pids), "nodes outlive the up command"

        # a row written through one follower is seen by a strong read on the other
        followers = [n["url"] for n in info["nodes"] if n["url"] != info["leader"]]
        execute(followers[0], [["CREATE TABLE t (v TEXT)"], ["INSERT INTO t VALUES (?)", "x"]])
        assert rows(followers[1], "SELECT v FROM t") == [["x"]]

        status = cli("status", "--dir", str(d))
        assert status.returncode == 0, status.stderr
        assert one_json(status.stdout)["nodes"] == info["nodes"]

        again = cli("up", "--nodes", "3", "--dir", str(d))
        assert again.returncode == 2 and "already running" in again.stderr

        down = cli("down", "--dir", str(d))
        assert down.returncode == 0, down.stderr
        assert one_json(down.stdout)["stopped"] is True
        assert not any(process_environ(p) for p in pids), "down leaves no process behind"
        after = cli("status", "--dir", str(d))
        assert after.returncode == 1 and one_json(after.stdout)["leader"] is None
    finally:
        if (d / "cluster.json").exists():
            LocalCluster.attach(d).stop()


def test_down_all_reaps_only_the_tagged_leftovers(tmp_path: Path) -> None:
    if os.environ.get("RQLITE_URLS"):
        pytest.skip("starts its own cluster")
    tag = f"test-{uuid.uuid4().hex[:8]}"
    d = tmp_path / "c"
    try:
        up = cli("up", "--nodes", "1", "--dir", str(d), env={**os.environ, "RQUEUE_REAP_TAG": tag})
        assert up.returncode == 0, up.stderr
        pid = one_json(up.stdout)["nodes"][0]["pid"]
        down = cli("down", "--all", "--tag", tag)
        assert down.returncode == 0, down.stderr
        assert one_json(down.stdout)["reaped"]["processes"] == [pid]
        assert process_environ(pid) is None
    finally:
        LocalCluster.attach(d).stop()


def test_bad_input_is_named() -> None:
    bad = cli("up", "--nodes", "zero", "--dir", "/nonexistent/x")
    assert bad.returncode == 2 and "--nodes must be a whole number" in bad.stderr
    missing = cli("status", "--dir", "/nonexistent/rqueue-cluster")
    assert missing.returncode == 2 and "no cluster in /nonexistent/rqueue-cluster" in missing.stderr
    both = cli("down")
    assert both.returncode == 2 and "one of the arguments --dir --all is required" in both.stderr
