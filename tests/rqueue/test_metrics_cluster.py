"""The metrics against the shared cluster: what was done to the queue, scraped over HTTP.

The worker runs as a real process (``python -m rqueue worker --metrics-addr``), its
handler and a recording observer from :mod:`tests.rqueue.worker_handlers`; the exporter
both in this process (its collector and server, read on demand) and as the real command,
stopped by SIGTERM.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from rqueue import RqliteTransport
from rqueue._cli_exporter import Exporter
from rqueue._config import Settings
from rqueue._metrics import Address, Server

from .polling import query, wait_for
from .scrape import scrape, served_at, value

ROOT = Path(__file__).resolve().parents[2]
BOUND = 30.0


def start(log: Path, *argv: str, **env: str) -> subprocess.Popen[Any]:
    """``python -m rqueue ARGV``, its standard error into ``log``."""
    with log.open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "rqueue", *argv],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
        )


def stop(proc: subprocess.Popen[Any]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"{proc.args} did not exit within {BOUND} s of SIGTERM") from None


def noted(log: Path, line: str) -> int:
    return log.read_text().splitlines().count(line) if log.exists() else 0


def test_the_worker_serves_what_it_did(queue_urls: list[str], tmp_path: Path) -> None:
    """Five messages: three quick, one that runs past a third of its visibility (so its
    lease is extended), one that fails (and, with --max-deliveries 1, is dead-lettered
    by the next claim). The figures match the recording observer's, call for call."""
    calls, err = tmp_path / "calls", tmp_path / "err"
    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        events = [{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4, "sleep": 0.8}, {"n": 5, "fail": True}]
        t.publish_many([(f"g{e['n']}", e) for e in events])
    proc = start(
        err,
        "worker", "tests.rqueue.worker_handlers:slow", "--url", ",".join(queue_urls),
        "--metrics-addr", "127.0.0.1:0", "--concurrency", "2", "--visibility", "1.2",
        "--max-deliveries", "1", "--observer", "tests.rqueue.worker_handlers:Recorder",
        WORKER_TEST_LOG=str(calls),
    )  # fmt: skip
    try:
        url = served_at(err, BOUND)
        before = scrape(url)
        assert value(before, "rqueue_worker_acks_total", queue="default") is not None

        def settled() -> bool:
            return not query(queue_urls, "SELECT seq FROM messages") and bool(
                query(queue_urls, "SELECT seq FROM rqueue_dead")
            )

        wait_for("every message acked or dead-lettered", settled, BOUND)
        got = scrape(url)
    finally:
        assert stop(proc) == 0, err.read_text()

    def v(name: str, **labels: str) -> float | None:
        return value(got, name, queue="default", **labels)

    assert v("rqueue_worker_claims_total") == 5  # (the observer notes empty claims too)
    assert v("rqueue_worker_acks_total") == 4 == noted(calls, "call ack ok")
    assert v("rqueue_worker_nacks_total", reason="failed") == 1 == noted(calls, "call nack ok")
    assert v("rqueue_worker_nacks_total", reason="released") == 0
    assert v("rqueue_worker_failures_total") == 1
    assert v("rqueue_worker_dead_letters_total", reason="max_deliveries") == 1
    extended = v("rqueue_worker_lease_extensions_total")
    assert extended is not None and extended >= 1
    assert extended == noted(calls, "call extend ok")
    assert v("rqueue_worker_leases_lost_total") == 0
    assert v("rqueue_worker_leases_held") == 0
    assert v("rqueue_worker_handler_duration_seconds_count") == 5
    assert v("rqueue_worker_handler_duration_seconds_bucket", le="0.5") == 4
    assert v("rqueue_worker_handler_duration_seconds_bucket", le="2.5") == 5
    total = v("rqueue_worker_handler_duration_seconds_sum")
    assert total is not None and 0.8 <= total < 2.5
    assert value(got, "process_cpu_seconds_total") is not None  # the process's own


def test_a_worker_without_metrics_runs_without_the_library(
    queue_urls: list[str], tmp_path: Path
) -> None:
    """Where ``import prometheus_client`` fails, a worker without ``--metrics-addr``
    handles its messages and stops as ever."""
    calls, err = tmp_path / "calls", tmp_path / "err"
    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        t.publish("g", {"n": 1})
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from rqueue import _cli\n"
        "sys.exit(_cli.run(sys.argv[1:]))"
    )
    with err.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, "worker", "tests.rqueue.worker_handlers:slow",
             "--url", ",".join(queue_urls)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "WORKER_TEST_LOG": str(calls)},
            stdout=subprocess.DEVNULL, stderr=out,
        )  # fmt: skip
    try:
        wait_for("the message handled", lambda: calls.exists() and "done" in calls.read_text())
    finally:
        assert stop(proc) == 0, err.read_text()
    assert "stopped: 1 handled" in err.read_text()


