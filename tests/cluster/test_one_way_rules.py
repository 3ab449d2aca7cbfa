"""The pure one-way partition builders: who may not send to whom, the exact iptables
argv for namespaces and containers, and the SSH backend's rule text."""

from __future__ import annotations

import pytest

from harness.cluster.partition import (
    CHAIN,
    heal_rules,
    one_way_drops,
    one_way_rules,
)
from harness.cluster.ssh import remote

N3 = ["n1", "n2", "n3"]
ADDR = {"n1": "127.77.9.11", "n2": "127.77.9.12", "n3": "127.77.9.13"}
IPT = ["iptables", "-w", "5"]


def test_drops_group_the_pairs_by_sender_in_node_order() -> None:
    cuts = [["n1", "n3"], ["n1", "n2"], ["n3", "n2"], ["n1", "n3"]]
    assert one_way_drops(cuts, N3) == {"n1": ["n2", "n3"], "n3": ["n2"]}


def test_the_leader_cannot_send_rules_sit_on_the_leader_only() -> None:
    rules = one_way_rules([("n1", "n2"), ("n1", "n3")], ADDR)
    assert list(rules) == ["n1"]
    assert rules["n1"] == [
        [*IPT, "-N", CHAIN],
        [*IPT, "-A", CHAIN, "-d", "127.77.9.12", "-j", "DROP"],
        [*IPT, "-A", CHAIN, "-d", "127.77.9.13", "-j", "DROP"],
        [*IPT, "-I", "INPUT", "1", "-j", CHAIN],
        [*IPT, "-I", "OUTPUT", "1", "-j", CHAIN],
    ]


def test_the_leader_cannot_hear_rules_sit_on_each_sender() -> None:
    rules = one_way_rules([("n2", "n1"), ("n3", "n1")], ADDR)
    assert set(rules) == {"n2", "n3"}
    for node in ("n2", "n3"):
        drops = [a for a in rules[node] if "DROP" in a]
        assert drops == [[*IPT, "-A", CHAIN, "-d", "127.77.9.11", "-j", "DROP"]]
    # no source match anywhere: packets to the sender (the reverse way) always pass, and
    # nothing matches by connection state, so a reply on the peer's connection dies too
    every = [x for argvs in rules.values() for a in argvs for x in a]
    assert "-s" not in every and "--state" not in every and "conntrack" not in every


def test_heal_removes_what_a_one_way_cut_added() -> None:
    rules = one_way_rules([("n2", "n1")], ADDR)
    heal = heal_rules(rules)["n2"]
    assert [*IPT, "-D", "OUTPUT", "-j", CHAIN] in heal
    assert heal[-2:] == [[*IPT, "-F", CHAIN], [*IPT, "-X", CHAIN]]


@pytest.mark.parametrize(
    ("cuts", "message"),
    [
        ([], "at least one"),
        ("n1n2", "list of \\(from, to\\) pairs"),
        ([["n1"]], "a \\(from, to\\) pair"),
        ([["n1", "n2", "n3"]], "a \\(from, to\\) pair"),
        (["n1"], "a \\(from, to\\) pair"),
        ([["n1", 2]], "a \\(from, to\\) pair"),
        ([["n1", "n9"]], "unknown node 'n9'"),
        ([["n2", "n2"]], "from 'n2' to itself"),
    ],
)
def test_bad_cuts_are_refused_naming_the_problem(cuts, message) -> None:
    with pytest.raises(ValueError, match=message):
        one_way_rules(cuts, ADDR)


def test_ssh_one_way_rules_drop_only_at_the_senders_output_on_node_ports() -> None:
    addresses = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}
    rules = remote.one_way_rules([("n1", "n2"), ("n1", "n3")], addresses, [4002, 4001], "ab12")
    assert rules == {
        "n1": [
            f"-I OUTPUT 1 -d {a} -p tcp -m multiport --ports 4001,4002 "
            "-m comment --comment rqueue-ssh:ab12 -j DROP"
            for a in ("10.0.0.2", "10.0.0.3")
        ]
    }
    with pytest.raises(ValueError, match="unknown node 'n4'"):
        remote.one_way_rules([("n4", "n1")], addresses, [4001], "ab12")
