"""The local cluster manager against real node processes: faults, restarts, clock files."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from harness import zonefile
from harness.cluster.base import ClusterError, probe_node
from harness.cluster.external.cluster import ExternalCluster
from harness.cluster.local import cluster as local
from harness.cluster.local.cluster import LocalCluster
from harness.cluster.local.processes import our_processes, process_environ
from tests.cluster.helpers import execute, rows, wait_until

pytestmark = pytest.mark.timeout(180)


def test_kill_leader_elects_another_and_restart_catches_up(make_cluster) -> None:
    c = make_cluster(3)
    old = c.leader()
    assert old is not None and old.pid
    execute(old.url, [["CREATE TABLE t (x INTEGER)"], ["INSERT INTO t VALUES (?)", 1]])

    c.kill(old.id)
    assert process_environ(old.pid) is None, "the killed process is gone"
    assert c.node(old.id).pid is None
    new = c.wait_for_leader(15, exclude=[old.id])
    assert new.id != old.id
    follower = next(n for n in c.nodes() if n.id not in (old.id, new.id))
    execute(follower.url, [["INSERT INTO t VALUES (?)", 2]])  # forwarded to the new leader

    c.restart(old.id)
    assert c.node(old.id).pid not in (None, old.pid)
    c.wait_for_leader(30)
    wait_until(
        lambda: rows(old.url, "SELECT x FROM t ORDER BY x", level="none") == [[1], [2]],
        30,
        f"restarted {old.id} to hold both rows locally",
    )
    with pytest.raises(ClusterError, match="still running"):
        c.restart(old.id)


def test_pause_leader_then_resume(make_cluster) -> None:
    c = make_cluster(3)
    old = c.leader()
    c.pause(old.id)
    # every thread stops when it takes the signal: a many-threaded rqlited may still show
    # R for a moment
    wait_until(
        lambda: Path(f"/proc/{old.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T",
        5,
        f"SIGSTOP to leave {old.id} (pid {old.pid}) stopped",
    )
    assert (
        LocalCluster.attach(c.directory).describe()["nodes"][int(old.id[1:]) - 1]["state"]
        == "paused"
    )
    new = c.wait_for_leader(15, exclude=[old.id])
    assert new.id != old.id
    with pytest.raises(ClusterError, match="not running"):
        c.pause(old.id)

    c.resume(old.id)
    c.wait_for_leader(30)  # every running node, the resumed one included, is ready
    assert probe_node(old.url).ready


def test_clock_offset_is_written_to_the_nodes_file(cluster) -> None:
    if not isinstance(cluster, LocalCluster):
        pytest.skip("an external cluster's clocks cannot be set")
    if cluster.engine == "rqlited" and local.find_faketime() is None:
        pytest.skip("skewing an rqlited node's clock needs libfaketime (scripts/install adds it)")
    node = cluster.nodes()[0]
    path = cluster.directory / node.id / "clock-offset"
    try:
        cluster.set_clock_offset(node.id, 2.5)
        assert float(path.read_text()) == 2.5
        cluster.set_clock_offset(node.id, -30)
        assert float(path.read_text()) == -30.0
    finally:
        cluster.set_clock_offset(node.id, 0.0)
    assert float(path.read_text()) == 0.0


def test_stop_is_idempotent_and_leaves_files(make_cluster) -> None:
    c = make_cluster(1)
    pid = c.nodes()[0].pid
    assert c.wait_for_leader(10).id == "n1"
    c.stop()
    c.stop()
    assert process_environ(pid) is None
    assert (c.directory / "n1" / "node.log").exists()
    assert all(n.pid is None for n in c.nodes())
    with pytest.raises(ClusterError, match="not running"):
        c.kill("n1")
    with pytest.raises(ClusterError, match="the cluster was stopped"):
        c.restart("n1")


def test_started_nodes_carry_the_marker(cluster) -> None:
    if not isinstance(cluster, LocalCluster):
        pytest.skip("external cluster")
    env = process_environ(cluster.nodes()[0].pid)
    assert env is not None and env["RQUEUE_CLUSTER_DIR"] == str(cluster.directory)
    assert env.get("RQUEUE_REAP_TAG") == os.environ.get("RQUEUE_REAP_TAG")


def test_nodes_run_in_utc_whatever_the_callers_zone(cluster) -> None:
    if not isinstance(cluster, LocalCluster):
        pytest.skip("external cluster")
    for node in cluster.nodes():
        env = process_environ(node.pid)
        assert env is not None and env.get("TZ") == "UTC", node


def _local_minus_utc(url: str, node_id: str) -> float:
    """A write through ``url``: its rewritten 'now' minus SQLite's own (UTC), seconds."""
    execute(url, [["INSERT INTO tz(node, d) VALUES (?, julianday('now') - julianday())", node_id]])
    got = rows(url, f"SELECT d FROM tz WHERE node = '{node_id}' ORDER BY rowid DESC LIMIT 1")
    return got[0][0] * 86400.0


