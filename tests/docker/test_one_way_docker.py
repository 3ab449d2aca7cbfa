"""One-way partitions on the Docker backend against a fake engine (pure): the rules run
in the sending containers' namespaces only, a heal removes them, and a container that
starts again during the cut gets the one-way rules back, not a two-way partition."""

from __future__ import annotations

import pytest

from harness.cluster import partition
from harness.cluster.base import ClusterError
from tests.docker.test_cluster_faults import by_pid, setup  # noqa: F401 (a fixture)


def test_one_way_runs_on_the_senders_and_heal_removes_it(setup: tuple) -> None:  # noqa: F811
    cluster, client, ran = setup
    cluster.partition_one_way([("n2", "n1"), ("n3", "n1")])
    ips = {c.spec.node_id: c.ip for c in client.by_name.values()}
    expected = partition.one_way_rules([("n2", "n1"), ("n3", "n1")], ips)
    assert set(expected) == {"n2", "n3"}
    pid = {n: client.get(f"rqueue-t1-{n}").pid for n in ("n1", "n2", "n3")}
    assert by_pid(ran) == {pid[n]: argvs for n, argvs in expected.items()}
    ran.clear()
    cluster.heal()
    assert by_pid(ran) == {pid[n]: a for n, a in partition.heal_rules(expected).items()}


def test_a_restart_during_a_one_way_cut_puts_the_same_cut_back(setup: tuple) -> None:  # noqa: F811
    cluster, client, ran = setup
    cluster.partition_one_way([("n1", "n2"), ("n1", "n3")])
    cluster.kill("n1")
    ran.clear()
    cluster.restart("n1")
    got = by_pid(ran)
    n1 = client.get("rqueue-t1-n1").pid
    assert set(got) == {n1}, "only the sender carries rules"
    drops = [a for a in got[n1] if "DROP" in a]
    assert [a[a.index("-A") + 2 :] for a in drops] == [
        ["-d", client.get(f"rqueue-t1-{n}").ip, "-j", "DROP"] for n in ("n2", "n3")
    ]


def test_bad_one_way_cuts_are_refused(setup: tuple) -> None:  # noqa: F811
    cluster, _, ran = setup
    with pytest.raises(ClusterError, match="bad one-way partition: unknown node 'n9'"):
        cluster.partition_one_way([("n9", "n1")])
    with pytest.raises(ClusterError, match="to itself"):
        cluster.partition_one_way([("n1", "n1")])
    assert ran == []
