"""The SSH backend on local test hosts: a cluster started over SSH, broken (kill,
restart, pause, partition, heal, clock skew) and stopped; the CLI's cluster commands; the
sweep after a crashed run. Every test leaves the hosts clean (the fixture checks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from harness import zonefile
from harness.cluster.base import probe_node
from harness.cluster.ssh.cluster import STATE_FILE, SshCluster
from harness.cluster.ssh.session import _running
from tests.ssh.conftest import SshTestHosts

pytestmark = [pytest.mark.slow, pytest.mark.root]
ROOT = Path(__file__).resolve().parents[2]


def _harness(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "harness", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180)


def _rules(hosts: SshTestHosts, name: str) -> list[str]:
    out = subprocess.run(
        ["ip", "netns", "exec", hosts.netns(name), "iptables", "-S"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [r for r in out.splitlines() if "rqueue-ssh:" in r]


def test_up_kill_restart_pause_partition_heal_down(ssh_hosts: SshTestHosts, tmp_path: Path) -> None:
    cluster = SshCluster.start(ssh_hosts.inventory_path, 3, tmp_path / "c", timeout=90)
    try:
        assert cluster.capabilities == {
            "kill",
            "pause",
            "partitions",
            "clock-skew",
            "time-zones",
            "links",
            "membership",
        }  # no disk: started without disk_mb
        lead = cluster.wait_for_leader(60)
        cluster.kill(lead.id)
        assert probe_node(lead.url, 1.0).error  # killed: nobody answers there
        other = cluster.wait_for_leader(60, all_ready=False, exclude=[lead.id])
        cluster.restart(lead.id)
        cluster.wait_for_leader(60)

        cluster.pause(other.id)
        assert probe_node(other.url, 1.0).error  # stopped: its socket accepts, nobody reads
        cluster.resume(other.id)
        cluster.wait_for_leader(60)

        lead = cluster.wait_for_leader(60)
        rest = [n.id for n in cluster.nodes() if n.id != lead.id]
        cluster.partition([[lead.id], rest])
        assert _rules(ssh_hosts, lead.id) and _rules(ssh_hosts, rest[0])
        cluster.wait_for_leader(60, all_ready=False, exclude=[lead.id])
        # the harness still reaches the isolated host over SSH and its node over HTTP
        assert cluster.sessions[lead.id].run("echo still here").out == "still here\n"
        assert probe_node(lead.url, 2.0).error is None
        cluster.heal()
        assert [r for n in ("n1", "n2", "n3") for r in _rules(ssh_hosts, n)] == []
        cluster.wait_for_leader(60)

        cluster.set_clock_offset("n2", 3600.0)
        node_dir = cluster._nodes["n2"].dir
        assert Path(node_dir, "clock-offset").read_text() == "3600.0\n"

        cluster.set_time_zone("n3", zonefile.fixed(5 * 3600))  # restarts n3 in UTC+5
        n3 = cluster._nodes["n3"]
        environ = Path(f"/proc/{n3.pid}/environ").read_bytes().split(b"\0")
        assert f"TZ={n3.dir}/zone.tzif".encode() in environ
        assert Path(n3.dir, "zone.tzif").read_bytes() == zonefile.fixed(5 * 3600)
    finally:
        cluster.stop()
    for name in ("n1", "n2", "n3"):
        log = (tmp_path / "c" / name / "node.log").read_text()
        assert log.startswith(f"--- starting {name}")
        assert "data:" in (tmp_path / "c" / name / "data-listing.txt").read_text()
    assert not (tmp_path / "c" / STATE_FILE).exists()


def test_cluster_cli_up_urls_status_down(ssh_hosts: SshTestHosts, tmp_path: Path) -> None:
    inv, d = str(ssh_hosts.inventory_path), str(tmp_path / "c")
    up = _harness("cluster", "up", "--backend", "ssh", "--inventory", inv, "--dir", d)
    assert up.returncode == 0, up.stderr
    info = json.loads(up.stdout)
    expected = ",".join(h.url for h in ssh_hosts.inventory.hosts)
    assert info["engine"] == "ssh" and info["urls"] == expected and info["leader"]
    urls = _harness("cluster", "urls", "--dir", d)
    assert urls.stdout.strip() == expected
    by_inventory = _harness("cluster", "urls", "--backend", "ssh", "--inventory", inv)
    assert by_inventory.stdout.strip() == expected
    status = _harness("cluster", "status", "--dir", d)
    assert status.returncode == 0 and json.loads(status.stdout)["leader"]
    with urllib.request.urlopen(f"{info['leader']}/status", timeout=5) as resp:
        assert resp.status == 200  # the nodes outlived `cluster up`
    down = _harness("cluster", "down", "--dir", d)
    assert down.returncode == 0, down.stderr
    assert (tmp_path / "c" / "n1" / "node.log").exists()


def test_down_with_the_inventory_sweeps_what_a_crashed_run_left(
    ssh_hosts: SshTestHosts, tmp_path: Path
) -> None:
    """A run that died without stopping: its nodes, rules and folders stay on the hosts
    until `cluster down --backend ssh --inventory` removes them by their tags."""
    cluster = SshCluster.start(ssh_hosts.inventory_path, 3, tmp_path / "c", timeout=90)
    cluster.partition([["n1"], ["n2", "n3"]])
    cluster.close()  # the harness "crashed": nothing was stopped
    assert _rules(ssh_hosts, "n1")
    assert list(ssh_hosts.dir.glob("n*/data/rqueue-ssh-*"))
    inv = str(ssh_hosts.inventory_path)
    down = _harness("cluster", "down", "--backend", "ssh", "--inventory", inv)
    assert down.returncode == 0, down.stderr
    removed = json.loads(down.stdout)["removed"]
    assert any(line.startswith("killed ") for line in removed["n1"])
    assert any("-D INPUT" in line for line in removed["n1"])
    # the fixture asserts that no node, rule or folder is left


def test_hosts_up_and_down_leave_nothing(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("SSH test hosts need root")
    d = tmp_path / "h"
    up = _harness("hosts", "up", "--count", "2", "--dir", str(d))
    if up.returncode != 0 and "openssh-server" in up.stderr:
        pytest.skip(up.stderr.strip())
    assert up.returncode == 0, up.stderr
    assert up.stdout == (d / "inventory.toml").read_text()
    state = json.loads((d / "hosts.json").read_text())
    pids = [h["sshd_pid"] for h in state["hosts"]]
    netns = [m["netns"] for m in state["network"]["members"].values()]
    down = _harness("hosts", "down", "--dir", str(d))
    assert down.returncode == 0, down.stderr
    assert not d.exists()
    assert not [p for p in pids if _running(p)]  # gone, or a zombie init has yet to reap
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [n for n in netns if n in listed]


def test_a_users_rqlited_on_the_hosts(ssh_hosts: SshTestHosts, tmp_path: Path) -> None:
    """``rqlited = "/path"``: the harness reads the binary's version on the host and gives
    it rqlited's flags. The binary here is the project's node behind rqlited's command
    line (the one the node image ships as ``rqlited``), since no rqlite release is on this
    machine: it answers ``-version`` and takes ``-node-id ... -join ... DATA`` as rqlited
    v10 does."""
    wrapper = tmp_path / "rqlited"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m harness.node "$@"\n')
    wrapper.chmod(0o755)
    text = ssh_hosts.inventory_path.read_text()
    inventory = ssh_hosts.write_inventory(
        "rqlited", text.replace('node = "project"', f'rqlited = "{wrapper}"')
    )
    cluster = SshCluster.start(inventory, 3, tmp_path / "c", timeout=90)
    try:
        assert cluster.facts["n1"].rqlited_version == (10, 2, 7)
        argv = cluster._argv(cluster._nodes["n1"])
        assert argv[:3] == [str(wrapper), "-node-id", "n1"] and "-bootstrap-expect" in argv
        lead = cluster.wait_for_leader(60)
        cluster.kill(lead.id)
        cluster.wait_for_leader(60, all_ready=False, exclude=[lead.id])
        cluster.restart(lead.id)
        cluster.wait_for_leader(60)
    finally:
        cluster.stop()
    assert (tmp_path / "c" / "n1" / "node.log").read_text().startswith("--- starting n1")
