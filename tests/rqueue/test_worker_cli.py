"""``python -m rqueue worker``, ``publish`` and ``peek`` against the shared cluster.

The worker runs as a real process (``python -m rqueue worker``) with handlers from
:mod:`tests.rqueue.worker_handlers`, which note what they did in a file; it is stopped
with SIGTERM mid-job, and the queue is read straight from the nodes afterwards.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rqueue import RqliteTransport, _cli
from rqueue._statements import SERVER_NOW

from .polling import query, wait_for

ROOT = Path(__file__).resolve().parents[2]
BOUND = 30.0


def cli(*argv: str, urls: list[str] | str) -> tuple[int, str]:
    out = io.StringIO()
    url = urls if isinstance(urls, str) else ",".join(urls)
    return _cli.run(["--url", url, "--timeout", "5", *argv], out=out), out.getvalue()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["nocolon"], "MODULE:NAME"),
        (["no_such_module_xyz:handle"], "cannot import 'no_such_module_xyz'"),
        (["json:nothing"], "has no 'nothing'"),
        (["tests.rqueue.worker_handlers:not_callable"], "not callable"),
        (["json:loads", "--concurrency", "0"], "--concurrency: must be >= 1"),
        (["json:loads", "--visibility", "-1"], "--visibility: must be a number of seconds > 0"),
        (["json:loads", "--grace", "nan"], "--grace: must be a number"),
        (["json:loads", "--retry-delay", "-2"], "--retry-delay: must be"),
        (["json:loads", "--max-deliveries", "0"], "--max-deliveries: must be >= 1"),
        (["json:loads", "--max-age", "0"], "--max-age: must be a number of seconds > 0"),
        (["json:loads", "--max-age", "inf"], "--max-age: must be a number of seconds > 0"),
        (["json:loads", "--observer", "json:nothing"], "has no 'nothing'"),
        (["json:loads", "--observer", "json:JSONDecoder"], "needs invoke() and complete()"),
        (
            ["json:loads", "--observer", "tests.rqueue.worker_handlers:Broken"],
            "RuntimeError: no recorder here",
        ),
        (["json:loads", "--request-timeout", "0"], "--request-timeout: must be"),
    ],
)
def test_a_configuration_error_exits_2_with_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("worker", *argv, urls="http://127.0.0.1:9")[0] == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and err.startswith("error: ")


def test_a_bad_url_or_none_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("worker", "json:loads", urls="ftp://x")[0] == 2
    assert "error: --url: scheme must be http or https" in capsys.readouterr().err
    monkeypatch.delenv("RQUEUE_URL", raising=False)
    assert _cli.run(["worker", "json:loads"]) == 2
    assert "no nodes" in capsys.readouterr().err
    monkeypatch.delenv("RQUEUE_PASSWORD", raising=False)
    assert cli("worker", "json:loads", "--user", "bob", urls="http://127.0.0.1:9")[0] == 2
    assert "--user needs $RQUEUE_PASSWORD" in capsys.readouterr().err


def test_publish_and_peek_show_who_holds_a_lease(queue_urls: list[str]) -> None:
    code, text = cli("publish", "g", '{"n": 1}', "--priority", "3", urls=queue_urls)
    assert code == 0
    first = int(text)
    code, text = cli("publish", "g", '{"n": 2}', "--dedup-id", "d-1", urls=queue_urls)
    second = int(text)
    assert code == 0 and second > first
    assert cli("publish", "g", '{"n": 2}', "--dedup-id", "d-1", urls=queue_urls) == (
        0,
        f"{second}\n",
    )
    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        lease = t.claim("alice", 30.0)
        assert lease is not None and json.loads(lease.event) == {"n": 1}
        code, text = cli("peek", "g", urls=queue_urls)
        held, ready = text.splitlines()
        assert "state='leased'" in held and "held_by='alice'" in held
        expires = float(held.split("expires_in=")[1].rstrip("s"))
        assert 25.0 < expires <= 30.0
        assert "state='ready'" in ready and "held_by" not in ready
        code, text = cli("peek", "g", "--json", urls=queue_urls)
        rows = json.loads(text)
        assert rows[0]["held_by"] == "alice" and rows[1]["held_by"] is None
        t.ack(lease)


def test_publish_refuses_what_is_not_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("publish", "g", "{nope", urls="http://127.0.0.1:9")[0] == 2
    assert "not a JSON document" in capsys.readouterr().err


def test_publish_with_a_delay_holds_the_message_until_it_is_due(queue_urls: list[str]) -> None:
    code, text = cli("publish", "g", '{"n": 1}', "--delay", "30", urls=queue_urls)
    assert code == 0
    seq = int(text)
    due = query(queue_urls, "SELECT deliver_at - enqueued_at FROM messages WHERE seq = ?", seq)
    assert due[0][0] == pytest.approx(30.0)
    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        assert t.claim("w", 30.0) is None
    code, text = cli("peek", "g", urls=queue_urls)
    assert code == 0 and "state='parked'" in text and "parked_until=" in text


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_publish_refuses_a_bad_delay(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("publish", "g", "{}", "--delay", value, urls="http://127.0.0.1:9")[0] == 2
    err = capsys.readouterr().err
    assert err == f"error: --delay: must be a number of seconds >= 0, got {float(value):g}\n"
    with pytest.raises(SystemExit) as exited:  # argparse: not a number at all
        cli("publish", "g", "{}", "--delay", "soon", urls="http://127.0.0.1:9")
    assert exited.value.code == 2
    assert "argument --delay: invalid float value: 'soon'" in capsys.readouterr().err


def start_worker(urls: list[str], log: Path, handler: str, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKER_TEST_LOG": str(log)}
    return subprocess.Popen(
        [
            sys.executable, "-m", "rqueue", "worker", handler, "--url", ",".join(urls),
            "--timeout", "20", *extra,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def noted(log: Path, what: str) -> set[int]:
    if not log.exists():
        return set()
    return {int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith(what)}


def stop(proc: subprocess.Popen, bound: float) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"the worker did not exit within {bound} s of SIGTERM") from None
    return proc.returncode, err


@pytest.mark.parametrize("handler", ["slow", "slow_async"])
def test_sigterm_mid_job_finishes_within_the_grace_and_loses_nothing(
    handler: str, queue_urls: list[str], tmp_path: Path
) -> None:
    log = tmp_path / "log"
    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        seqs = t.publish_many([(f"g{n % 3}", {"n": n, "sleep": 1.0}) for n in range(9)])
    proc = start_worker(
        queue_urls,
        log,
        f"tests.rqueue.worker_handlers:{handler}",
        "--concurrency", "3", "--visibility", "2", "--grace", "15",
    )  # fmt: skip
    try:
        wait_for("three jobs running", lambda: len(noted(log, "start")) >= 3, BOUND)
    finally:
        code, err = stop(proc, BOUND)
    assert code == 0, err
    done, started = noted(log, "done"), noted(log, "start")
    assert started <= done  # every job begun was finished in the grace period
    assert "stopped:" in err
    left = {row[0] for row in query(queue_urls, "SELECT seq FROM messages")}
    assert left == set(seqs) - done  # what was done is acked, the rest is still there
    held = query(queue_urls, "SELECT count(*) FROM messages WHERE locked_by IS NOT NULL")
    assert held[0][0] == 0


def test_sigterm_releases_jobs_that_outlive_the_grace(
    queue_urls: list[str], tmp_path: Path
) -> None:
    log = tmp_path / "log"
    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        seqs = t.publish_many([(f"g{n}", {"n": n, "sleep": 60}) for n in range(2)])
    proc = start_worker(
        queue_urls,
        log,
        "tests.rqueue.worker_handlers:slow",
        "--concurrency", "2", "--grace", "0.5", "--observer",
        "tests.rqueue.worker_handlers:Recorder",
    )  # fmt: skip
    try:
        wait_for("two jobs running", lambda: len(noted(log, "start")) == 2, BOUND)
    finally:
        code, err = stop(proc, BOUND)
    assert code == 0, err
    assert err.count("outlived the grace period") == 2
    assert sorted(row[0] for row in query(queue_urls, "SELECT seq FROM messages")) == seqs
    held = query(queue_urls, "SELECT count(*) FROM messages WHERE locked_by IS NOT NULL")
    assert held[0][0] == 0  # given back at once, not left to lapse
    calls = log.read_text().splitlines()
    assert calls.count("call nack ok") == 2 and "call claim ok" in calls


def test_max_age_reaches_the_workers_transport(queue_urls: list[str], tmp_path: Path) -> None:
    """``--max-age``: a message that waited behind a held head for longer is moved to the
    dead-letter queue by the worker's claim (retention), not handled."""
    log = tmp_path / "log"
    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        first, late = t.publish_many([("g", {"n": 1}), ("g", {"n": 2})])
        held = t.claim("blocker", 60.0)
        assert held is not None and held.seq == first
        proc = start_worker(queue_urls, log, "tests.rqueue.worker_handlers:slow", "--max-age", "1")
        try:
            old = (
                f"SELECT count(*) FROM messages WHERE seq = ? AND enqueued_at < {SERVER_NOW} - 1.5"
            )
            wait_for(
                "the second message past --max-age", lambda: query(queue_urls, old, late)[0][0]
            )
            t.ack(held)  # the old message is its group's head now: the next claim moves it
            dead = "SELECT reason FROM rqueue_dead WHERE seq = ?"
            moved = wait_for("the worker's claim to move it", lambda: query(queue_urls, dead, late))
        finally:
            code, err = stop(proc, BOUND)
    assert code == 0, err
    assert moved == [("retention",)] and late not in noted(log, "start")


