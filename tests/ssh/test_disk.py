"""disk-full over SSH: each node's data on an ext4 of its own on its host (a loop device the
run owns), a full leader that steps down without acknowledging what it lost, its room back
after free, and nothing left (mount, loop device, run folder) after stop or, for a run
that crashed, after ``cluster down --backend ssh --inventory``. Then the shell text,
pure: what it touches and only that."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cluster.base import DISK, ClusterError
from harness.cluster.ssh import disk
from harness.cluster.ssh.cluster import SshCluster
from harness.cluster.ssh.inventory import Host, Inventory
from harness.cluster.ssh.preflight import HostFacts, probe_script, read_probe
from harness.cluster.ssh.session import Sessions
from harness.faults.capabilities import refusal
from tests.cluster.helpers import execute, full_leader_loses_no_ack, rows, wait_until
from tests.ssh.conftest import SshTestHosts

ROOT = Path(__file__).resolve().parents[2]


def _left(hosts: SshTestHosts) -> list[str]:
    """Mounts and loop devices of any run still on the test hosts (their data folders)."""
    out = []
    for h in hosts.inventory.hosts:
        out += subprocess.run(
            ["sh", "-c", disk.leftovers_text(h.data_dir)], capture_output=True, text=True
        ).stdout.split("\n")
    return [line for line in out if line.strip()]


def _host_mounts(cluster: SshCluster) -> dict[str, str]:
    """Per node, the filesystem type and source of its data folder, as its host sees it."""
    return {
        name: cluster.sessions[name]
        .run(f"findmnt -n -o FSTYPE,SOURCE -M {n.dir}/data", check=False)
        .out
        for name, n in cluster._nodes.items()
    }


@pytest.mark.slow
@pytest.mark.root
def test_a_full_leader_on_a_host_and_stop_leaves_nothing(
    ssh_hosts: SshTestHosts, tmp_path: Path
) -> None:
    c = SshCluster.start(ssh_hosts.inventory_path, 3, tmp_path / "c", timeout=90, disk_mb=32)
    try:
        assert DISK in c.capabilities and c.capability_problem(DISK) is None
        for name, mount in _host_mounts(c).items():
            assert mount.split()[:1] == ["ext4"] and "/dev/loop" in mount, (name, mount)
        full_leader_loses_no_ack(c, elect=30, catch_up=60)
        execute(c.wait_for_leader(30).url, [["INSERT INTO t VALUES (?)", 6000]])  # room again
    finally:
        c.stop()
    assert _left(ssh_hosts) == []
    # the fixture asserts that no run folder, node or rule is left


@pytest.mark.slow
@pytest.mark.root
def test_a_removed_node_keeps_its_disk_emptied_and_joins_back_on_it(
    ssh_hosts: SshTestHosts, tmp_path: Path
) -> None:
    """chaos over SSH drew a shrink on a cluster with disks: ``rm -rf`` of the mounted data
    folder failed (``Device or resource busy``), the removal with it, and the node was
    gone for good."""
    c = SshCluster.start(ssh_hosts.inventory_path, 3, tmp_path / "c", timeout=90, disk_mb=32)
    try:
        lead = c.wait_for_leader(30)
        execute(lead.url, [["CREATE TABLE t (x INTEGER)"], ["INSERT INTO t VALUES (1)"]])
        victim = next(n.id for n in c.nodes() if n.id != lead.id)
        mounts = _host_mounts(c)
        c.remove_node(victim)
        folder = c._removed[victim].dir
        kept = c.sessions[victim].run(f"findmnt -n -o FSTYPE,SOURCE -M {folder}/data").out
        assert kept == mounts[victim], "its disk stays mounted for its return"
        assert c.sessions[victim].run(f"ls -A {folder}/data").out.strip() == "", "emptied"
        execute(c.wait_for_leader(30).url, [["INSERT INTO t VALUES (2)"]])
        assert c.add_node(victim) == victim
        assert _host_mounts(c)[victim] == mounts[victim]
        back = next(n.url for n in c.nodes() if n.id == victim)
        wait_until(lambda: rows(back, "SELECT x FROM t", level="none") == [[1], [2]], 60, "copy")
    finally:
        c.stop()
    assert _left(ssh_hosts) == []


@pytest.mark.slow
@pytest.mark.root
def test_down_with_the_inventory_releases_a_crashed_runs_disks(
    ssh_hosts: SshTestHosts, tmp_path: Path
) -> None:
    c = SshCluster.start(ssh_hosts.inventory_path, 3, tmp_path / "c", timeout=90, disk_mb=16)
    c.fill_disk("n2")
    c.close()  # the harness "crashed": nodes, mounts and loop devices stay
    assert len(_left(ssh_hosts)) >= 3
    inv = str(ssh_hosts.inventory_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "harness", "cluster", "down", "--backend", "ssh"]
    down = subprocess.run(
        [*argv, "--inventory", inv], capture_output=True, text=True, env=env, timeout=180
    )
    assert down.returncode == 0, down.stderr
    removed = json.loads(down.stdout)["removed"]
    assert any(line.startswith("unmounted ") for line in removed["n1"]), removed
    assert _left(ssh_hosts) == []


@pytest.mark.slow
@pytest.mark.root
def test_without_disk_mb_there_is_no_disk_to_fill(ssh_hosts: SshTestHosts, tmp_path: Path) -> None:
    c = SshCluster.start(ssh_hosts.inventory_path, 1, tmp_path / "c", timeout=90)
    try:
        assert DISK not in c.capabilities
        assert c.capability_problem(DISK) == (
            "this cluster was started without disks of its own (disk_mb)"
        )
        assert _host_mounts(c)["n1"] == ""  # a folder on the host's own filesystem
    finally:
        c.stop()


# -- the shell text, pure -------------------------------------------------------------------
def _host(**kw: object) -> Host:
    return Host(**{"name": "n1", "address": "10.0.0.1", "data_dir": "/d", **kw})  # type: ignore[arg-type]


def test_make_allocates_attaches_and_mounts_on_the_runs_data() -> None:
    text = disk.make_text("/d x/rqueue-ssh-ab12/", 64)
    assert text.startswith("r='/d x/rqueue-ssh-ab12'; ")
    assert 'fallocate -l 64MiB "$r/disk.img"' in text  # allocated, not sparse
    assert "dd if=/dev/zero" in text  # where the filesystem has no fallocate
    assert 'dev=$(losetup -f --show "$r/disk.img")' in text
    assert "mkfs.ext4 -q -F -m 0" in text and 'mount "$dev" "$r/data"' in text
    assert text.index('mount "$dev" "$r/data"') < text.rindex('losetup -d "$dev"; ')  # autoclear
    assert 'chown "$SUDO_UID:$SUDO_GID" "$r/data"' in text
    with pytest.raises(ClusterError, match="at least 8 MiB, got 4"):
        disk.make_text("/d/rqueue-ssh-ab12", 4)


def test_fill_and_free_touch_only_the_filler() -> None:
    fill = disk.fill_text("/d/rqueue-ssh-r/data")
    assert fill.startswith("f=/d/rqueue-ssh-r/data/.rqueue-disk-filler; ")
    assert 'fallocate -o "$size" -l "$chunk" "$f"' in fill and '*"No space"*' in fill
    assert disk.free_text("/d/rqueue-ssh-r/data/") == (
        "rm -f -- /d/rqueue-ssh-r/data/.rqueue-disk-filler"
    )


def test_release_and_sweep_only_touch_run_folders() -> None:
    text = disk.release_text("/d/rqueue-ssh-r")
    assert text.startswith("r=/d/rqueue-ssh-r; ")
    assert 'case "$back" in "$r/"*) losetup -d "$dev"' in text  # its own loop devices only
    assert "umount -l" not in text  # a busy filesystem stays, with its folder
    sweep = disk.sweep_text("/d x/")
    assert sweep.startswith("for run_dir in '/d x'/rqueue-ssh-*; do ")
    assert 'grep -qx -- "RQUEUE_SSH_RUN=$run"' in sweep  # a reused pid is never killed
    assert 'umount "$r/data" || umount -l "$r/data"' in sweep


def test_release_runs_against_a_folder_with_nothing_mounted(tmp_path: Path) -> None:
    run = tmp_path / "rqueue-ssh-r"
    (run / "data").mkdir(parents=True)
    proc = subprocess.run(["sh", "-c", disk.release_text(str(run))], capture_output=True)
    assert proc.returncode == 0 and proc.stdout == b"", proc


def test_the_probe_names_what_a_host_lacks_for_disks() -> None:
    assert "DISKTOOLS" in probe_script(_host())
    base = "UID 0\nIPTABLES ok\n"
    assert read_probe(_host(), base + "DISKTOOLS \n").disk_problem is None
    facts = read_probe(_host(), base + "DISKTOOLS mkfs.ext4 losetup \n")
    assert facts.disk_problem == (
        "host n1 has no mkfs.ext4, losetup, so a node's data cannot get a filesystem of "
        "its own (util-linux, e2fsprogs, coreutils)"
    )
    facts = read_probe(_host(user="ops"), "UID 1000\nIPTABLES x\nDISKTOOLS \n")
    assert facts.disk_problem == (
        "host n1: ops is not root and sudo = false, so it cannot mount a filesystem for a "
        "node's data"
    )


def test_a_host_without_the_tools_drops_disk_and_refuses_the_scenario(tmp_path: Path) -> None:
    inv = Inventory(tmp_path / "inv.toml", (_host(),))
    lacking = "host n1 has no mkfs.ext4, so a node's data cannot get a filesystem of its own"
    facts = [HostFacts("n1", None, None, None, disk_problem=lacking)]
    c = SshCluster(inv, Sessions(inv.hosts), facts, tmp_path)
    c._disk_mb = 128
    assert DISK not in c.capabilities and c.capability_problem(DISK) == lacking
    assert refusal("disk-full", ["disk-full"], c) == (
        f"scenario disk-full fills nodes' disks (disk-full): {lacking}"
    )
    with pytest.raises(ClusterError, match=r"has no mkfs\.ext4"):
        c._make_disks()  # start() refuses before anything is made on a host
    disk.refuse_disks(facts, None)  # no disks asked for: no refusal


@pytest.mark.slow
@pytest.mark.root
def test_a_host_that_lacks_a_tool_refuses_disks_before_anything_is_made(
    ssh_hosts: SshTestHosts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(disk, "TOOLS", (*disk.TOOLS, "no-such-mkfs"))
    with pytest.raises(ClusterError, match=r"^host n1 has no no-such-mkfs, so a node's data"):
        SshCluster.start(ssh_hosts.inventory_path, 3, tmp_path / "c", timeout=90, disk_mb=16)
    assert list(ssh_hosts.dir.glob("n*/data/*")) == []  # no run folder was made
    c = SshCluster.start(ssh_hosts.inventory_path, 1, tmp_path / "c2", timeout=90)
    try:  # without disk_mb the host serves every other fault
        assert DISK not in c.capabilities and "no-such-mkfs" in str(c.capability_problem(DISK))
    finally:
        c.stop()
