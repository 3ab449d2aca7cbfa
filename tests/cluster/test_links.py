"""The pure builders of degraded links (harness.cluster.links): the exact iptables and tc
argv, and what LinkFaults runs where, through a recording runner."""

from __future__ import annotations

import pytest

from harness.cluster.base import ClusterError
from harness.cluster.links import (
    CHAIN,
    HANDLE,
    NETEM_MISSING,
    LinkFaults,
    Shape,
    addresses_except,
    loss_heal_rules,
    loss_rules,
    rate_bits,
    shape_error,
    shape_heal_rules,
    shape_rules,
)
from harness.cluster.partition import CHAIN as PARTITION_CHAIN
from harness.cluster.partition import heal_rules

IPT = ["iptables", "-w", "5"]
TAG = ["-m", "comment", "--comment", "rqueue-links:c1"]
CHANCE = ["-m", "statistic", "--mode", "random", "--probability", "0.300000"]


def test_loss_rules_drop_a_share_of_the_packets_from_and_to_each_peer() -> None:
    assert loss_rules(["10.0.0.2", "10.0.0.3"], 0.3, "c1") == [
        [*IPT, "-N", CHAIN],
        [*IPT, "-A", CHAIN, "-s", "10.0.0.2", *CHANCE, *TAG, "-j", "DROP"],
        [*IPT, "-A", CHAIN, "-d", "10.0.0.2", *CHANCE, *TAG, "-j", "DROP"],
        [*IPT, "-A", CHAIN, "-s", "10.0.0.3", *CHANCE, *TAG, "-j", "DROP"],
        [*IPT, "-A", CHAIN, "-d", "10.0.0.3", *CHANCE, *TAG, "-j", "DROP"],
        [*IPT, "-I", "INPUT", "1", *TAG, "-j", CHAIN],
        [*IPT, "-I", "OUTPUT", "1", *TAG, "-j", CHAIN],
    ]


@pytest.mark.parametrize("rate", [0, -0.1, 1.5])
def test_a_loss_rate_is_a_probability_above_zero(rate: float) -> None:
    with pytest.raises(ValueError, match="a loss rate is a probability above 0"):
        loss_rules(["a"], rate, "c1")


def test_loss_heal_removes_exactly_the_tagged_jumps_and_the_chain() -> None:
    assert loss_heal_rules("c1") == [
        [*IPT, "-D", "INPUT", *TAG, "-j", CHAIN],
        [*IPT, "-D", "OUTPUT", *TAG, "-j", CHAIN],
        [*IPT, "-F", CHAIN],
        [*IPT, "-X", CHAIN],
    ]


def test_loss_and_partition_rules_never_touch_each_other() -> None:
    assert CHAIN != PARTITION_CHAIN
    partition_heal = [a for argvs in heal_rules(["n1"]).values() for a in argvs]
    assert not any(CHAIN in argv for argv in partition_heal)
    assert not any(PARTITION_CHAIN in argv for argv in loss_heal_rules("c1"))
    # a partition's jump has no comment: deleting the link's (tagged) jump cannot match it
    assert [*IPT, "-D", "INPUT", "-j", PARTITION_CHAIN] not in loss_heal_rules("c1")


@pytest.mark.parametrize(
    ("rate", "bits"),
    [("256kbit", 256_000), ("1mbit", 1_000_000), ("1.5mbit", 1_500_000), ("8bit", 8)],
)
def test_rates_as_tc_writes_them(rate: str, bits: int) -> None:
    assert rate_bits(rate) == bits


@pytest.mark.parametrize("rate", ["", "fast", "256", "256kbps", "1bit", "-1mbit", 256])
def test_a_rate_tc_would_not_take_is_refused(rate) -> None:
    with pytest.raises(ValueError, match="a rate as tc writes it"):
        rate_bits(rate)


def words(text: str) -> list[str]:
    return text.split()


def test_a_slow_link_is_a_tbf_root_qdisc_of_the_projects_handle() -> None:
    assert Shape("256kbit").mechanism == "tbf" and not Shape("1mbit").needs_netem
    assert shape_rules(Shape("256kbit")) == [
        words("tc qdisc add dev eth0 root handle 5151: tbf rate 256kbit burst 8192 latency 500ms")
    ]
    # the bucket holds 50 ms of a fast rate
    assert shape_rules(Shape("10mbit"))[0][-3] == "62500"


