"""The ``worker`` scenario's parts: how worker processes report their calls, the new
workload keys, and a brief real run whose claimers are ``python -m rqueue worker``
processes, killed and SIGTERMed while it runs."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.history import HistoryRecorder, read_history
from harness.scenario import ScenarioError, parse_scenario
from harness.workload.in_worker import Reporter, history_value, ok_value
from harness.workload.processes import _Connection
from harness.workload.record import Ops
from harness.workload.text import digest
from rqueue import Lease, LeaseLost, OutcomeUnknown

LEASE = Lease(7, "g1", json.dumps({"msg": "m0-3", "group": "g1"}), "w0:abc", expires_at=12.5)


class _Pool:
    """What a :class:`_Connection` needs of its pool."""

    def __init__(self, ops: Ops) -> None:
        self.ops, self.closing, self.acked = ops, False, 0

    def on_acked(self) -> None:
        self.acked += 1


@pytest.fixture
def reported(tmp_path: Path) -> Any:
    """A worker's :class:`Reporter` connected to the run's side over a real Unix socket,
    recording into a real history; yields ``(reporter, pool, history path)``."""
    path = tmp_path / "history.jsonl"
    recorder = HistoryRecorder(path)
    ops = Ops(recorder)
    ops.claim_extra = {"max_deliveries": 4}
    pool = _Pool(ops)
    sock_path = str(tmp_path / "r.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock_path)
    server.listen(1)

    def accept() -> None:
        conn, _ = server.accept()
        _Connection(pool, conn).serve()  # type: ignore[arg-type]

    serving = threading.Thread(target=accept, daemon=True)
    serving.start()
    reporter = Reporter(sock_path)
    try:
        yield reporter, pool, path
    finally:
        reporter._sock.close()
        serving.join(10)
        server.close()
        recorder.close()
    assert not serving.is_alive()


def test_a_worker_s_calls_become_history_operations(reported: Any) -> None:
    reporter, pool, path = reported
    h = reporter.invoke(0, "claim", {"visibility": 3.0, "min_priority": 0, "wait": 1.0})
    # the run recorded the invoke before invoke() returned (the call goes out after)
    assert [e["type"] for e in _events_now(path)] == ["invoke"]
    reporter.complete(h, LEASE, None)
    h = reporter.invoke(0, "extend", {"lease": LEASE, "visibility": 3.0})
    reporter.complete(h, LEASE, None)
    h = reporter.invoke(0, "ack", {"lease": LEASE})
    reporter.complete(h, None, OutcomeUnknown("timed out"))  # info: the slot's process retires
    h = reporter.invoke(0, "claim", {"visibility": 3.0, "min_priority": 0, "wait": 1.0})
    reporter.complete(h, None, None)
    h = reporter.invoke(1, "nack", {"lease": LEASE, "delay": 0, "error": "boom"})
    reporter.complete(h, None, LeaseLost("gone"))
    h = reporter.invoke(1, "ack", {"lease": LEASE})
    reporter.complete(h, None, None)
    reporter._sock.shutdown(socket.SHUT_WR)
    events = _wait_events(path, 12)
    claim, leased = events[0], events[1]
    assert claim["value"] == {
        "visibility": 3.0,
        "min_priority": 0,
        "wait": 1.0,
        "max_deliveries": 4,
    }
    assert leased["value"] == {
        "group": "g1", "msg": "m0-3", "seq": 7, "token": "w0:abc", "visibility": 3.0,
        "expires_at": 12.5, "digest": digest(LEASE.event),
    }  # fmt: skip
    assert events[3]["value"]["visibility"] == 3.0 and events[3]["f"] == "extend"
    assert (events[5]["f"], events[5]["type"]) == ("ack", "info")
    # after info, slot 0 goes on as a new process; slot 1 is another process again
    processes = [e["process"] for e in events]
    assert processes[6] != processes[0] and len({processes[0], processes[6], processes[8]}) == 3
    assert events[7]["value"] is None
    assert (events[9]["type"], events[9]["error"]) == ("fail", "LeaseLost: gone")
    assert events[8]["value"]["error"] == "boom" and events[8]["value"]["delay"] == 0
    assert pool.acked == 1  # only the ack that completed ok
    read_history(path)  # a well-formed history


def _events_now(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _wait_events(path: Path, n: int) -> list[dict]:
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        events = _events_now(path)
        if len(events) >= n:
            return events
        time.sleep(0.02)
    raise AssertionError(f"the history did not reach {n} events: {_events_now(path)}")


def test_history_values_of_worker_calls() -> None:
    assert history_value("nack", {"lease": LEASE, "delay": 0.5, "error": None}) == {
        "group": "g1", "msg": "m0-3", "seq": 7, "token": "w0:abc", "delay": 0.5,
    }  # fmt: skip
    invoked = history_value("claim", {"visibility": 2.0, "min_priority": 1, "wait": 1.0})
    assert ok_value("claim", invoked, None) is None
    assert ok_value("ack", {"x": 1}, None) == {"x": 1}


def _scenario(**workload: Any) -> Any:
    return parse_scenario("t", {"description": "d", "workload": workload}, "t.toml")


def test_worker_and_long_poll_keys_are_checked() -> None:
    s = _scenario(sync_claimers=0, async_claimers=0, worker_processes=2, long_poll=0.5)
    assert s.workload.worker_processes == 2 and s.workload.long_poll == 0.5
    with pytest.raises(ScenarioError, match="worker_processes"):
        _scenario(sync_claimers=0, async_claimers=0)
    with pytest.raises(ScenarioError, match="worker_concurrency"):
        _scenario(worker_processes=1, worker_concurrency=0)
    with pytest.raises(ScenarioError, match="long_poll'"):
        _scenario(long_poll=2)
    with pytest.raises(ScenarioError, match="long_poll_wait"):
        _scenario(long_poll_wait=0)


@pytest.mark.slow
def test_worker_processes_claim_and_survive_kills(run_scenario: Any, tmp_path: Path) -> None:
    path = tmp_path / "workers.toml"
    path.write_text(
        'description = "brief worker run"\nduration = 10.0\n[workload]\n'
        "sync_claimers = 0\nasync_claimers = 0\nworker_processes = 2\n"
        "worker_concurrency = 2\nworker_disrupt_every = 2.0\nworker_grace = 1.0\n"
        "extend_probability = 0.05\nnack_probability = 0.05\n"
        '[[faults]]\nkind = "kill-leader"\nstart = 3.0\nduration = 2.0\n'
    )
    result = run_scenario(str(path), plots=False)
    assert result.exit_code in (0, 3), (result.reason, result.summary)
    if result.exit_code == 3:  # too little work around the kill on a loaded machine: it
        assert result.check["coverage"]["reasons"], result.check  # says why, and no anomaly
    assert result.check["valid"] is True, result.check["anomalies"]
    events = read_history(result.run_dir / "history.jsonl")
    leases = [e for e in events if e["f"] == "claim" and e["type"] == "ok" and e["value"]]
    workers = {e["value"]["token"].split(":")[0] for e in leases}
    # two workers at a time, one replaced every ~2 s: more than the first two claimed
    assert {"w0", "w1"} <= workers and len(workers) > 2, workers
    by_signal = result.summary["worker_disruptions"]  # the pool's kills and stops
    assert set(by_signal) == {"SIGKILL", "SIGTERM"}, by_signal
    claimed = {w for w in workers if w.startswith("w")}  # d*: the drain's claimers
    # the pool starts two and one more per disruption, and a worker killed before its
    # first claim (a slow start on a loaded machine) claims nothing: no more workers
    # claimed than were started
    assert sum(by_signal.values()) >= 1, by_signal
    assert len(claimed) <= 2 + sum(by_signal.values()), (by_signal, claimed)
    acks = [e for e in events if e["f"] == "ack" and e["type"] == "ok"]
    assert len(acks) > 10
