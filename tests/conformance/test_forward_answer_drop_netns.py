"""The fault "loss on the forwarding path" on the embedded node, as the harness will inject
it (root only): inside a follower's network namespace, the leader's answer packets on the
connections the follower opened to the leader's HTTP port are dropped (handshakes pass).
Following v10.2.7 the follower's forward times out at the request's ``?timeout``, sends once
more on a new connection, which the leader applies again, and that answer is lost too: two
rows, and the client gets the error after about twice the deadline (docs/embedded-node.md,
"Forwarding: the deadline and v10's resend")."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from harness.cluster.local.cluster import NETNS_HTTP_PORT
from tests.cluster.helpers import execute, rows

from ._http import call

pytestmark = [
    pytest.mark.root,
    pytest.mark.timeout(180),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]


def test_v10_applies_a_forwarded_write_twice_when_the_answers_are_dropped(make_cluster) -> None:
    c = make_cluster(3, netns=True)
    if c.engine != "embedded":
        pytest.skip("the embedded node's forwarding (rqlited forwards over its Raft port)")
    lead = c.wait_for_leader(30)
    follower = next(n for n in c.nodes() if n.id != lead.id)
    execute(lead.url, [["CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"]])
    net = c._network
    leader_ip = net.members[lead.id].ip
    # the leader's packets from its HTTP port that carry data (an answer), not the SYN-ACK
    # of a new connection nor a bare ACK or FIN (52 bytes with TCP timestamps)
    rule = ["-p", "tcp", "-s", leader_ip, "--sport", str(NETNS_HTTP_PORT)]
    rule += ["!", "--tcp-flags", "SYN", "SYN", "-m", "length", "--length", "80:65535"]
    rule += ["-j", "DROP"]
    prefix = [*net.exec_prefix(follower.id), "iptables", "-w", "5"]
    subprocess.run([*prefix, "-I", "INPUT", *rule], check=True, timeout=30)
    try:
        t0 = time.monotonic()
        insert = [["INSERT INTO t(v) VALUES ('x')"]]
        r = call("POST", follower.url, "/db/execute?timeout=2s", insert, timeout=60.0)
        took = time.monotonic() - t0
    finally:
        subprocess.run([*prefix, "-D", "INPUT", *rule], check=True, timeout=30)
    assert r.status == 200 and r.json["results"] == [] and r.json["error"], r.text
    assert 3.5 < took < 15.0, f"two sends of 2 s each took {took:.1f}s"
    assert rows(lead.url, "SELECT count(*) FROM t", level="strong") == [[2]]