def test_a_delay_puts_netem_at_the_root_and_the_tbf_under_it() -> None:
    shape = Shape("1mbit", delay=50, jitter=10)
    assert shape.needs_netem and shape.mechanism == "netem+tbf"
    assert shape_rules(shape, device="eth1") == [
        words("tc qdisc add dev eth1 root handle 5151: netem delay 50ms 10ms"),
        words(
            "tc qdisc add dev eth1 parent 5151:1 handle 5152: tbf rate 1mbit burst 8192 "
            "latency 500ms"
        ),
    ]
    assert shape_rules(Shape("1mbit", delay=20))[0][-2:] == ["delay", "20ms"]


def test_shape_heal_deletes_the_root_qdisc_only_when_it_is_the_projects() -> None:
    assert shape_heal_rules() == [["tc", "qdisc", "del", "dev", "eth0", "root", "handle", HANDLE]]


def test_tc_refusing_netem_is_named() -> None:
    said = "tc qdisc add dev eth0 root handle 5151: netem delay 5ms failed (exit 2): " + (
        "Error: Specified qdisc kind is unknown."
    )
    assert shape_error(said).startswith(NETEM_MISSING)
    assert (
        shape_error("RTNETLINK answers:\n  No such device") == "RTNETLINK answers: No such device"
    )


class Recorder:
    """A runner that records (node, argv) and fails argv lists containing ``fail_on``."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.ran: list[tuple[str, list[str], bool]] = []
        self.fail_on = fail_on

    def __call__(self, node, argvs, check) -> None:
        for argv in argvs:
            self.ran.append((node, list(argv), check))
            if check and self.fail_on and self.fail_on in argv:
                raise ClusterError(f"{' '.join(argv)} failed: Error: no {self.fail_on}")

    def argvs(self, node: str) -> list[list[str]]:
        return [a for n, a, _ in self.ran if n == node]


ADDR = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}


def faults(run: Recorder, down: frozenset[str] = frozenset()) -> LinkFaults:
    return LinkFaults("c1", run, lambda n: addresses_except(ADDR, n), lambda n: n not in down)


def test_loss_is_healed_before_it_is_applied_and_healed_unchecked() -> None:
    run = Recorder()
    links = faults(run)
    links.set_loss("n1", 0.3)
    heal = loss_heal_rules("c1")
    assert run.argvs("n1") == heal + loss_rules(["10.0.0.2", "10.0.0.3"], 0.3, "c1")
    assert [c for _, a, c in run.ran if a in heal] == [False] * len(heal)
    assert links.loss == {"n1": 0.3} and run.argvs("n2") == []
    run.ran.clear()
    links.clear_loss("n1")
    assert run.argvs("n1") == heal and links.loss == {}


def test_a_failed_loss_is_healed_and_raised() -> None:
    run = Recorder(fail_on="OUTPUT")
    with pytest.raises(ClusterError, match="no OUTPUT"):
        faults(run).set_loss("n2", 0.5)
    assert run.argvs("n2")[-4:] == loss_heal_rules("c1")


def test_a_shape_tc_refuses_is_removed_and_named() -> None:
    run = Recorder(fail_on="netem")
    links = faults(run)
    with pytest.raises(ClusterError, match=r"cannot slow the links of n1: .*no netem"):
        links.set_shape("n1", Shape("1mbit", delay=5))
    assert run.argvs("n1")[-1] == shape_heal_rules()[0]


def test_faults_of_a_node_without_a_namespace_wait_for_reapply() -> None:
    run = Recorder()
    links = faults(run, down=frozenset({"n3"}))
    links.set_loss("n3", 0.4)
    links.set_shape("n3", Shape("256kbit"))
    assert run.ran == []  # nothing to run in: the container is stopped
    links._reachable = lambda n: True  # it starts again, in a new namespace
    links.reapply("n3")
    assert loss_rules(["10.0.0.1", "10.0.0.2"], 0.4, "c1")[-1] in run.argvs("n3")
    assert shape_rules(Shape("256kbit"))[0] in run.argvs("n3")
    links.forget()
    run.ran.clear()
    links.reapply("n3")
    assert run.ran == [] and links.loss == {} and links.shapes == {}
