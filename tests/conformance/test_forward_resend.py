"""Forwarding when the leader's answer is lost after it applied the command, per version.

rqlite's cluster client (``cluster/client.go`` ``retry``) sends a forwarded command once
under v8 and v9 (``Retries(0)``), and under v10 once more on a new connection after any
failure of the first exchange (``effectiveRetries := max(1, maxRetries)``), with no request
id: the leader applies it twice and the client gets the second answer. Each send's deadline
is the request's ``?timeout``, else 30 s. Here a real 3-node embedded cluster forwards
through :class:`ReplyLossRelay`, which loses one answer of the leader's.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.node.forward import Forwarder, ForwardError, resends
from harness.node.versions import get
from tests.cluster.helpers import wait_until

from ._http import call, execute
from ._reply_loss import ReplyLossRelay
from ._versioned import VersionedCluster

# real 3-node clusters per version and way of losing the answer: the slow stage
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


# -- the decision ----------------------------------------------------------------------------
@pytest.mark.parametrize("sent", [False, True])
def test_v10_resends_after_any_failed_exchange(sent: bool) -> None:
    assert resends(True, ForwardError("read timed out", sent=sent))


def test_v8_and_v9_never_resend() -> None:
    assert not resends(False, ForwardError("reset", sent=True))


def test_no_resend_after_the_nodes_own_leadership_lost_exit() -> None:
    assert not resends(True, ForwardError("leadership lost", sent=True, exchange=False))


def test_only_v10_resends() -> None:
    assert [get(v).api.forward_resends for v in ("8.36.18", "9.4.5", "10.2.7")] == [
        False,
        False,
        True,
    ]


# -- the forwarder against a real server that loses its first answer ----------------------------
class _LosingServer:
    """An HTTP server on loopback counting requests; the first gets no answer (its
    connection closed, or held until the client leaves), the others ``200`` + their
    number."""

    def __init__(self, hold: bool) -> None:
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self.srv.getsockname()[1]}"
        self.hold = hold
        self.seen = 0
        self.ports: list[int] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, peer = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn, peer[1]), daemon=True).start()

    def _one(self, conn: socket.socket, port: int) -> None:
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf or not buf.endswith(b"[]"):
                chunk = conn.recv(4096)
                if not chunk:
                    return
                buf += chunk
            self.seen += 1
            self.ports.append(port)
            if self.seen == 1:
                if self.hold:
                    while conn.recv(4096):
                        pass
                return
            body = str(self.seen).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    def close(self) -> None:
        self.srv.close()


@pytest.mark.parametrize("hold", [False, True], ids=["closed", "held"])
def test_forwarder_resends_on_a_new_connection(hold: bool) -> None:
    server = _LosingServer(hold)
    try:
        fwd = Forwarder("n2", timeout=30.0)
        t0 = time.monotonic()
        status, _, data = fwd.forward(server.addr, "POST", "/db/execute", b"[]", 0.5, resend=True)
        took = time.monotonic() - t0
    finally:
        server.close()
    assert (status, data, server.seen, fwd.resent) == (200, b"2", 2, 1)
    assert server.ports[0] != server.ports[1], "the second send must use a new connection"
    assert took < 10.0, f"a held answer must end at the send's deadline, took {took:.1f}s"


@pytest.mark.parametrize("hold", [False, True], ids=["closed", "held"])
def test_forwarder_sends_once_without_resend(hold: bool) -> None:
    server = _LosingServer(hold)
    try:
        with pytest.raises(ForwardError) as err:
            Forwarder("n2", timeout=30.0).forward(server.addr, "POST", "/db/execute", b"[]", 0.5)
    finally:
        server.close()
    assert err.value.sent and server.seen == 1


# -- a real cluster ---------------------------------------------------------------------------
class _RelayedCluster(VersionedCluster):
    """A cluster whose nodes reach each other's HTTP API (the forwarding path) through a
    :class:`ReplyLossRelay` in front of each node."""

    def __init__(self, version: str, directory: Path) -> None:
        super().__init__(version, directory)
        self.relays: dict[str, ReplyLossRelay] = {}

    def peer_http(self, http: str) -> str:
        if http not in self.relays:
            self.relays[http] = ReplyLossRelay(http)
        return self.relays[http].addr

    def stop(self) -> None:
        super().stop()
        for relay in self.relays.values():
            relay.close()


@pytest.fixture(scope="module", params=["8.36.18", "9.4.5", "10.2.7"])
def relayed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, _RelayedCluster, dict]]:
    version = request.param
    cluster = _RelayedCluster(version, tmp_path_factory.mktemp(f"relayed-v{version}"))
    urls = cluster.start()
    try:
        yield version, cluster, urls
    finally:
        cluster.stop()


def _count(url: str, table: str) -> int:
    rows = execute_query(url, f"SELECT count(*) FROM {table}")
    return rows[0][0]


def execute_query(url: str, sql: str) -> list:
    r = call("GET", url, "/db/query?level=strong&q=" + sql.replace(" ", "+"))
    assert r.status == 200, r.text
    return r.json["results"][0].get("values", [])


@pytest.mark.parametrize("mode", ["close", "reset", "hold"])
def test_a_forwarded_insert_whose_answer_is_lost(
    relayed: tuple[str, _RelayedCluster, dict], table: str, mode: str
) -> None:
    version, cluster, urls = relayed
    leader, follower = urls["leader"], urls["followers"][0]
    execute(leader, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v TEXT)"])
    relay = cluster.relays[leader.removeprefix("http://")]
    lost_before = relay.lost
    relay.lose_next(mode)
    t0 = time.monotonic()
    # a held answer ends at the send's deadline, ?timeout (1 s), not 30 s; a closed or
    # reset connection ends the send at once, long before its deadline (20 s)
    timeout = "1s" if mode == "hold" else "20s"
    insert = [[f"INSERT INTO {table}(v) VALUES('x')"]]
    r = call("POST", follower, f"/db/execute?timeout={timeout}", insert, timeout=60.0)
    took = time.monotonic() - t0
    assert relay.lost == lost_before + 1, "the relay lost no answer: the forward missed it"
    assert r.status == 200, r.text
    assert took < 10.0, f"the forward took {took:.1f}s with ?timeout={timeout}"
    if version.startswith("10."):
        # applied twice: the client got the second application's answer
        assert r.json["results"][0]["last_insert_id"] == 2, r.text
        assert _count(leader, table) == 2
    else:
        assert r.json["results"] == [] and r.json["error"], r.text
        wait_until(lambda: _count(leader, table) == 1, 10.0, "the one row on the leader")
        assert _count(leader, table) == 1, "v8 and v9 send once: one row"


def test_a_lasting_loss_of_answers(relayed: tuple[str, _RelayedCluster, dict], table: str) -> None:
    """While the leader's answers are lost, v10's second send is applied too and its
    answer lost as well: two rows and the error; v8 and v9: one row and the error."""
    version, cluster, urls = relayed
    leader, follower = urls["leader"], urls["followers"][0]
    execute(leader, [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v TEXT)"])
    relay = cluster.relays[leader.removeprefix("http://")]
    relay.lose_next("hold", count=2)
    t0 = time.monotonic()
    insert = [[f"INSERT INTO {table}(v) VALUES('x')"]]
    try:
        r = call("POST", follower, "/db/execute?timeout=1s", insert, timeout=60.0)
    finally:
        relay.disarm()  # v8 and v9 send once: one loss would be left armed
    took = time.monotonic() - t0
    assert r.status == 200 and r.json["results"] == [] and r.json["error"], r.text
    assert took < 15.0, f"two sends of 1 s each took {took:.1f}s"
    twice = version.startswith("10.")
    rows = 2 if twice else 1
    wait_until(lambda: _count(leader, table) == rows, 10.0, f"{rows} row(s) on the leader")
