"""What the SSH backend runs on a host to degrade links, as text (pure, fast): loss rules
and qdiscs that touch only node ports and the run's own objects, the preflight's
findings, and the sweep's recognition of the harness's qdiscs (real awk on sample text)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from harness.cluster.links import Shape
from harness.cluster.ssh import links, remote
from harness.cluster.ssh.cluster import SshCluster
from harness.cluster.ssh.inventory import Host
from harness.faults.capabilities import kinds_table

RUN = "abcd1234"


def _host(**kw: object) -> Host:
    return Host(**{"name": "n1", "address": "10.0.0.1", "data_dir": "/d", **kw})  # type: ignore[arg-type]


def test_loss_drops_only_node_ports_of_the_peers_in_the_runs_own_chain() -> None:
    text = links.loss_text(["10.0.0.2", "10.0.0.3"], [4002, 4001, 4001], 0.4, RUN)
    rules = [line for line in text.splitlines() if line.startswith(("-A", "-I"))]
    assert len(rules) == 6  # two peers, both ways, and the two jumps
    assert ":RQUEUE-LINKS-abcd1234 - [0:0]" in text
    for rule in rules:
        assert "--comment rqueue-ssh:links:abcd1234" in rule
        assert " 22" not in rule and "sport" not in rule and "dport" not in rule
    drops = [r for r in rules if r.endswith("-j DROP")]
    for rule in drops:
        assert rule.startswith("-A RQUEUE-LINKS-abcd1234 ")
        assert "-p tcp -m multiport --ports 4001,4002" in rule
        assert "-m statistic --mode random --probability 0.400000" in rule
    assert {r.split()[2] for r in drops} == {"-s", "-d"}
    assert "-I INPUT 1 -m comment --comment rqueue-ssh:links:abcd1234 -j RQUEUE-LINKS-" in text
    assert "iptables-restore -w 5 --noflush ||" in text  # all or nothing, healed on failure
    with pytest.raises(ValueError, match="probability above 0"):
        links.loss_text(["10.0.0.2"], [4001], 0.0, RUN)


def test_a_partitions_heal_and_a_loss_never_delete_each_others_rules() -> None:
    """The partition's heal greps ``--comment rqueue-ssh:<run>``; the loss's comment is
    not that, but still under the sweep's ``rqueue-ssh:``."""
    text = links.loss_text(["10.0.0.2"], [4001], 1.0, RUN)
    assert f"--comment {remote.COMMENT_PREFIX}{RUN}" not in text
    assert f"--comment {remote.COMMENT_PREFIX}" in text
    heal = links.loss_heal_text(RUN)
    assert "-D INPUT -m comment --comment rqueue-ssh:links:abcd1234 -j RQUEUE-LINKS-" in heal
    assert heal.endswith("-X RQUEUE-LINKS-abcd1234 2>/dev/null; true")
    assert "-F INPUT" not in heal and "-F OUTPUT" not in heal


def test_a_shape_classifies_only_node_ports_into_a_tbf_under_the_runs_htb() -> None:
    text = links.shape_text(Shape("256kbit"), ["10.0.0.2"], [4001, 4002], RUN, ["eth0"])
    assert links.handle(RUN) == "5abc:"
    assert "devs=eth0;" in text and 'tc qdisc add dev "$d" root handle 5abc: htb &&' in text
    assert "parent 5abc:1 handle 4151: tbf rate 256kbit burst 8192 latency 500ms" in text
    cmds = links.shape_commands(Shape("256kbit"), '"$d"', [4001, 4002], RUN)
    assert " && ".join(cmds) in text
    filters = [c for c in cmds if c.startswith("tc filter add")]
    assert len(filters) == 4  # two ports, each as source and as destination
    for f in filters:
        assert "match ip protocol 6 0xff" in f and f.endswith("0xffff flowid 5abc:1")
        assert " 22 " not in f
    assert "netem" not in text
    # removed first, and again (with tc's words on stderr) when a command fails
    assert text.count('$3 == "5abc:"') == 2 and 'echo "$out" >&2; exit 1' in text


def test_a_delay_puts_netem_above_the_tbf() -> None:
    text = links.shape_text(Shape("1mbit", 50, 10), ["10.0.0.2"], [4001], RUN, ["eth0", "eth1"])
    assert "parent 5abc:1 handle 4152: netem delay 50ms 10ms" in text
    assert "parent 4152:1 handle 4151: tbf rate 1mbit" in text
    assert "devs='eth0 eth1';" in text


