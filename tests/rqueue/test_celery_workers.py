"""Real ``celery worker`` processes on rqueue.celery (the app: tests/rqueue/celery_app.py):
a leader killed while tasks run (acks late and early), a retry's countdown held by the
queue, ``task_reject_on_worker_lost``, priority, a group header. Each run of a task
appends a line to a file named by its key, written before the task returns."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from rqueue import RqliteTransport
from rqueue.celery._mapping import queue_name

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def broker_of(cluster: Any) -> str:
    return "rqlite://" + ",".join(u.split("://", 1)[1] for u in cluster.urls)


def wait_for(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


class Runs:
    """The folder of run records: one file per task key, one JSON line per event."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def events(self, key: str) -> list[dict[str, Any]]:
        path = self.folder / key
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line]

    def starts(self, key: str) -> int:
        return sum(e["what"] == "start" for e in self.events(key))

    def ended(self, keys: list[str]) -> int:
        return sum(any(e["what"] == "end" for e in self.events(k)) for k in keys)


@contextmanager
def worker(
    broker: str,
    runs: Runs,
    queue: str,
    log: Path,
    *,
    concurrency: int = 2,
    acks_late: bool = True,
    reject_on_lost: bool = False,
    visibility: float = 60.0,
) -> Iterator[subprocess.Popen[bytes]]:
    """A ``celery worker`` process consuming ``queue``; stopped (SIGTERM, a warm
    shutdown) when the block ends, killed if it has not stopped within 30 s."""
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        RQUEUE_CELERY_BROKER=broker,
        RQUEUE_CELERY_RUNS=str(runs.folder),
        RQUEUE_CELERY_ACKS_LATE="1" if acks_late else "0",
        RQUEUE_CELERY_REJECT_ON_LOST="1" if reject_on_lost else "0",
        RQUEUE_CELERY_VISIBILITY=str(visibility),
    )
    cmd = [sys.executable, "-m", "celery", "-A", "tests.rqueue.celery_app", "worker",
           "-Q", queue, "-c", str(concurrency), "-n", f"{uuid.uuid4().hex[:8]}@%h",
           "--loglevel", "INFO", "--without-gossip", "--without-mingle",
           "--without-heartbeat"]  # fmt: skip
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                kill_worker(proc)


