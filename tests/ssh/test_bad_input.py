"""Bad input on the SSH backend: one line each, exit 2, before anything starts, nothing
left (the ``ssh_hosts`` fixture checks the hosts after each test)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.ssh.conftest import SshTestHosts

pytestmark = [pytest.mark.slow, pytest.mark.root]
ROOT = Path(__file__).resolve().parents[2]


def _with_n1(hosts: SshTestHosts, name: str, *lines: str) -> Path:
    """The test hosts' inventory with ``lines`` added to host n1's table."""
    text = hosts.inventory_path.read_text()
    given = {x.split("=")[0].strip() for x in lines}
    head, _, n1 = text.partition("[hosts.n1]\n")
    n1_keys, _, rest = n1.partition("\n\n")  # n1's own lines, then the other hosts
    kept = [x for x in n1_keys.splitlines() if x.split("=")[0].strip() not in given]
    text = head + "[hosts.n1]\n" + "".join(f"{x}\n" for x in [*lines, *kept]) + "\n" + rest
    return hosts.write_inventory(name, text)


def _cluster_up(inventory: Path, directory: Path, tmp: Path) -> subprocess.CompletedProcess:
    """``cluster up`` in a subprocess whose temporary folder (where its SSH control
    sockets' folder goes) is ``tmp``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)}
    argv = [sys.executable, "-m", "harness", "cluster", "up", "--backend", "ssh"]
    argv += ["--inventory", str(inventory), "--dir", str(directory), "--timeout", "60"]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


def _refused(hosts: SshTestHosts, inventory: Path, *expected: str) -> str:
    directory = hosts.dir.parent / "cluster"
    tmp = Path(tempfile.mkdtemp(prefix="rqt-", dir="/tmp"))  # short: sockets go there
    try:
        proc = _cluster_up(inventory, directory, tmp)
        assert list(tmp.iterdir()) == []  # the control sockets' folder went
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for text in expected:
        assert text in lines[0]
    assert proc.stdout == ""
    # refused before anything started: no cluster state, no node log came home
    assert not (directory / "ssh-cluster.json").exists()
    assert list(directory.glob("n*/node.log")) == []
    assert not directory.exists(), "a refused up leaves no folder it made"
    return lines[0]


def test_an_unreachable_host(ssh_hosts: SshTestHosts) -> None:
    bad = _with_n1(ssh_hosts, "unreachable", "port = 2222")
    line = _refused(ssh_hosts, bad, "error: host n1 (root@", ":2222) is unreachable")
    assert "Connection refused" in line


def test_a_refused_key(ssh_hosts: SshTestHosts, tmp_path: Path) -> None:
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    bad = _with_n1(ssh_hosts, "key", f'key = "{other}"')
    _refused(ssh_hosts, bad, "error: host n1 (root@", f"the key {other} was refused for root")


def test_an_untrusted_host_key(ssh_hosts: SshTestHosts, tmp_path: Path) -> None:
    wrong = tmp_path / "known_hosts"
    wrong.write_text(
        "".join(
            f"{h.address} {(ssh_hosts.dir / 'n2' / 'ssh_host_ed25519_key.pub').read_text()}"
            for h in ssh_hosts.inventory.hosts
        )
    )
    bad = _with_n1(ssh_hosts, "hostkey", f'known_hosts = "{wrong}"')
    _refused(ssh_hosts, bad, "error: host n1 (", "its host key is not the one")


def test_a_missing_rqlited(ssh_hosts: SshTestHosts) -> None:
    bad = _with_n1(ssh_hosts, "missing", 'rqlited = "/no/such/rqlited"')
    _refused(
        ssh_hosts, bad, "host n1", "rqlited /no/such/rqlited does not exist or is not executable"
    )


def test_an_rqlited_of_a_version_the_harness_does_not_know(ssh_hosts: SshTestHosts) -> None:
    fake = ssh_hosts.dir.parent / "rqlited"
    fake.write_text("#!/bin/sh\necho 'rqlited v11.0.0 linux amd64 go1.30 sqlite3.50.0' >&2\n")
    fake.chmod(0o755)
    bad = _with_n1(ssh_hosts, "version", f'rqlited = "{fake}"')
    _refused(ssh_hosts, bad, "host n1", f"{fake}: rqlited 11.0.0 is newer than the versions")


def test_no_python_for_the_project_node(ssh_hosts: SshTestHosts) -> None:
    bad = _with_n1(ssh_hosts, "python", 'python = "/bin/false"')
    _refused(ssh_hosts, bad, "host n1", "/bin/false is not a Python 3.11+")


def test_no_sudo(ssh_hosts: SshTestHosts) -> None:
    if shutil.which("sudo"):
        pytest.skip("sudo is installed here: root's `sudo -n true` works, so no refusal")
    bad = _with_n1(ssh_hosts, "sudo", "sudo = true")
    _refused(ssh_hosts, bad, "host n1", "sudo = true, but root cannot sudo without a password")


def test_a_missing_data_dir(ssh_hosts: SshTestHosts) -> None:
    bad = _with_n1(ssh_hosts, "datadir", 'data_dir = "/no/such/dir"')
    _refused(ssh_hosts, bad, "host n1", "data_dir /no/such/dir does not exist")


def test_a_port_in_use(ssh_hosts: SshTestHosts) -> None:
    n2 = ssh_hosts.inventory.hosts[1]
    listen = (
        "import socket, sys, time; s = socket.socket(); "
        f"s.bind(({n2.address!r}, {n2.http_port})); s.listen(); print('up', flush=True); "
        "time.sleep(120)"
    )
    argv = ["ip", "netns", "exec", ssh_hosts.netns("n2"), sys.executable, "-c", listen]
    squatter = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert squatter.stdout is not None and squatter.stdout.readline() == "up\n"
        _refused(
            ssh_hosts,
            ssh_hosts.inventory_path,
            "host n2",
            f"port {n2.http_port} (http_port) is in use on {n2.address}:{n2.http_port}",
        )
    finally:
        squatter.send_signal(signal.SIGKILL)
        squatter.wait(timeout=10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and squatter.poll() is None:
        time.sleep(0.05)
