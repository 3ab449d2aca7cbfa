"""``python -m rqueue claim``, ``ack`` and ``nack`` on the shared cluster: one message by
hand, the lease printed as JSON and taken back, fenced like any ack or nack."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rqueue import RqliteTransport, _cli

ROOT = Path(__file__).resolve().parents[2]


def cli(*argv: str, urls: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    return _cli.run(["--url", ",".join(urls), "--timeout", "5", *argv], out=out), out.getvalue()


def test_claim_prints_a_lease_that_ack_settles(queue_urls: list[str], capsys) -> None:
    with RqliteTransport.from_url(queue_urls) as q:
        seq = q.publish("g", {"n": 1})
        q.publish("g", {"n": 2})
    before = time.time()
    status, text = cli("claim", "--visibility", "60", "--worker-id", "alice", urls=queue_urls)
    assert status == 0 and text.count("\n") == 1
    lease = json.loads(text)
    assert set(lease) == {"seq", "group_id", "event", "token", "expires_at", "origin"}
    assert (lease["seq"], lease["group_id"], json.loads(lease["event"])) == (seq, "g", {"n": 1})
    assert before + 55 < lease["expires_at"] < time.time() + 65
    [held, behind] = json.loads(cli("peek", "g", "--json", urls=queue_urls)[1])
    assert (held["state"], held["held_by"], behind["state"]) == ("leased", "alice", "ready")
    assert cli("claim", urls=queue_urls) == (3, "")  # g is held: nothing else deliverable
    assert "nothing matched: no message is deliverable" in capsys.readouterr().err

    assert cli("ack", text, urls=queue_urls) == (0, f"acked message {seq} of group 'g'\n")
    assert [m["seq"] for m in json.loads(cli("peek", "g", "--json", urls=queue_urls)[1])] == [
        seq + 1
    ]
    # acked already by this lease: an ack is keyed by its token, so acking again (as a
    # server's resend of the first ack would) gives the same outcome, and nothing more
    assert cli("ack", text, urls=queue_urls) == (0, f"acked message {seq} of group 'g'\n")
    assert [m["seq"] for m in json.loads(cli("peek", "g", "--json", urls=queue_urls)[1])] == [
        seq + 1
    ]


def test_nack_gives_the_message_back_with_its_error(queue_urls: list[str], capsys) -> None:
    with RqliteTransport.from_url(queue_urls) as q:
        seq = q.publish("g", {"n": 1})
    _, text = cli("claim", urls=queue_urls)
    status, said = cli("nack", text, "--delay", "30", "--error", "bad date", urls=queue_urls)
    assert (status, said) == (0, f"nacked message {seq} of group 'g': deliverable again in 30 s\n")
    [m] = json.loads(cli("peek", "g", "--json", urls=queue_urls)[1])
    assert (m["seq"], m["state"], m["last_error"]) == (seq, "parked", "bad date")
    assert cli("nack", text, urls=queue_urls) == (1, "")  # the lease ended with the nack
    assert "is no longer leased" in capsys.readouterr().err


def test_claim_waits_for_a_message_to_come_due(queue_urls: list[str], capsys) -> None:
    with RqliteTransport.from_url(queue_urls) as q:
        seq = q.publish("g", {"n": 1}, delay=1.0)
    assert cli("claim", urls=queue_urls) == (3, "")  # not due yet
    assert "no message is deliverable" in capsys.readouterr().err
    status, text = cli("claim", "--wait", "20", urls=queue_urls)
    assert status == 0 and json.loads(text)["seq"] == seq
    assert cli("ack", text, urls=queue_urls)[0] == 0


def test_claim_piped_into_ack_on_a_named_queue(queue_urls: list[str]) -> None:
    """Real processes, as a shell runs them: the lease names its queue, so `ack -` needs
    no --queue."""
    name = f"hand_{os.getpid()}"
    url = ",".join(queue_urls)
    with RqliteTransport.from_url(url, queue=name, create=True) as q:
        seq = q.publish("g", {"n": 1})
        env = {**os.environ, "PYTHONPATH": str(ROOT), _cli.URL_ENV: url}
        claim = subprocess.run(
            [sys.executable, "-m", "rqueue", "claim", "--queue", name],
            env=env, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        assert json.loads(claim.stdout)["origin"].endswith(f"#queue={name}")
        ack = subprocess.run(
            [sys.executable, "-m", "rqueue", "ack", "-"],
            input=claim.stdout, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert (ack.returncode, ack.stdout) == (0, f"acked message {seq} of group 'g'\n"), ack
        assert q.stats().queued == 0
