"""``python -m rqueue`` against the shared cluster: every command, and no credential
ever printed."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rqueue import RqliteTransport, _cli

ROOT = Path(__file__).resolve().parents[2]
VIS = 30.0


def cli(*argv: str, urls: list[str] | str) -> tuple[int, str]:
    out = io.StringIO()
    url = urls if isinstance(urls, str) else ",".join(urls)
    return _cli.run(["--url", url, "--timeout", "5", *argv], out=out), out.getvalue()


def test_stats_dlq_and_peek(queue_urls, capsys) -> None:
    q = RqliteTransport.from_url(queue_urls, max_deliveries=1)
    try:
        q.publish_many([("a", {"n": 1}, 2), ("a", {"n": 2}, 2), ("b", {"n": 3})])
        q.nack(q.claim("w", VIS), 0, error="boom")  # a's head: its one delivery
        held = q.claim("w", VIS)  # dead-letters a's head, leases b's
        assert held is not None and held.group_id == "b"

        code, text = cli("stats", "--json", urls=queue_urls)
        doc = json.loads(text)
        assert code == 0
        assert (doc["ready"], doc["leased"], doc["dead_lettered"], doc["groups"]) == (1, 1, 1, 2)
        assert doc["by_priority"]["2"]["ready"] == 1

        code, text = cli("stats", urls=queue_urls)
        assert code == 0 and "ready 1" in text and "dead-lettered 1" in text

        code, text = cli("stats", "--watch", "0.01", "--count", "2", "--json", urls=queue_urls)
        assert code == 0 and len(text.splitlines()) == 2

        code, text = cli("dlq", "list", "--json", urls=queue_urls)
        [dead] = json.loads(text)
        assert (dead["group_id"], dead["last_error"], dead["deliveries"]) == ("a", "boom", 1)

        code, text = cli("peek", "a", urls=queue_urls)
        assert code == 0 and "ready" in text and '{"n": 2}' in text

        code, text = cli("dlq", "redrive", str(dead["seq"]), urls=queue_urls)
        assert code == 0 and text.startswith("1 redriven")
        code, text = cli("peek", "a", "--json", urls=queue_urls)
        assert [json.loads(m["event"]) for m in json.loads(text)] == [{"n": 2}, {"n": 1}]

        assert cli("dlq", "purge", urls=queue_urls)[0] == 2  # no selection: refused
        assert "exactly one" in capsys.readouterr().err
        assert cli("dlq", "purge", "--all", urls=queue_urls) == (0, "0 purged\n")
        q.ack(held)
    finally:
        q.close()


def test_credentials_are_never_printed(capsys) -> None:
    code, text = cli("stats", urls="http://operator:s3cret-pw@127.0.0.1:9/")
    err = capsys.readouterr().err
    assert code == 1 and "error:" in err
    assert "s3cret-pw" not in err + text and "operator:" not in err + text


def test_python_dash_m_rqueue(queue_urls) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), _cli.URL_ENV: ",".join(queue_urls)}
    done = subprocess.run(
        [sys.executable, "-m", "rqueue", "stats", "--json"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert set(json.loads(done.stdout)) >= {"ready", "leased", "parked", "dead_lettered"}


def test_no_nodes_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.delenv(_cli.URL_ENV, raising=False)
    with pytest.raises(SystemExit, match="RQUEUE_URL"):
        _cli.run(["stats"], out=io.StringIO())


def test_a_large_answer_arrives_whole(queue_urls) -> None:
    q = RqliteTransport.from_url(queue_urls)
    try:
        q.publish_many([("big", {"n": i, "pad": "x" * 200}) for i in range(2000)])
    finally:
        q.close()
    code, text = cli("peek", "big", "--limit", "2000", "--json", urls=queue_urls)
    assert code == 0 and len(text) > 400_000
    assert [json.loads(m["event"])["n"] for m in json.loads(text)] == list(range(2000))
