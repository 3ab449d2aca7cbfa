"""The pure partition-rule builders: who may reach whom, and the exact iptables argv."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.cluster.partition import CHAIN, apply_rules, blocked_peers, heal_rules, normalise

N3 = ["n1", "n2", "n3"]
N5 = ["n1", "n2", "n3", "n4", "n5"]
ADDR5 = {n: f"127.77.9.{10 + i}" for i, n in enumerate(N5, 1)}


def test_isolate_one_of_three() -> None:
    assert blocked_peers([["n1"], ["n2", "n3"]], N3) == {
        "n1": ["n2", "n3"],
        "n2": ["n1"],
        "n3": ["n1"],
    }


def test_majority_minority_of_five() -> None:
    blocked = blocked_peers([["n1", "n2"], ["n3", "n4", "n5"]], N5)
    assert blocked["n1"] == ["n3", "n4", "n5"]
    assert blocked["n4"] == ["n1", "n2"]


def test_bridge_of_five_leaves_the_bridge_node_unblocked() -> None:
    blocked = blocked_peers([["n1", "n2", "n3"], ["n3", "n4", "n5"]], N5)
    assert blocked["n3"] == []
    assert blocked["n1"] == ["n4", "n5"]
    assert blocked["n5"] == ["n1", "n2"]
    rules = apply_rules([["n1", "n2", "n3"], ["n3", "n4", "n5"]], ADDR5)
    assert "n3" not in rules and set(rules) == {"n1", "n2", "n4", "n5"}


def test_apply_rules_exact_argv_for_isolated_node() -> None:
    addr = {"n1": "127.77.9.11", "n2": "127.77.9.12", "n3": "127.77.9.13"}
    rules = apply_rules([["n1"], ["n2", "n3"]], addr)
    ipt = ["iptables", "-w", "5"]
    assert rules["n1"] == [
        [*ipt, "-N", CHAIN],
        [*ipt, "-A", CHAIN, "-s", "127.77.9.12", "-j", "DROP"],
        [*ipt, "-A", CHAIN, "-d", "127.77.9.12", "-j", "DROP"],
        [*ipt, "-A", CHAIN, "-s", "127.77.9.13", "-j", "DROP"],
        [*ipt, "-A", CHAIN, "-d", "127.77.9.13", "-j", "DROP"],
        [*ipt, "-I", "INPUT", "1", "-j", CHAIN],
        [*ipt, "-I", "OUTPUT", "1", "-j", CHAIN],
    ]
    assert rules["n2"][1] == [*ipt, "-A", CHAIN, "-s", "127.77.9.11", "-j", "DROP"]


def test_heal_removes_exactly_the_jumps_and_the_chain() -> None:
    ipt = ["iptables", "-w", "5"]
    assert heal_rules(["n2"]) == {
        "n2": [
            [*ipt, "-D", "INPUT", "-j", CHAIN],
            [*ipt, "-D", "OUTPUT", "-j", CHAIN],
            [*ipt, "-F", CHAIN],
            [*ipt, "-X", CHAIN],
        ]
    }
    assert heal_rules([], iptables="iptables-legacy") == {}


def test_custom_binary_and_chain() -> None:
    rules = apply_rules([["n1"], ["n2"]], {"n1": "a", "n2": "b"}, iptables="ipt", chain="X")
    assert rules["n1"][0] == ["ipt", "-w", "5", "-N", "X"]


@pytest.mark.parametrize(
    ("components", "message"),
    [
        ([["n1"], ["n2", "n9"]], "unknown node 'n9'"),
        ([["n1"], []], "component is empty"),
        ([["n1", "n2", "n3"]], "at least two components"),
        ([["n1"], ["n2"]], r"\['n3'\] are in no component"),
        ("n1", "list of lists"),
        (["n1", "n2"], "list of node ids"),
    ],
)
def test_bad_components_name_the_problem(components: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        normalise(components, N3)  # type: ignore[arg-type]


@given(st.lists(st.lists(st.sampled_from(N5), min_size=1, unique=True), min_size=2, max_size=4))
def test_reachability_is_symmetric_and_matches_shared_components(comps: list[list[str]]) -> None:
    listed = {n for c in comps for n in c}
    nodes = [n for n in N5 if n in listed]
    blocked = blocked_peers(comps, nodes)
    for a, b in itertools.permutations(nodes, 2):
        shares = any(a in c and b in c for c in comps)
        assert (b in blocked[a]) == (not shares)
        assert (b in blocked[a]) == (a in blocked[b])
