"""Re-election after a leader kill on the embedded node: the Raft links it depends on.

Real processes and real signals; each wait is bounded. Timing figures are the soak
benchmark's job (``benchmarks/leader_kill_soak.py``); these tests check mechanisms.
"""

from __future__ import annotations

import contextlib
import json
import select
import shutil
import socket
import subprocess
import time

import pytest

from harness.cluster.base import http_get
from harness.cluster.local.cluster import LocalCluster

#: PySyncObj calls a link dead when nothing was read from it for this long (s)
RECEIVE_TIMEOUT = 3.5


def raft_term(url: str) -> int:
    code, body = http_get(f"{url}/status", 2.0)
    assert code == 200, f"{url}/status answered {code}"
    return int(json.loads(body)["store"]["raft"]["term"])


@pytest.mark.slow
def test_a_leader_kill_after_a_quiet_spell_costs_one_election(make_cluster):
    """While a leader lives its followers send nothing to each other. PySyncObj dropped
    such an idle link (and the vote request on it) when the leader's death made them use
    it, so the first election was always lost and the new leader came one term later.
    With keepalives on idle links, the first election can win: the new term is the old
    one plus one, unless both survivors stood in the same instant (a split vote)."""
    c: LocalCluster = make_cluster(engine="embedded")
    terms = []
    for _ in range(3):
        lead = c.wait_for_leader(30.0)
        # the quiet spell itself is what is tested: longer than the receive timeout
        time.sleep(RECEIVE_TIMEOUT + 0.7)
        lead = c.wait_for_leader(30.0)
        before = raft_term(lead.url)
        c.kill(lead.id)
        new = c.wait_for_leader(30.0, all_ready=False)
        terms.append((before, raft_term(new.url)))
        c.restart(lead.id)
    one_step = [t for t in terms if t[1] == t[0] + 1]
    assert one_step, f"every kill cost more than one election (term before, after): {terms}"


def _fill_accept_queue(port: int, limit: int = 64) -> list[socket.socket]:
    """Connect to a stopped node's Raft port until the kernel stops completing handshakes
    (its accept queue is full: further SYNs are dropped, as behind a DROP rule)."""
    socks = []
    for _ in range(limit):
        s = socket.socket()
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.connect(("127.0.0.1", port))
        socks.append(s)
        if not select.select([], [s], [], 0.3)[1]:
            return socks
    for s in socks:
        s.close()
    raise AssertionError(f"port {port} accepted {limit} connections while stopped")


def _syn_sent_to(port: int) -> bool:
    out = subprocess.run(
        ["ss", "-tanH", "state", "syn-sent", "dst", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=5,
        check=True,
    ).stdout
    return bool(out.strip())


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
@pytest.mark.slow
def test_a_lost_connect_is_retried_not_left_to_the_kernels_syn_backoff(make_cluster):
    """A node is stopped (SIGSTOP) with a full accept queue while the leader is killed:
    the one peer left dials it, and its SYN is dropped. PySyncObj never timed out a
    connect: after the node resumed, the link waited for the kernel's next SYN
    retransmission (1, 3, 7, 15, 31 s after the first SYN) and there was no leader until
    then. With a 1 s connect timeout a fresh SYN goes out every second or so."""
    c: LocalCluster = make_cluster(engine="embedded")
    lead = c.wait_for_leader(30.0)
    others = [c._spec(n.id) for n in c.nodes() if n.id != lead.id]
    dialled = min(others, key=lambda s: s.raft_addr)  # the higher address dials the lower
    c.pause(dialled.id)
    filler: list[socket.socket] = []
    try:
        filler = _fill_accept_queue(dialled.raft_port)
        c.kill(lead.id)
        deadline = time.monotonic() + 20.0
        while not _syn_sent_to(dialled.raft_port):
            assert time.monotonic() < deadline, "the surviving peer never dialled again"
            time.sleep(0.05)
        first_syn = time.monotonic()
        # resume just after the kernel's 4th retransmission (first SYN + 15 s): left to
        # the kernel, the next try is first SYN + 31 s
        time.sleep(max(0.0, first_syn + 15.5 - time.monotonic()))
    finally:
        for s in filler:
            s.close()
        c.resume(dialled.id)
    resumed = time.monotonic()
    new = c.wait_for_leader(30.0, all_ready=False)
    took = time.monotonic() - resumed
    # measured: 0.6 s; left to the kernel's retransmissions 7.6 s
    assert took < 5.0, f"leader {new.id} only {took:.1f}s after the stopped node resumed"
