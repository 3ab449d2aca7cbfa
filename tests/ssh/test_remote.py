"""What the SSH backend runs on hosts, as text (pure, fast): partition rules that spare
the harness's own traffic, the probe's findings, the CLI's refusals of a half-given
backend."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.cluster.ssh import remote
from harness.cluster.ssh.inventory import Host
from harness.cluster.ssh.preflight import needs_secret, probe_script, read_probe
from harness.cluster.ssh.session import SshError, connection_problem, run_all

ADDRESSES = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}


def test_partition_rules_drop_only_node_ports_between_node_addresses() -> None:
    rules = remote.partition_rules([["n1"], ["n2", "n3"]], ADDRESSES, [4001, 4002], "abcd1234")
    assert set(rules) == {"n1", "n2", "n3"}
    assert len(rules["n1"]) == 4 and len(rules["n2"]) == 2  # n1 cuts two peers, n2 one
    for cmds in rules.values():
        for cmd in cmds:
            assert "-p tcp -m multiport --ports 4001,4002" in cmd
            assert "--comment rqueue-ssh:abcd1234 -j DROP" in cmd
            assert " 22" not in cmd.replace("4002", "")  # never ssh's port
            peer = cmd.split(" -s " if " -s " in cmd else " -d ")[1].split()[0]
            assert peer in ADDRESSES.values()  # never the control machine's address
    assert not any("10.0.0.1" in c for c in rules["n2"] if "10.0.0.3" in c)


def test_a_bridge_leaves_the_middle_node_without_rules() -> None:
    rules = remote.partition_rules([["n1", "n2"], ["n2", "n3"]], ADDRESSES, [4001], "r")
    assert "n2" not in rules and set(rules) == {"n1", "n3"}


def test_launch_records_the_pid_and_tags_the_node() -> None:
    text = remote.launch("/d/rqueue-ssh-r", ["python3", "x y.pyz"], {"RQUEUE_SSH_RUN": "r"}, "hi")
    assert "RQUEUE_SSH_RUN=r setsid nohup python3 'x y.pyz' >> node.log 2>&1 < /dev/null &" in text
    assert text.endswith("echo $! > pid; cat pid")
    assert "grep -qx RQUEUE_SSH_RUN=r" in remote.signal_node(42, "r", "KILL")


def _host(**kw: object) -> Host:
    return Host(**{"name": "n1", "address": "10.0.0.1", "data_dir": "/d", **kw})  # type: ignore[arg-type]


def test_the_probe_finds_a_port_in_use_on_the_host_address_or_a_wildcard() -> None:
    base = "UID 0\nIPTABLES ok\n"
    read_probe(_host(), base + "LISTEN LISTEN 0 4096 10.0.0.9:4001 0.0.0.0:*\n")  # not ours
    for where in ("10.0.0.1:4002", "0.0.0.0:4001", "[::]:4001", "*:4002"):
        with pytest.raises(SshError, match=r"host n1 \(root@10\.0\.0\.1:22\): port 400"):
            read_probe(_host(), base + f"LISTEN LISTEN 0 4096 {where} 0.0.0.0:*\n")


def test_the_probe_reads_versions_failures_and_what_partitions_need() -> None:
    facts = read_probe(_host(rqlited="/r"), "VERSION rqlited v8.36.18 linux\nUID 0\nIPTABLES ok\n")
    assert facts.rqlited_version == (8, 36, 18) and facts.firewall_problem is None
    with pytest.raises(SshError, match=r"rqlited 5\.0\.0 is too old"):
        read_probe(_host(rqlited="/r"), "VERSION rqlited v5.0.0 linux\n")
    with pytest.raises(SshError, match=r"cannot sudo without a password .*a password is required"):
        read_probe(_host(sudo=True), "FAIL sudo sudo: a password is required\n")
    facts = read_probe(_host(user="ops"), "UID 1000\nIPTABLES Permission denied\n")
    assert facts.firewall_problem == (
        "host n1: ops is not root and sudo = false, so it cannot run iptables"
    )


def test_connection_problems_are_named() -> None:
    h = _host(key="/k")
    refused = "ssh: connect to host 10.0.0.1 port 22: Connection refused"
    assert "is unreachable: ssh: connect" in connection_problem(h, refused)
    assert "the key /k was refused for root" in connection_problem(
        h, "root@10.0.0.1: Permission denied (publickey)."
    )


def test_the_backend_and_the_inventory_go_together(capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "leader-failover", "--backend", "ssh"]) == 2
    assert "--backend ssh and --inventory FILE go together" in capsys.readouterr().err
    assert main(["run", "leader-failover", "--inventory", str(Path("x.toml"))]) == 2
    assert main(["cluster", "urls", "--backend", "ssh", "--inventory", "/no/such.toml"]) == 2
    assert "/no/such.toml: cannot read the inventory" in capsys.readouterr().err


def test_a_secret_and_its_cryptography_only_beyond_loopback() -> None:
    assert not needs_secret([_host(address="127.77.1.11"), _host(address="localhost")])
    assert needs_secret([_host(address="127.0.0.1"), _host(address="10.0.0.2")])
    assert needs_secret([_host(address="db1.example")])
    assert "import cryptography" in probe_script(_host(), secret=True)
    assert "import cryptography" not in probe_script(_host(), secret=False)
    with pytest.raises(SshError, match="needs the cryptography package for python3 there"):
        read_probe(_host(), "FAIL crypto ModuleNotFoundError: No module named 'cryptography'\n")


def _tagged_process(run: str, folder: Path) -> subprocess.Popen:
    """A process as a launched node looks: the run's tag in its environment, the run's
    folder in its command line (a sleep, not a node)."""
    env = {**os.environ, remote.TAG_ENV: run}
    script = "import sys, time; time.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", script, f"{folder}/node.pyz"], env=env)


def test_the_sweep_kills_a_node_whose_run_folder_is_gone_and_no_other(tmp_path: Path) -> None:
    """A launch that outlived its run's stop left a node with no run folder (and no pid
    file) to find it by; the sweep finds it by its tag and its folder's name."""
    data, other = tmp_path / "data", tmp_path / "other"
    data.mkdir()
    orphan = _tagged_process("abcd1234", data / f"{remote.RUN_PREFIX}abcd1234")
    elsewhere = _tagged_process("abcd1234", other / f"{remote.RUN_PREFIX}abcd1234")
    untagged = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", f"{data}/rqueue-ssh-ffff0000/x"]
    )
    try:
        out = subprocess.run(
            ["sh", "-c", remote.sweep(str(data))], capture_output=True, text=True, check=True
        ).stdout
        assert orphan.wait(10) == -signal.SIGKILL
        assert f"killed {orphan.pid} (its run folder gone)" in out.splitlines()
        assert elsewhere.poll() is None and untagged.poll() is None, out
    finally:
        for p in (orphan, elsewhere, untagged):
            p.kill()
            p.wait()


def test_run_all_interrupted_waits_for_the_calls_already_running() -> None:
    """The stop that follows an interrupted launch must see every node it started."""
    done: list[int] = []

    def call(i: int) -> int:
        time.sleep(0.5)
        done.append(i)
        return i

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(KeyboardInterrupt):
            run_all([1, 2, 3], call)  # type: ignore[list-item, arg-type]
        assert sorted(done) == [1, 2, 3]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
