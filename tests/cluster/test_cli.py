"""``cluster up|status|urls|down`` run as a user runs them: separate processes, JSON on stdout."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from harness.cluster.base import ClusterError
from harness.cluster.local.cluster import LocalCluster
from harness.cluster.local.processes import process_environ
from harness.cluster.ports import busy_ports, fixed_ports
from tests.cluster.helpers import execute, rows, wait_until

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


#: a program that starts a cluster and dies without stopping it (its owner is gone)
ABANDON = (
    "import os, sys; from harness.cluster.local.cluster import LocalCluster; "
    "c = LocalCluster.start(nodes=1, directory=sys.argv[1], timeout=60); "
    "print(c.nodes()[0].pid, flush=True); os._exit(0)"
)


def test_down_all_reaps_only_abandoned_clusters_unless_told_to_kill_live_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three clusters under one tag: one `cluster up` made (nobody's), one this test
    process owns (alive), one whose owner died. `down --all` takes only the last and
    names the two it left; `--yes-kill-live` takes them too."""
    if os.environ.get("RQLITE_URLS"):
        pytest.skip("starts its own clusters")
    tag = f"test-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "RQUEUE_REAP_TAG": tag}
    detached, owned, abandoned = tmp_path / "up", tmp_path / "owned", tmp_path / "abandoned"
    mine = None
    try:
        up = cli("up", "--nodes", "1", "--dir", str(detached), env=env)
        assert up.returncode == 0, up.stderr
        up_pid = one_json(up.stdout)["nodes"][0]["pid"]
        monkeypatch.setenv("RQUEUE_REAP_TAG", tag)
        mine = LocalCluster.start(nodes=1, directory=owned, timeout=60)
        owned_pid = mine.nodes()[0].pid
        gone = subprocess.run(
            [sys.executable, "-c", ABANDON, str(abandoned)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert gone.returncode == 0, gone.stderr
        gone_pid = int(gone.stdout)
        assert process_environ(gone_pid) is not None, "the abandoned node outlives its owner"

        down = cli("down", "--all", "--tag", tag)
        assert down.returncode == 0, down.stderr
        out = one_json(down.stdout)
        assert out["reaped"]["processes"] == [gone_pid]
        assert process_environ(gone_pid) is None
        assert process_environ(up_pid) is not None and process_environ(owned_pid) is not None
        left = {c["dir"]: c for c in out["left"]}
        assert set(left) == {str(detached.resolve()), str(owned.resolve())}
        assert left[str(detached.resolve())]["why"].startswith("no owner (started by `cluster up`")
        assert left[str(owned.resolve())]["why"] == f"owned by pid {os.getpid()}, still running"
        assert f"left the cluster in {detached.resolve()}" in down.stderr

        kill = cli("down", "--all", "--tag", tag, "--yes-kill-live")
        assert kill.returncode == 0, kill.stderr
        assert sorted(one_json(kill.stdout)["reaped"]["processes"]) == sorted([up_pid, owned_pid])
        assert one_json(kill.stdout)["left"] == []
    finally:
        if mine is not None:
            mine.stop()
        for d in (detached, abandoned):
            if (d / "cluster.json").exists():
                LocalCluster.attach(d).stop()


def test_down_options_that_do_not_fit_are_named(tmp_path: Path) -> None:
    live = cli("down", "--dir", str(tmp_path), "--yes-kill-live")
    assert live.returncode == 2 and "--tag and --yes-kill-live are for `down --all`" in live.stderr
    purge = cli("down", "--all", "--purge")
    assert purge.returncode == 2 and "--purge is for `down --dir`" in purge.stderr


def test_bad_input_is_named() -> None:
    bad = cli("up", "--nodes", "zero", "--dir", "/nonexistent/x")
    assert bad.returncode == 2 and "--nodes must be a whole number" in bad.stderr
    missing = cli("status", "--dir", "/nonexistent/rqueue-cluster")
    assert missing.returncode == 2 and "no cluster in /nonexistent/rqueue-cluster" in missing.stderr
    port = cli("up", "--dir", "/nonexistent/x", "--base-port", "0")
    assert port.returncode == 2 and "--base-port must be 1-65535, got 0" in port.stderr
    docker = cli("up", "--dir", "/nonexistent/x", "--base-port", "4001", "--backend", "docker")
    assert docker.returncode == 2 and "--base-port is for --backend local" in docker.stderr
    both = cli("down")
    assert both.returncode == 2
    assert "one of the arguments --dir --inventory --all is required" in both.stderr


def _free_base(nodes: int) -> int:
    """A base port whose HTTP and Raft ports for ``nodes`` nodes are free right now."""
    for _ in range(200):
        base = random.randrange(21001, 30000, 10)
        if not busy_ports(fixed_ports(base, nodes)):
            return base
    raise AssertionError("no free base port found")


def test_fixed_ports_follow_rqlites_convention() -> None:
    assert fixed_ports(4001, 3) == [4001, 4002, 4011, 4012, 4021, 4022]
    with pytest.raises(ClusterError, match="no room for 3 nodes"):
        fixed_ports(65520, 3)


def test_base_port_then_down_then_up_again_on_the_data(tmp_path: Path) -> None:
    if os.environ.get("RQLITE_URLS"):
        pytest.skip("starts its own cluster")
    d = tmp_path / "c"
    base = _free_base(3)
    want = [f"http://127.0.0.1:{base + 10 * k}" for k in range(3)]
    try:
        up = cli("up", "--dir", str(d), "--base-port", str(base))
        assert up.returncode == 0, up.stderr
        info = one_json(up.stdout)
        assert [n["url"] for n in info["nodes"]] == want
        assert info["urls"] == ",".join(want)
        state = json.loads((d / "cluster.json").read_text())
        assert [n["raft_port"] for n in state["nodes"]] == [base + 1 + 10 * k for k in range(3)]
        urls = cli("urls", "--dir", str(d))
        assert urls.returncode == 0 and urls.stdout == ",".join(want) + "\n", urls

        other = cli("up", "--dir", str(tmp_path / "o"), "--base-port", str(base))
        assert other.returncode == 2 and f"{base}" in other.stderr
        assert "already in use" in other.stderr
        # it names how to stop one's own cluster, and advises nothing that kills others'
        assert "cluster down --dir DIR" in other.stderr and "--all" not in other.stderr

        execute(want[0], [["CREATE TABLE t (v TEXT)"], ["INSERT INTO t VALUES (?)", "kept"]])
        pids = [n["pid"] for n in info["nodes"]]
        assert cli("down", "--dir", str(d)).returncode == 0
        assert not any(process_environ(p) for p in pids)

        bigger = cli("up", "--dir", str(d), "--nodes", "5")
        assert bigger.returncode == 2 and "3 nodes, not 5" in bigger.stderr

        again = cli("up", "--dir", str(d))
        assert again.returncode == 0, again.stderr
        back = one_json(again.stdout)
        assert [n["url"] for n in back["nodes"]] == want and back["leader"] in want
        assert all(process_environ(n["pid"]) for n in back["nodes"])
        assert wait_until(lambda: rows(want[2], "SELECT v FROM t"), 30, "the row back") == [
            ["kept"]
        ]
    finally:
        if (d / "cluster.json").exists():
            LocalCluster.attach(d).stop()


def test_up_starts_the_dead_nodes_of_a_running_cluster_again(tmp_path: Path) -> None:
    """A node killed by hand (as docs/celery.md invites) comes back with `up --dir`, on
    its data; the living nodes are left alone, and the command names the one it started."""
    if os.environ.get("RQLITE_URLS"):
        pytest.skip("starts its own cluster")
    d = tmp_path / "c"
    try:
        up = cli("up", "--nodes", "3", "--dir", str(d))
        assert up.returncode == 0, up.stderr
        info = one_json(up.stdout)
        execute(info["leader"], [["CREATE TABLE t (v TEXT)"], ["INSERT INTO t VALUES ('x')"]])
        victim = next(n for n in info["nodes"] if n["url"] != info["leader"])
        others = {n["id"]: n["pid"] for n in info["nodes"] if n is not victim}
        os.kill(victim["pid"], 9)
        wait_until(lambda: not process_environ(victim["pid"]), 10, "the killed node to be gone")
        dead = one_json(cli("status", "--dir", str(d)).stdout)
        assert [n["alive"] for n in dead["nodes"] if n["id"] == victim["id"]] == [False]

        again = cli("up", "--dir", str(d))
        assert again.returncode == 0, again.stderr
        assert f"started 1 dead node of the running cluster in {d.resolve()}" in again.stderr
        assert again.stderr.rstrip().endswith(victim["id"])
        after = {n["id"]: n for n in one_json(again.stdout)["nodes"]}
        assert all(n["alive"] for n in after.values())
        assert {i: after[i]["pid"] for i in others} == others, "the living nodes were left alone"
        url = after[victim["id"]]["url"]
        wait_until(
            lambda: rows(url, "SELECT v FROM t", level="none") == [["x"]],
            10,
            "the restarted node to hold the row written before its death",
        )

        alive = cli("up", "--dir", str(d))
        assert alive.returncode == 2 and "every node alive" in alive.stderr
        other = cli("up", "--nodes", "5", "--dir", str(d))
        assert other.returncode == 2 and "running cluster with 3 nodes, not 5" in other.stderr
    finally:
        if (d / "cluster.json").exists():
            LocalCluster.attach(d).stop()
