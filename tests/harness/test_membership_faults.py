"""The membership fault kinds (harness.faults.membership) against a stand-in cluster:
what each removes and adds, how it is undone, and its parameters' errors."""

from __future__ import annotations

import random

import pytest

from harness.cluster.base import MEMBERSHIP, Cluster, ClusterError, NodeInfo
from harness.cluster.docker.cluster import DockerCluster
from harness.cluster.external.cluster import ExternalCluster
from harness.faults import Fault, Stage, kind_of
from harness.faults.capabilities import refusal
from harness.scenario import load_scenario, parse_scenario


class Members(Cluster):
    """Members that come and go as asked; ``fail_on`` names a node whose change raises."""

    engine = "fake"
    CAPABILITIES = frozenset({MEMBERSHIP})

    def __init__(self, n: int = 3, leader: str = "n1", fail_on: str | None = None) -> None:
        self.ids = [f"n{i}" for i in range(1, n + 1)]
        self.lead, self.fail_on, self.calls = leader, fail_on, []

    def nodes(self):
        return [NodeInfo(i, f"http://{i}") for i in self.ids]

    def wait_for_leader(self, timeout: float, **kw):
        return NodeInfo(self.lead, "")

    def remove_node(self, node_id: str) -> None:
        self.calls.append(("remove", node_id))
        if node_id == self.fail_on:
            raise ClusterError(f"cannot remove {node_id}")
        self.ids.remove(node_id)

    def add_node(self, node_id: str | None = None) -> str:
        self.calls.append(("add", node_id))
        if node_id == self.fail_on:
            raise ClusterError(f"cannot add {node_id}")
        self.ids.append(node_id)
        return node_id

    def kill(self, node_id):
        raise AssertionError("a membership fault kills nothing")

    restart = pause = resume = kill

    def stop(self):
        pass


class NoWorkload:
    claimer_names = ()


def window(kind: str, cluster: Members, seed: int = 1, **params):
    fault = Fault(kind, 0.0, 1.0, **params)
    stage = Stage(cluster, NoWorkload(), random.Random(seed))
    return kind_of(kind).begin(stage, dict(fault.params))


def test_remove_node_removes_a_follower_and_it_joins_again_under_its_id():
    c = Members()
    action = window("remove-node", c)
    (node,) = action.value["nodes"]
    assert (action.f, action.f_end) == ("remove", "rejoin") and node != "n1"
    action.act()
    assert node not in c.ids
    action.undo()
    assert c.calls == [("remove", node), ("add", node)] and sorted(c.ids) == ["n1", "n2", "n3"]


def test_remove_node_can_remove_the_leader():
    c = Members(leader="n2")
    action = window("remove-node", c, target="leader")
    assert action.value == {"nodes": ["n2"]}


def test_grow_adds_new_ids_and_removes_them_again():
    c = Members()
    action = window("grow", c)
    assert (action.f, action.f_end, action.value) == ("join", "remove", {"nodes": ["n4", "n5"]})
    action.act()
    assert c.ids == ["n1", "n2", "n3", "n4", "n5"]
    action.undo()
    assert c.ids == ["n1", "n2", "n3"]
    assert window("grow", Members(n=5), nodes=1).value == {"nodes": ["n6"]}


def test_shrink_removes_followers_down_to_a_bare_majority_and_adds_them_back():
    c = Members(n=5, leader="n3")
    action = window("shrink", c)
    removed = action.value["nodes"]
    assert len(removed) == 2 and "n3" not in removed
    action.act()
    assert len(c.ids) == 3 and "n3" in c.ids
    action.undo()
    assert sorted(c.ids) == ["n1", "n2", "n3", "n4", "n5"]
    assert len(window("shrink", Members(n=5), size=2).value["nodes"]) == 3
    with pytest.raises(ClusterError, match="cannot shrink 3 members to 3"):
        window("shrink", Members(), size=3)


def test_a_change_that_fails_half_way_undoes_the_ones_made():
    c = Members(fail_on="n5")
    action = window("grow", c)
    with pytest.raises(ClusterError, match="cannot add n5"):
        action.act()
    assert c.calls == [("add", "n4"), ("add", "n5"), ("remove", "n4")]
    assert c.ids == ["n1", "n2", "n3"]


def test_the_parameters_are_checked_naming_the_key():
    def doc(**fault):
        return {"description": "x", "nodes": 3, "faults": [{"start": 1, "duration": 2, **fault}]}

    with pytest.raises(ValueError, match="nodes"):
        parse_scenario("x", doc(kind="grow", nodes=1.5), "x.toml")
    with pytest.raises(ValueError, match="target"):
        parse_scenario("x", doc(kind="remove-node", target="all"), "x.toml")
    with pytest.raises(ValueError, match="size"):
        parse_scenario("x", doc(kind="shrink", size=-1), "x.toml")
    assert parse_scenario("x", doc(kind="shrink"), "x.toml").faults[0].params == (("size", 0),)


def test_the_scenarios_need_membership_which_the_local_and_docker_backends_have():
    assert load_scenario("remove-node").needs == {MEMBERSHIP}
    assert load_scenario("grow-shrink").needs == {MEMBERSHIP}
    assert MEMBERSHIP in DockerCluster.CAPABILITIES and not ExternalCluster.CAPABILITIES

    class Without(Members):
        CAPABILITIES = frozenset()

    assert refusal("grow-shrink", ["grow", "shrink"], Without()) == (
        "scenario grow-shrink removes and adds cluster members (grow, shrink): the fake "
        "backend cannot add or remove a cluster member"
    )
    assert refusal("grow-shrink", ["grow", "shrink"], Members()) is None


def test_grow_takes_the_ids_the_cluster_gives_and_is_refused_beyond_its_hosts():
    from harness.faults.capabilities import params_refusal

    class Hosts(Members):
        """Ids are host names; two spare hosts."""

        def new_node_ids(self, members, count):
            return ["db4", "db5"][:count]

        def grow_problem(self, count):
            return None if count <= 2 else "grow needs 3 spare hosts: the inventory has 5"

    c = Hosts()
    assert window("grow", c).value == {"nodes": ["db4", "db5"]}
    ok = load_scenario("grow-shrink")
    assert params_refusal("grow-shrink", ok.faults, c) is None
    three = parse_scenario(
        "x",
        {
            "description": "x",
            "nodes": 3,
            "faults": [{"kind": "grow", "start": 1, "duration": 2, "nodes": 3}],
        },
        "x.toml",
    )
    assert params_refusal("x", three.faults, c) == (
        "scenario x runs grow (nodes=3), which this cluster cannot: grow needs 3 spare "
        "hosts: the inventory has 5"
    )
    assert Members().grow_problem(100) is None  # a backend without a bound