def test_set_time_zone_restarts_one_node_in_its_own_zone(make_cluster) -> None:
    c = make_cluster(3)
    assert "time-zones" in c.capabilities
    execute(c.urls[0], ["CREATE TABLE tz (node TEXT, d REAL)"])
    old_pid = c.node("n2").pid
    c.set_time_zone("n2", zonefile.fixed(19800))  # returns once n2 answers again
    n2 = c.node("n2")
    zone = c.directory / "n2" / "zone.tzif"
    assert n2.pid != old_pid and process_environ(n2.pid)["TZ"] == str(zone)
    assert probe_node(n2.url).ready and c.wait_for_leader(30)
    # each node rewrites the writes it receives in its own zone: they now disagree
    assert abs(_local_minus_utc(n2.url, "n2") - 19800) < 2.0
    assert abs(_local_minus_utc(c.node("n1").url, "n1")) < 2.0
    inode = zone.stat().st_ino
    c.set_time_zone("n2", zonefile.fixed(-3600))
    assert zone.stat().st_ino == inode  # rewritten in place (a bind mount would see it)
    assert abs(_local_minus_utc(c.node("n2").url, "n2") + 3600) < 2.0
    c.set_time_zone("n2", None)
    assert process_environ(c.node("n2").pid)["TZ"] == "UTC"
    assert abs(_local_minus_utc(c.node("n2").url, "n2")) < 2.0
    c.kill("n3")  # a killed node keeps its zone for its restart
    c.set_time_zone("n3", zonefile.fixed(7200))
    c.restart("n3")
    c.wait_for_leader(30)
    assert abs(_local_minus_utc(c.node("n3").url, "n3") - 7200) < 2.0
    with pytest.raises(ClusterError, match="TZif file's bytes"):
        c.set_time_zone("n1", b"Europe/Berlin")


def test_external_cluster_sees_the_same_leader(cluster) -> None:
    ext = ExternalCluster(cluster.urls)
    lead = ext.wait_for_leader(30)
    assert lead.url == cluster.wait_for_leader(30).url
    assert {n.id for n in ext.nodes()} == {n.id for n in cluster.nodes()}
    with pytest.raises(ClusterError, match="other than"):
        ext.wait_for_leader(0.3, exclude=[lead.id])


class _Broken(LocalCluster):
    node_module = "harness.no_such_node"  # python -m exits at once: a node that dies at start


def test_node_dying_at_start_is_reported_with_its_log_and_cleaned_up(tmp_path: Path) -> None:
    with pytest.raises(ClusterError) as info:
        _Broken.start(nodes=3, directory=tmp_path / "c", timeout=30)
    message = str(info.value)
    assert "died" in message and "No module named harness.no_such_node" in message
    assert not [p for p, d in our_processes() if d == str(tmp_path / "c")]


def test_start_picks_new_ports_when_one_is_taken(tmp_path: Path, monkeypatch) -> None:
    if os.environ.get("RQLITE_URLS"):
        pytest.skip("starts its own cluster")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        calls = []
        real = local.free_ports

        def first_one_busy(count: int, host: str = "127.0.0.1") -> list[int]:
            ports = real(count, host)
            calls.append(ports)
            return [busy, *ports[1:]] if len(calls) == 1 else ports

        monkeypatch.setattr(local, "free_ports", first_one_busy)
        c = LocalCluster.start(nodes=1, directory=tmp_path / "c", timeout=30)
        try:
            assert len(calls) == 2 and c.nodes()[0].url != f"http://127.0.0.1:{busy}"
            log = (tmp_path / "c" / "n1" / "node.log").read_text()
            assert "already in use" not in log.lower(), "the failed attempt's files are gone"
        finally:
            c.stop()


def test_every_node_can_take_a_time_zone_at_once(make_cluster) -> None:
    import threading

    c = make_cluster(3)
    execute(c.urls[0], ["CREATE TABLE tz (node TEXT, d REAL)"])
    errors: list[Exception] = []

    def one(node_id: str) -> None:
        try:
            c.set_time_zone(node_id, zonefile.fixed(-7200))
        except Exception as exc:  # a node restarting beside it is not a death
            errors.append(exc)

    for _ in range(3):  # each node's wait must not take another's restart for a death
        threads = [threading.Thread(target=one, args=(n.id,)) for n in c.nodes()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
    c.wait_for_leader(30)
    for n in c.nodes():
        assert abs(_local_minus_utc(n.url, n.id) + 7200) < 2.0, n.id