def kill_worker(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker and its pool processes (its own session), and reap it."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


@pytest.fixture
def producer_of() -> Iterator[Callable[[str], Celery]]:
    apps: list[Celery] = []

    def make(broker: str) -> Celery:
        app = Celery("producer", broker=broker)
        app.conf.broker_transport_options = {"timeout": 30.0, "request_timeout": 5.0}
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()


@pytest.mark.parametrize("acks_late", [True, False], ids=["acks-late", "acks-early"])
def test_leader_killed_every_task_runs_once(
    make_cluster: Any, producer_of: Any, tmp_path: Path, acks_late: bool
) -> None:
    cluster = make_cluster(nodes=3)
    broker, runs, queue = broker_of(cluster), Runs(tmp_path / "runs"), "leaderkill"
    app = producer_of(broker)
    keys = [f"k{i:03d}" for i in range(60)]
    with worker(broker, runs, queue, tmp_path / "worker.log", acks_late=acks_late):
        for key in keys[:40]:
            app.send_task("record", args=[key, 0.05], queue=queue)
        wait_for("10 tasks run before the kill", lambda: runs.ended(keys) >= 10, 60)
        leader = cluster.wait_for_leader(10.0)
        cluster.kill(leader.id)
        for key in keys[40:]:  # published while a new leader is elected
            app.send_task("record", args=[key, 0.05], queue=queue)
        wait_for("every task to run", lambda: runs.ended(keys) == len(keys), 120)
    twice = {k: runs.starts(k) for k in keys if runs.starts(k) != 1}
    assert not twice, f"tasks not run exactly once: {twice}"
    with RqliteTransport.from_url(cluster.urls, queue=queue_name(queue)) as rq:
        stats = rq.stats()
        assert (stats.ready, stats.leased, stats.parked) == (0, 0, 0)


def test_a_killed_workers_tasks_come_back_after_the_visibility_timeout(
    make_cluster: Any, producer_of: Any, tmp_path: Path
) -> None:
    cluster = make_cluster(nodes=1)
    broker, runs, queue = broker_of(cluster), Runs(tmp_path / "runs"), "killed"
    app = producer_of(broker)
    keys = [f"k{i:02d}" for i in range(12)]
    for key in keys:
        app.send_task("record", args=[key, 0.4], queue=queue)
    with worker(broker, runs, queue, tmp_path / "w1.log", visibility=4.0) as first:
        wait_for("3 tasks run", lambda: runs.ended(keys) >= 3, 60)
        kill_worker(first)  # its leases (running and prefetched tasks) lapse in 4 s
        killed_at = time.time()
    with worker(broker, runs, queue, tmp_path / "w2.log", visibility=4.0):
        wait_for("every task to run", lambda: runs.ended(keys) == len(keys), 60)
    for key in keys:
        ends = [e["t"] for e in runs.events(key) if e["what"] == "end"]
        if ends[0] < killed_at - 1.0:  # ended, and acked, well before the kill
            assert runs.starts(key) == 1, f"{key} ran again after its ack: {runs.events(key)}"
    redelivered = [k for k in keys if runs.starts(k) > 1 or runs.events(k)[0]["t"] > killed_at]
    assert redelivered, "no task was left to the second worker"


def test_retry_countdown_waits_in_the_queue(
    make_cluster: Any, producer_of: Any, tmp_path: Path
) -> None:
    cluster = make_cluster(nodes=1)
    broker, runs, queue = broker_of(cluster), Runs(tmp_path / "runs"), "retries"
    app = producer_of(broker)
    with (
        worker(broker, runs, queue, tmp_path / "worker.log", concurrency=1),
        RqliteTransport.from_url(cluster.urls, queue=queue_name(queue), create=True) as rq,
    ):
        app.send_task("retry_once", args=["r", 3.0], queue=queue)
        wait_for("the first run", lambda: runs.starts("r") >= 1, 30)
        # the retry is a delayed message in the queue, not one held by the worker
        wait_for("the retry parked in the queue", lambda: rq.stats().parked == 1, 2.5)
        wait_for("the retry's run", lambda: runs.starts("r") >= 2, 30)
    first, second = runs.events("r")[:2]
    assert second["retries"] == 1
    assert second["t"] - first["t"] >= 2.5


@pytest.mark.parametrize("reject_on_lost", [True, False], ids=["reject-on-lost", "ack-on-lost"])
def test_a_lost_worker_process(
    make_cluster: Any, producer_of: Any, tmp_path: Path, reject_on_lost: bool
) -> None:
    cluster = make_cluster(nodes=1)
    broker, runs, queue = broker_of(cluster), Runs(tmp_path / "runs"), "lost"
    app = producer_of(broker)
    log = tmp_path / "worker.log"
    with (
        worker(broker, runs, queue, log, reject_on_lost=reject_on_lost, visibility=60.0),
        RqliteTransport.from_url(cluster.urls, queue=queue_name(queue), create=True) as rq,
    ):
        app.send_task("die_once", args=["d"], queue=queue)
        wait_for("the run that dies", lambda: runs.starts("d") >= 1, 30)
        if reject_on_lost:  # given back (after worker_lost_wait), long before the lease lapses
            wait_for("the run after the lost one", lambda: runs.starts("d") == 2, 30)
        else:  # acked as failed: the message is gone, so it can never run again
            wait_for("the failure logged", lambda: b"WorkerLostError" in log.read_bytes(), 30)
            wait_for("the message acked", lambda: rq.stats().leased == 0, 10)
            stats = rq.stats()
            assert (stats.ready, stats.leased, stats.parked) == (0, 0, 0)
    assert runs.starts("d") == (2 if reject_on_lost else 1)
    first = runs.events("d")[0]["t"]
    assert runs.events("d")[-1]["t"] - first < 30.0  # not the 60 s visibility timeout


def test_priority_first(make_cluster: Any, producer_of: Any, tmp_path: Path) -> None:
    cluster = make_cluster(nodes=1)
    broker, runs, queue = broker_of(cluster), Runs(tmp_path / "runs"), "prio"
    app = producer_of(broker)
    for i in range(6):
        app.send_task("record", args=[f"low{i}"], queue=queue, priority=0)
    app.send_task("record", args=["high"], queue=queue, priority=9)
    keys = ["high", *(f"low{i}" for i in range(6))]
    with worker(broker, runs, queue, tmp_path / "worker.log", concurrency=1):
        wait_for("every task to run", lambda: runs.ended(keys) == len(keys), 60)
    order = sorted(keys, key=lambda k: runs.events(k)[0]["t"])
    assert order[0] == "high", order


def test_group_header_one_at_a_time_in_order(
    make_cluster: Any, producer_of: Any, tmp_path: Path
) -> None:
    cluster = make_cluster(nodes=1)
    broker, runs, queue = broker_of(cluster), Runs(tmp_path / "runs"), "grouped"
    app = producer_of(broker)
    keys = [f"g{i}" for i in range(5)]
    for key in keys:
        app.send_task("record", args=[key, 0.3], queue=queue, headers={"rqueue_group": "acct-1"})
    with worker(broker, runs, queue, tmp_path / "worker.log", concurrency=4):
        wait_for("every task to run", lambda: runs.ended(keys) == len(keys), 60)
    spans = [(runs.events(k)[0]["t"], runs.events(k)[-1]["t"]) for k in keys]
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, f"a group's tasks overlapped or ran out of order: {spans}"