def test_the_heal_deletes_only_the_runs_root_htb() -> None:
    heal = links.shape_heal_text(RUN)
    assert '$2 == "htb" && $3 == "5abc:" && $6 == "root"' in heal
    assert 'tc qdisc del dev "$d" root handle 5abc:' in heal
    assert "5abc" in links.cleanup_text(RUN) and "RQUEUE-LINKS-abcd1234" in links.cleanup_text(RUN)


def test_the_interfaces_are_found_on_the_host_the_first_time() -> None:
    text = links.shape_text(Shape("1mbit"), ["10.0.0.2", "10.0.0.3"], [4001], RUN)
    assert "devs=$({ ip -o route get 10.0.0.2; ip -o route get 10.0.0.3; } | awk" in text
    assert text.endswith("echo DEVICES $devs")
    assert links.read_devices("DEVICES eth0 eth1\n") == ["eth0", "eth1"]
    assert links.read_devices("") == []


@pytest.mark.skipif(shutil.which("sh") is None or shutil.which("awk") is None, reason="sh, awk")
def test_the_interface_of_each_peer_is_read_from_ip_route_get() -> None:
    """The discovery's awk on what ``ip -o route get`` prints (a route via a gateway too)."""
    text = links.shape_text(Shape("1mbit"), ["10.0.0.2"], [4001], RUN)
    awk = text.split("} | ", 1)[1].split(" | sort -u)", 1)[0]
    routes = (
        "10.0.0.2 dev eth0 src 10.0.0.1 uid 0 \\    cache \n"
        "10.0.0.3 via 10.0.0.254 dev eth1 src 10.0.1.1 uid 0 \\    cache \n"
    )
    out = subprocess.run(["sh", "-c", awk], input=routes, capture_output=True, text=True)
    assert out.stdout.split() == ["eth0", "eth1"]


@pytest.mark.skipif(shutil.which("awk") is None, reason="needs awk")
def test_the_sweep_recognises_the_harness_qdiscs_only() -> None:
    shown = "\n".join(
        [
            "qdisc noqueue 0: dev lo root refcnt 2",
            "qdisc htb 5abc: dev eth0 root refcnt 3 r2q 10 default 0",
            "qdisc tbf 4151: dev eth0 parent 5abc:1 rate 256Kbit burst 8Kb lat 500ms",
            "qdisc htb 5123: dev eth1 root refcnt 3 r2q 10 default 0",  # a user's: no child
            "qdisc htb 1: dev eth2 root refcnt 3 r2q 10 default 0",
            "qdisc tbf 4151: dev eth2 parent 1:1 rate 1Mbit burst 8Kb lat 500ms",
            "qdisc htb 5def: dev eth3 root refcnt 3 r2q 10 default 0",
            "qdisc netem 4152: dev eth3 parent 5def:1 limit 1000 delay 50ms",
            "qdisc tbf 4151: dev eth3 parent 4152:1 rate 1Mbit burst 8Kb lat 500ms",
        ]
    )
    found = subprocess.run(
        ["awk", links.QDISC_AWK], input=shown + "\n", capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert sorted(filter(None, found)) == ["eth0 5abc:", "eth3 5def:"]
    sweep = links.sweep_text()
    assert "/^RQUEUE-LINKS-[0-9a-f]+$/" in sweep and "--comment rqueue-ssh:links:$run" in sweep


def test_the_probe_reads_what_links_need() -> None:
    [line] = links.probe_lines(_host())
    assert line.startswith("out=$(unshare -n sh -c ")  # a scratch namespace: nothing left
    assert "-m statistic" in line and "netem delay 1ms" in line and " u32 " in line
    assert links.probe_lines(_host(sudo=True))[0].startswith("out=$(sudo -n unshare -n ")
    ok = {"UID": "0", "LINKS": "ok", "NETEM": "ok"}
    assert links.read_probe(_host(), ok) == (None, None)
    unknown = {**ok, "NETEM": "Error: Specified qdisc kind is unknown."}
    links_ok, netem = links.read_probe(_host(), unknown)
    assert links_ok is None and netem is not None
    assert netem.startswith("host n1: a link delay needs netem: the kernel's netem qdisc")
    bad = {**ok, "LINKS": "tc (iproute2) is not installed"}
    assert links.read_probe(_host(), bad)[0] == (
        "host n1 cannot degrade links: tc (iproute2) is not installed"
    )
    assert links.read_probe(_host(user="ops"), {"UID": "1000"})[0] == (
        "host n1: ops is not root and sudo = false, so it cannot run tc"
    )


def test_the_ssh_backend_lists_the_link_kinds() -> None:
    rows = {kind: backends for kind, _, backends in kinds_table({"ssh": SshCluster.CAPABILITIES})}
    assert rows["lossy-link"] == ["ssh"] and rows["slow-link"] == ["ssh"]
