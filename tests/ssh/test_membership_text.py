"""The SSH backend's membership without hosts (pure, fast): the wipe's shell text, the
ids new nodes get (the spare hosts' names), the refusal of a grow beyond the inventory,
and what the state file keeps of removed nodes."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from harness.cluster.ssh.cluster import RemoteNode
from harness.cluster.ssh.inventory import Host, Inventory
from harness.cluster.ssh.membership import SshMembership, grow_refusal, wipe_data

RUN = "abcd1234"


def test_wipe_empties_only_the_data_folder_of_this_run_and_keeps_it(tmp_path: Path) -> None:
    run = tmp_path / "a b" / f"rqueue-ssh-{RUN}"
    data = run / "data"
    (data / "raft").mkdir(parents=True)
    (data / "db.sqlite").write_text("x")
    (data / ".hidden").write_text("x")
    (run / "node.log").write_text("kept")
    (tmp_path / "a b" / "beside").write_text("kept")
    for _ in range(2):  # twice: emptying an empty folder succeeds too
        subprocess.run(["sh", "-c", wipe_data(f"{run}/", RUN)], check=True)
        assert data.is_dir() and list(data.iterdir()) == []
    assert (run / "node.log").read_text() == (tmp_path / "a b" / "beside").read_text() == "kept"
    subprocess.run(
        ["sh", "-c", wipe_data(str(tmp_path / "x" / f"rqueue-ssh-{RUN}"), RUN)], check=True
    )
    for other in ("/var/tmp/rq", "/var/tmp/rq/rqueue-ssh-other", "/", ""):
        with pytest.raises(ValueError, match="not the run folder"):
            wipe_data(other, RUN)


def test_grow_refusal_is_one_line() -> None:
    assert (
        grow_refusal(3, 3)
        == "grow needs a spare host: the inventory has 3 hosts, the cluster uses 3"
    )
    assert grow_refusal(5, 3, 3) == (
        "grow needs 3 spare hosts: the inventory has 5 hosts, the cluster uses 3"
    )


class Hosts(SshMembership):
    """The membership mixin over an inventory of ``n`` hosts, the first ``used`` running."""

    def __init__(self, names: list[str], used: int) -> None:
        hosts = [Host(n, f"10.0.0.{i}", "/d") for i, n in enumerate(names, 1)]
        self.inventory = Inventory(Path("inv.toml"), tuple(hosts[:used]))
        self.spares = tuple(hosts[used:])
        self.run, self._lock = RUN, threading.RLock()
        self._nodes = {
            h.name: RemoteNode(h, f"/d/rqueue-ssh-{RUN}", state="running") for h in hosts[:used]
        }


def test_new_nodes_are_the_spare_hosts_in_inventory_order() -> None:
    c = Hosts(["db1", "db2", "db3", "db4", "db5"], 3)
    assert c.new_node_ids(["db1", "db2", "db3"], 2) == ["db4", "db5"]
    assert c.new_node_ids(["db1", "db2", "db3"], 3) == ["db4", "db5"]
    assert c.grow_problem(2) is None
    assert c.grow_problem(3) == (
        "grow needs 3 spare hosts: the inventory has 5 hosts, the cluster uses 3"
    )
    assert [h.name for h in c.all_hosts] == ["db1", "db2", "db3", "db4", "db5"]


def test_a_spare_host_that_left_comes_back_first_and_a_removed_member_is_kept() -> None:
    c = Hosts(["n1", "n2", "n3", "n4", "n5"], 3)
    n4 = RemoteNode(c.spares[0], f"/d/rqueue-ssh-{RUN}", state="removed")
    n2 = c._nodes["n2"]
    n2.state = "removed"
    c._nodes = {k: v for k, v in c._nodes.items() if k != "n2"}
    c._removed = {"n4": n4, "n2": n2}
    assert c.new_node_ids([], 2) == ["n4", "n5"]  # n2's host waits for n2
    assert [n.host.name for n in c.used_nodes()] == ["n1", "n3", "n4", "n2"]
    state = c.membership_state()
    assert state["spares"] == ["n4", "n5"]
    assert state["removed"]["n4"] == {"dir": f"/d/rqueue-ssh-{RUN}", "pid": None, "join": ""}
    assert c._joiner(None).host.name == "n2"  # a removed node first (sorted)
    assert c._joiner("n5").host.name == "n5" and c._joiner("n5").state == "new"
    with pytest.raises(Exception, match="cannot add node n1: it is a member"):
        c._joiner("n1")
    with pytest.raises(Exception, match=r"no spare host of that name \(spare: n5\)"):
        c._joiner("n9")


def test_without_a_spare_host_a_new_node_is_refused_in_one_line() -> None:
    c = Hosts(["n1", "n2", "n3"], 3)
    for asked in (None, "n4"):
        with pytest.raises(Exception) as err:
            c._joiner(asked)
        assert str(err.value) == (
            "grow needs a spare host: the inventory has 3 hosts, the cluster uses 3"
        )
    assert c.grow_problem(1) == grow_refusal(3, 3, 1)
