"""Fixtures of the SSH backend's tests: local SSH test hosts (network namespaces, each
running a real sshd; :mod:`harness.cluster.ssh.hosts`) and a check that nothing is left.

``ssh_hosts`` (function scope, root and OpenSSH's server needed, else the test skips)
brings 3 hosts up (``ssh_hosts5``: 5) in the test's temporary folder and, after the
test, asserts that no run left anything on them (:func:`leftovers`) before it takes them
down; then it asserts that the namespaces and sshds are gone too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.cluster.ssh.hosts import SSHD, hosts_down, hosts_up
from harness.cluster.ssh.inventory import Inventory, load_inventory
from harness.cluster.ssh.session import _running


@dataclass
class SshTestHosts:
    dir: Path
    inventory_path: Path

    @property
    def inventory(self) -> Inventory:
        return load_inventory(self.inventory_path)

    def netns(self, name: str) -> str:
        state = json.loads((self.dir / "hosts.json").read_text())
        return state["network"]["members"][name]["netns"]

    def write_inventory(self, name: str, text: str) -> Path:
        """An inventory file of the test's own (``text`` is TOML)."""
        path = self.dir.parent / f"{name}.toml"
        path.write_text(text)
        return path


def _process_cmdlines() -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                raw = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            found.append((int(entry.name), raw.replace(b"\0", b" ").decode(errors="replace")))
    return found


def leftovers(hosts: SshTestHosts) -> list[str]:
    """What runs left on the test hosts: run folders, node processes, firewall rules of
    the harness, and this client's SSH master connections."""
    left = [str(p) for p in hosts.dir.glob("n*/data/*")]
    marker = str(hosts.dir)
    for pid, cmd in _process_cmdlines():
        if marker in cmd and "sshd" not in cmd and "pytest" not in cmd:
            left.append(f"process {pid}: {cmd[:120]}")
    for h in hosts.inventory.hosts:
        rules = subprocess.run(
            ["ip", "netns", "exec", hosts.netns(h.name), "iptables", "-w", "5", "-S"],
            capture_output=True,
            text=True,
        ).stdout
        left += [f"{h.name}: {r}" for r in rules.splitlines() if "rqueue-ssh" in r]
    return left


@pytest.fixture
def ssh_hosts(tmp_path: Path) -> Iterator[SshTestHosts]:
    yield from _test_hosts(tmp_path, 3)


@pytest.fixture
def ssh_hosts5(tmp_path: Path) -> Iterator[SshTestHosts]:
    """Five hosts: a cluster on the first three has two spare ones (membership)."""
    yield from _test_hosts(tmp_path, 5)


def _test_hosts(tmp_path: Path, count: int) -> Iterator[SshTestHosts]:
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("SSH test hosts need root (network namespaces)")
    if not os.access(SSHD, os.X_OK) or not shutil.which("ssh"):
        pytest.skip("SSH test hosts need openssh-server and openssh-client (scripts/install test)")
    directory = tmp_path / "hosts"
    hosts_up(count, directory)
    hosts = SshTestHosts(directory, directory / "inventory.toml")
    netns = [hosts.netns(h.name) for h in hosts.inventory.hosts]
    try:
        yield hosts
        assert leftovers(hosts) == [], "a run left this on the test hosts"
    finally:
        state = [(pid, cmd) for pid, cmd in _process_cmdlines() if str(directory) in cmd]
        hosts_down(directory)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [n for n in netns if n in listed], "hosts down left a namespace"
    assert [pid for pid, _ in state if _running(pid)] == [], "hosts down left processes"
    assert not directory.exists()
