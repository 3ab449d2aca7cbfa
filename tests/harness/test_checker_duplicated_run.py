"""``duplicated`` in a real run's history: a real node behind a real HTTP proxy that
applies every publish twice, as rqlite v10's forwarding resend does when a reply is
lost (the leader applies the command twice, the client gets the second result).

The subject is the seed protocol (``seed-reference``), whose publish is one plain
``INSERT``, so the doubled request stores two rows; the calls are recorded by the
workload's own recording (:mod:`harness.workload.record`) into a real history file.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from harness.checker import check
from harness.history import HistoryRecorder, read_history
from harness.subjects.seed_reference import SeedTransport
from harness.workload import text
from harness.workload.record import Ops, claimed, lease_value, published, same

#: seconds a request through the proxy, or the whole drain, may take
TIMEOUT = 10.0


class DoublingProxy(ThreadingHTTPServer):
    """Forwards every request to ``upstream``; a write that inserts into ``messages`` is
    sent twice, and the second reply is the one returned."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream = urlsplit(upstream)
        self.doubled = 0

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class _Handler(BaseHTTPRequestHandler):
    server: DoublingProxy

    def do_GET(self) -> None:
        self._forward(b"")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.startswith("/db/execute") and b"INSERT INTO messages" in body:
            self._send(body)  # applied, its reply lost
            self.server.doubled += 1
        self._forward(body)

    def _send(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        up = self.server.upstream
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=TIMEOUT)
        try:
            headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
            conn.request(self.command, self.path, body=body or None, headers=headers)
            r = conn.getresponse()
            return r.status, r.getheaders(), r.read()
        finally:
            conn.close()

    def _forward(self, body: bytes) -> None:
        status, headers, data = self._send(body)
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in ("content-length", "connection", "transfer-encoding", "date"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def proxy_for() -> Iterator[Callable[[str], DoublingProxy]]:
    made: list[tuple[DoublingProxy, threading.Thread]] = []

    def start(upstream: str) -> DoublingProxy:
        proxy = DoublingProxy(upstream)
        thread = threading.Thread(target=proxy.serve_forever, name="doubling-proxy")
        thread.start()
        made.append((proxy, thread))
        return proxy

    try:
        yield start
    finally:
        for proxy, thread in made:
            proxy.shutdown()
            proxy.server_close()
            thread.join(TIMEOUT)


def test_a_run_whose_publishes_are_applied_twice_is_duplicated_and_nothing_else(
    make_cluster: Callable, proxy_for: Callable[[str], DoublingProxy], tmp_path: Path
) -> None:
    node = make_cluster(nodes=1).wait_for_leader(30)
    proxy = proxy_for(node.url)
    publisher = SeedTransport.from_url([proxy.url], timeout=TIMEOUT)
    claimer = SeedTransport.from_url([node.url], timeout=TIMEOUT)
    path = tmp_path / "history.jsonl"
    msgs = [f"m0-{n}" for n in range(4)]
    with HistoryRecorder(path) as recorder:
        ops = Ops(recorder)
        p = ops.new_process()
        for n, msg in enumerate(msgs):
            group = f"g0-{n % 2}"
            event = json.dumps({"msg": msg, "group": group})
            value = {"group": group, "msg": msg, "priority": 0, "digest": text.digest(event)}
            op = ops.start(p, "publish", value)
            ops.finish(op, "publish", value, publisher.publish(group, event), published)
        deadline = time.monotonic() + TIMEOUT
        while True:  # the drain: claim and ack until nothing is left
            assert time.monotonic() < deadline, f"the drain took over {TIMEOUT:g}s"
            op = ops.start(p, "claim", {"visibility": 5.0, "min_priority": 0})
            lease = claimer.claim("w0", 5.0)
            ops.finish(op, "claim", None, lease, claimed(5.0))
            if lease is None:
                break
            op = ops.start(p, "ack", lease_value(lease))
            claimer.ack(lease)
            ops.finish(op, "ack", lease_value(lease), None, same)
    publisher.close()
    claimer.close()
    assert proxy.doubled == len(msgs)
    result = check(read_history(path))
    found = {k: v["count"] for k, v in result["anomalies"].items() if v["count"]}
    assert found == {"duplicated": len(msgs)}
    assert result["stats"]["leases"] == 2 * len(msgs)
    events = read_history(path)
    named = [events[ex[0]]["value"]["msg"] for ex in result["anomalies"]["duplicated"]["examples"]]
    assert sorted(named) == msgs
