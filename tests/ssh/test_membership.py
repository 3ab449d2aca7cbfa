"""Membership over SSH on local test hosts (harness.cluster.ssh.membership): a follower
and the leader removed (stopped, data wiped) and joining again empty with the data
copied; a cluster on three of five hosts grown onto the two spare ones and shrunk back;
no spare host left: one line; ``cluster down --dir`` after changes; nothing left on any
host, spare ones included (the fixtures check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cluster.base import ClusterError
from harness.cluster.ssh.cluster import STATE_FILE, SshCluster
from harness.cluster.ssh.session import _running
from tests.cluster.helpers import execute, rows, wait_until
from tests.ssh.conftest import SshTestHosts

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]


def _run_folder(hosts: SshTestHosts, name: str) -> Path:
    (folder,) = (hosts.dir / name / "data").glob("rqueue-ssh-*")
    return folder


def _url(c: SshCluster, node_id: str) -> str:
    return next(n.url for n in c.nodes() if n.id == node_id)


def _copy(url: str, expected: list[list[int]]) -> None:
    wait_until(lambda: rows(url, "SELECT x FROM t", level="none") == expected, 60, f"{url}'s copy")


def test_remove_a_follower_and_the_leader_and_they_rejoin_empty(
    ssh_hosts: SshTestHosts, tmp_path: Path
) -> None:
    c = SshCluster.start(ssh_hosts.inventory_path, 3, tmp_path / "c", timeout=90)
    try:
        assert "membership" in c.capabilities and c.spares == ()
        lead = c.wait_for_leader(60)
        execute(lead.url, [["CREATE TABLE t (x INTEGER)"], ["INSERT INTO t VALUES (1)"]])
        follower = next(n for n in c.nodes() if n.id != lead.id)
        pid = c._nodes[follower.id].pid
        c.remove_node(follower.id)
        assert follower.id not in c.members() and follower.id not in [n.id for n in c.nodes()]
        assert pid is not None and not _running(pid), "the removed node is stopped"
        folder = _run_folder(ssh_hosts, follower.id)
        assert list((folder / "data").iterdir()) == [] and (folder / "node.log").is_file()
        state = json.loads((tmp_path / "c" / STATE_FILE).read_text())
        assert follower.id in state["removed"] and follower.id not in state["nodes"]
        with pytest.raises(ClusterError, match="no node"):
            c.kill(follower.id)

        execute(lead.url, [["INSERT INTO t VALUES (2)"]])
        assert c.add_node() == follower.id  # a removed node's host comes back first
        assert c.members() == ["n1", "n2", "n3"]
        _copy(follower.url, [[1], [2]])

        c.remove_node(lead.id)
        new = c.wait_for_leader(60)
        assert new.id != lead.id and lead.id not in c.members()
        execute(new.url, [["INSERT INTO t VALUES (3)"]])
        assert c.add_node(lead.id) == lead.id
        assert c.members() == ["n1", "n2", "n3"]
        _copy(lead.url, [[1], [2], [3]])

        with pytest.raises(ClusterError) as err:  # three hosts, three members
            c.add_node()
        assert str(err.value) == (
            "grow needs a spare host: the inventory has 3 hosts, the cluster uses 3"
        )
        assert c.grow_problem(2) == (
            "grow needs 2 spare hosts: the inventory has 3 hosts, the cluster uses 3"
        )
    finally:
        c.stop()
    assert not list(ssh_hosts.dir.glob("n*/data/rqueue-ssh-*"))


def test_grow_onto_the_spare_hosts_and_shrink_back(
    ssh_hosts5: SshTestHosts, tmp_path: Path
) -> None:
    d = tmp_path / "c"
    c = SshCluster.start(ssh_hosts5.inventory_path, 3, d, timeout=90)
    try:
        assert [h.name for h in c.spares] == ["n4", "n5"]
        assert not list(ssh_hosts5.dir.glob("n[45]/data/rqueue-ssh-*")), "spares untouched"
        lead = c.wait_for_leader(60)
        execute(lead.url, [["CREATE TABLE t (x INTEGER)"], ["INSERT INTO t VALUES (1)"]])
        ids = c.new_node_ids([n.id for n in c.nodes()], 2)
        assert ids == ["n4", "n5"] and c.grow_problem(2) is None
        assert [c.add_node(i) for i in ids] == ids
        assert c.members() == ["n1", "n2", "n3", "n4", "n5"]
        _copy(_url(c, "n5"), [[1]])
        with pytest.raises(ClusterError) as err:
            c.add_node()
        assert str(err.value) == (
            "grow needs a spare host: the inventory has 5 hosts, the cluster uses 5"
        )
        for i in ids:
            c.remove_node(i)
        assert c.members() == ["n1", "n2", "n3"] == [n.id for n in c.nodes()]
        assert list((_run_folder(ssh_hosts5, "n4") / "data").iterdir()) == []
        assert c.grow_problem(2) is None and c.grow_problem(3) is not None
        assert c.add_node() == "n4"  # a spare host used before comes back, empty
        _copy(_url(c, "n4"), [[1]])
        c.close()  # as `cluster up` leaves it: `cluster down --dir` must find every host
    except BaseException:
        c.stop()
        raise
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    down = subprocess.run(
        [sys.executable, "-m", "harness", "cluster", "down", "--dir", str(d)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert down.returncode == 0, down.stderr
    assert {p.name for p in d.iterdir() if p.is_dir()} >= {"n1", "n2", "n3", "n4", "n5"}
    assert not list(ssh_hosts5.dir.glob("n*/data/rqueue-ssh-*"))