def test_a_failure_logs_its_traceback_and_a_dead_lettering_is_logged(
    queue_urls: list[str], tmp_path: Path
) -> None:
    """With --max-deliveries 1: the handler's failure is logged with its traceback, and
    the next claim's move to the dead-letter queue is logged with what to do about it."""
    log = tmp_path / "log"
    with RqliteTransport.from_url(",".join(queue_urls)) as t:
        seq = t.publish("g", {"n": 1, "fail": True})
    proc = start_worker(
        queue_urls, log, "tests.rqueue.worker_handlers:slow", "--max-deliveries", "1"
    )
    try:
        dead = "SELECT seq FROM rqueue_dead"
        wait_for("the failed message dead-lettered", lambda: query(queue_urls, dead), BOUND)
    finally:
        code, err = stop(proc, BOUND)
    assert code == 0, err
    assert f"message {seq} of group 'g' failed: RuntimeError: job 1 failed on purpose" in err
    assert "Traceback (most recent call last)" in err and "worker_handlers.py" in err
    assert (
        f"message {seq} of group 'g' dead-lettered after 1 deliveries; last error: "
        "RuntimeError: job 1 failed on purpose (`python -m rqueue dlq list` shows it, "
        f"`dlq redrive {seq}` puts it back)"
    ) in err