# -- the exporter ---------------------------------------------------------------------------
@pytest.fixture
def named(queue_urls: list[str]) -> Iterator[str]:
    """A queue of this test alone, with two messages."""
    name = f"m{uuid.uuid4().hex[:10]}"
    with RqliteTransport.from_url(",".join(queue_urls), queue=name, create=True) as t:
        t.publish_many([("a", {"n": 1}), ("b", {"n": 2})])
    yield name


def test_the_exporter_serves_each_queues_depth(
    queue_urls: list[str], named: str, tmp_path: Path
) -> None:
    """Publish 6, claim 3, ack 1, nack 1 for a minute, with a seventh dead-lettered: every
    figure of the default queue is what was done, and the named queue is served too."""
    urls = ",".join(queue_urls)
    with RqliteTransport.from_url(urls, max_deliveries=1) as t:
        t.publish("x", {"n": 0})
        first = t.claim("w", 30.0)
        assert first is not None
        t.nack(first, error="E: once")  # its next claim moves it: one delivery is the most
        t.publish_many([(f"g{n}", {"n": n}) for n in range(1, 7)])
        claimed = [t.claim("w", 30.0) for _ in range(3)]
        assert [c.group_id for c in claimed if c] == ["g1", "g2", "g3"]
        t.ack(claimed[0])
        t.nack(claimed[1], delay=60.0)
    registry = CollectorRegistry()
    exporter = Exporter(Settings.build(urls, timeout=10.0), None, registry)
    server = Server(Address("127.0.0.1", 0), registry)
    try:
        assert exporter.read() is None
        got = scrape(server.url)
    finally:
        server.close()
        exporter.close()

    def v(name: str, queue: str = "default") -> float | None:
        return value(got, name, queue=queue)

    assert value(got, "rqueue_up") == 1
    assert v("rqueue_queue_messages") == 5  # 6 published, 1 acked
    assert v("rqueue_queue_ready_messages") == 3
    assert v("rqueue_queue_leased_messages") == 1
    assert v("rqueue_queue_parked_messages") == 1
    assert v("rqueue_queue_dead_lettered_messages") == 1
    assert v("rqueue_queue_groups") == 5
    age = v("rqueue_queue_oldest_ready_age_seconds")
    assert age is not None and 0 < age < BOUND
    assert v("rqueue_queue_ready_messages", named) == 2 == v("rqueue_queue_messages", named)
    assert v("rqueue_queue_dead_lettered_messages", named) == 0
    assert value(got, "rqueue_exporter_reads_total") == 1
    assert value(got, "rqueue_exporter_read_errors_total") == 0
    assert value(got, "rqueue_exporter_last_success_timestamp_seconds") is not None


def test_a_failed_reading_sets_up_to_0_and_serves_no_figures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nodes that do not answer: ``rqueue_up`` 0, no queue series, the failure logged
    once however many readings fail the same way."""
    registry = CollectorRegistry()
    exporter = Exporter(Settings.build("http://127.0.0.1:9", timeout=0.3), None, registry)
    server = Server(Address("127.0.0.1", 0), registry)
    try:
        with caplog.at_level(logging.INFO, "rqueue.exporter"):
            problems = {exporter.read(), exporter.read()}
        got = scrape(server.url)
    finally:
        server.close()
    (problem,) = problems
    assert problem is not None and "127.0.0.1:9" in problem
    assert [r.getMessage() for r in caplog.records] == [
        f"reading the queues failed: {problem} (rqueue_up is 0)"
    ]
    assert value(got, "rqueue_up") == 0
    assert value(got, "rqueue_exporter_reads_total") == 2
    assert value(got, "rqueue_exporter_read_errors_total") == 2
    assert value(got, "rqueue_exporter_last_success_timestamp_seconds") is None
    assert not [k for k in got if k[0].startswith("rqueue_queue_")]


def test_the_exporter_command_reads_every_interval_until_sigterm(
    queue_urls: list[str], named: str, tmp_path: Path
) -> None:
    """``--queue``: that queue alone; a message published later shows at a later reading;
    SIGTERM ends the command (exit 0) and its server."""
    err = tmp_path / "err"
    proc = start(
        err, "exporter", "--url", ",".join(queue_urls), "--queue", named,
        "--metrics-addr", "0", "--interval", "0.2",
    )  # fmt: skip
    try:
        url = served_at(err, BOUND)

        def ready() -> float | None:
            return value(scrape(url), "rqueue_queue_ready_messages", queue=named)

        assert wait_for("a first reading", ready, BOUND) == 2
        with RqliteTransport.from_url(",".join(queue_urls), queue=named) as t:
            t.publish("c", {"n": 3})
        wait_for("the third message in a later reading", lambda: ready() == 3, BOUND)
        got = scrape(url)
    finally:
        assert stop(proc) == 0, err.read_text()
    assert [k for k in got if k[0] == "rqueue_queue_messages"] == [
        ("rqueue_queue_messages", (("queue", named),))
    ]
    assert "stopped" in err.read_text()
    with pytest.raises(OSError):
        scrape(url)
