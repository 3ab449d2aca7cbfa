"""Where the embedded node listens, and who may speak Raft to it (issue 21).

PySyncObj unpickles whatever arrives on the Raft port, so whoever reaches that port can
run code in the node. These tests hold the node to its promise:

- every socket a node listens on is bound to exactly its ``--http-addr`` and
  ``--raft-addr``: nothing on 0.0.0.0;
- seen from another machine (a network namespace of the test's own, which reaches this
  host's network stack over a bridge at a 127.77.X.1 address of a non-loopback
  interface), the Raft and HTTP ports of a loopback cluster are refused;
- a node that would listen beyond loopback refuses to start without a cluster secret;
- with a secret, a node holding another secret (or none) never gets into the cluster.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness
from harness.cluster.base import probe_node
from harness.cluster.local.cluster import LocalCluster
from harness.cluster.netns import NetnsNetwork
from harness.cluster.ports import free_ports
from tests.cluster.helpers import execute, post, rows, wait_until

pytestmark = pytest.mark.timeout(180)

SECRET_ENV = "RQUEUE_CLUSTER_SECRET"
#: how long a node with the wrong secret is watched not joining: many reconnect rounds
#: (PySyncObj retries every 0.5 s) and election timeouts (0.8-1.6 s)
OBSERVE_OUT = 4.0


# -- what a process listens on ------------------------------------------------------------
def _decode(hex_addr: str) -> str:
    """``0100007F:0FA1`` (from /proc/net/tcp*) as ``127.0.0.1:4001`` (``[::1]:4001``)."""
    host_hex, port_hex = hex_addr.split(":")
    raw = bytes.fromhex(host_hex)
    # the kernel prints each 32-bit word of the address in host (little-endian) order
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(raw)
    host = str(ip) if ip.version == 4 else f"[{ip}]"
    return f"{host}:{int(port_hex, 16)}"


def bound_sockets(pid: int) -> set[str]:
    """Every TCP socket of ``pid`` in the listening state and every bound UDP socket."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table, listening in (("tcp", "0A"), ("tcp6", "0A"), ("udp", "07"), ("udp6", "07")):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == listening and fields[9] in inodes:
                found.add(("udp " if table.startswith("udp") else "") + _decode(fields[1]))
    return found


def test_bound_sockets_reads_a_known_listener() -> None:
    """The reader itself: it sees a listener of this process at its exact address."""
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
        assert f"127.0.0.1:{port}" in bound_sockets(os.getpid())
    assert _decode("00000000:0FA1") == "0.0.0.0:4001"
    assert _decode("00000000000000000000000001000000:0FA1") == "[::1]:4001"


def test_every_listening_socket_is_bound_to_its_given_address(make_cluster) -> None:
    c = make_cluster(3)
    for node in c.nodes():
        spec = c._spec(node.id)
        assert node.pid is not None
        assert bound_sockets(node.pid) == {spec.http_addr, spec.raft_addr}, node.id


# -- from outside this machine ------------------------------------------------------------
@pytest.fixture
def outside() -> Iterator[NetnsNetwork]:
    """A network namespace of the test's own, on a bridge whose root-side address is
    ``outside.gateway`` (127.77.X.1 on the bridge interface, not on ``lo``)."""
    if os.geteuid() != 0:
        pytest.skip("a network namespace to probe from needs root")
    net = NetnsNetwork.create(["probe"], owner="test_listen_security")
    try:
        yield net
    finally:
        net.teardown()


def connect_from(net: NetnsNetwork, host: str, port: int) -> str:
    """Try a TCP connection from the probe namespace: ``connected``, ``refused`` or the
    error's name."""
    code = (
        "import socket, sys\n"
        "try:\n"
        "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()\n"
        "except ConnectionRefusedError:\n"
        "    print('refused')\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
        "else:\n"
        "    print('connected')\n"
    )
    argv = [*net.exec_prefix("probe"), sys.executable, "-c", code, host, str(port)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return out.stdout.strip() or f"no answer: {out.stderr.strip()}"


@pytest.mark.root  # the probe's network namespace
def test_ports_are_refused_from_outside_the_machine(make_cluster, outside) -> None:
    host = outside.gateway
    # the control: a socket of this host's reached over the bridge is reached, so a node
    # socket on 0.0.0.0 (which covers the bridge's address) would be reached too
    with socket.create_server((host, 0)) as control:
        control_port = control.getsockname()[1]
        if connect_from(outside, host, control_port) != "connected":
            pytest.skip("the probe namespace cannot reach this host at all (a firewall?)")
    c = make_cluster(3)
    for node in c.nodes():
        spec = c._spec(node.id)
        for what, port in (("raft", spec.raft_port), ("http", spec.http_port)):
            assert connect_from(outside, host, port) == "refused", f"{node.id} {what} {port}"


# -- non-loopback binds need a secret -----------------------------------------------------
def node_env(secret: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != SECRET_ENV}
    root = str(Path(harness.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    if secret is not None:
        env[SECRET_ENV] = secret
    return env


@pytest.mark.parametrize("exposed", ["http", "raft"])
def test_a_non_loopback_bind_without_a_secret_is_refused(tmp_path: Path, exposed: str) -> None:
    http_port, raft_port = free_ports(2)
    http = f"{'0.0.0.0' if exposed == 'http' else '127.0.0.1'}:{http_port}"
    raft = f"{'0.0.0.0' if exposed == 'raft' else '127.0.0.1'}:{raft_port}"
    argv = [sys.executable, "-m", "harness.node", "--node-id", "n1", "--http-addr", http]
    argv += ["--raft-addr", raft, "--data-dir", str(tmp_path / "data")]
    proc = subprocess.Popen(argv, env=node_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate(timeout=10)
        pytest.fail(f"the node started listening on {http} / {raft} without a secret")
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 2, lines
    assert len(lines) == 1, lines
    exposed_addr = http if exposed == "http" else raft
    assert exposed_addr in lines[0]
    assert "--cluster-secret-file" in lines[0] and SECRET_ENV in lines[0]
    assert not (tmp_path / "data").exists(), "refused before touching its data directory"


# -- a cluster secret keeps other nodes out -----------------------------------------------
def local_xs(url: str) -> list[int]:
    """The node's own rows of ``t`` (none while it has not applied the table yet)."""
    out = post(f"{url}/db/query?level=none", ["SELECT x FROM t ORDER BY x"])
    result = out["results"][0]
    if result.get("error") == "no such table: t":
        return []
    assert "error" not in result, result
    return [r[0] for r in result.get("values", [])]


def _leader_known(url: str) -> bool:
    st = probe_node(url, 2.0)
    assert st.error is None, st.summary()
    return st.leader_id is not None


def test_a_node_with_another_secret_or_none_stays_out(
    make_cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    right = f"right-{uuid.uuid4().hex}"
    monkeypatch.setenv(SECRET_ENV, right)  # the cluster manager's nodes inherit it
    c: LocalCluster = make_cluster(3)
    lead = c.wait_for_leader(30)
    victim = next(n for n in c.nodes() if n.id != lead.id)
    other = next(n for n in c.nodes() if n.id not in (lead.id, victim.id))
    execute(lead.url, [["CREATE TABLE t (x INTEGER)"], ["INSERT INTO t VALUES (1)"]])
    wait_until(
        lambda: rows(victim.url, "SELECT x FROM t", "none") == [[1]],
        30,
        f"the first row on {victim.id}",
    )

    for n, secret in enumerate([f"wrong-{uuid.uuid4().hex}", None], start=2):
        c.kill(victim.id)
        if secret is None:
            monkeypatch.delenv(SECRET_ENV)
        else:
            monkeypatch.setenv(SECRET_ENV, secret)
        c.restart(victim.id)
        wait_until(lambda: rows(victim.url, "SELECT 1", "none") == [[1]], 30, "victim's HTTP")
        lead = c.wait_for_leader(30, all_ready=False, exclude=[victim.id])
        execute(lead.url, [["INSERT INTO t VALUES (?)", n]])
        want = [[x] for x in range(1, n + 1)]
        wait_until(
            lambda want=want: rows(other.url, "SELECT x FROM t ORDER BY x", "none") == want,
            30,
            f"row {n} on {other.id}",
        )
        deadline = time.monotonic() + OBSERVE_OUT
        while time.monotonic() < deadline:  # a window of observation, not a wait
            assert n not in local_xs(victim.url), f"a node with secret {secret!r} got row {n}"
            assert not _leader_known(victim.url), f"a node with secret {secret!r} found a leader"
            time.sleep(0.2)
        if secret is not None:  # whichever side received the other's message says so
            logs = "".join(c._spec(n.id).log_file.read_text() for n in c.nodes())
            assert "failed authentication" in logs

    # the control: with the right secret the same node gets in and catches up
    c.kill(victim.id)
    monkeypatch.setenv(SECRET_ENV, right)
    c.restart(victim.id)
    wait_until(
        lambda: local_xs(victim.url) == [1, 2, 3],
        30,
        "the node with the right secret to catch up",
    )


def test_a_node_serves_http_on_an_ipv6_loopback_address(tmp_path: Path) -> None:
    """``--http-addr [::1]:P`` binds that address (it crashed the node once) and serves."""
    http_port, raft_port = free_ports(2)
    http = f"[::1]:{http_port}"
    argv = [sys.executable, "-m", "harness.node", "--node-id", "n1", "--http-addr", http]
    argv += ["--raft-addr", f"127.0.0.1:{raft_port}", "--data-dir", str(tmp_path / "data")]
    proc = subprocess.Popen(argv, env=node_env(), stderr=subprocess.PIPE)
    try:
        url = f"http://{http}"
        wait_until(
            lambda: proc.poll() is not None or probe_node(url, 1.0).leader_id,
            60,
            "the node to exit or lead itself",
        )
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert http in bound_sockets(proc.pid)
        execute(url, ["CREATE TABLE t (x INTEGER)", "INSERT INTO t VALUES (7)"])
        assert rows(url, "SELECT x FROM t") == [[7]]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
