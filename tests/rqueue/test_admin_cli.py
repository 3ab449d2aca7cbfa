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
        assert cli("dlq", "purge", "--all", "--yes", urls=queue_urls) == (3, "")
        assert "nothing matched" in capsys.readouterr().err
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


def test_no_nodes_is_a_clear_error(monkeypatch, capsys) -> None:
    monkeypatch.delenv(_cli.URL_ENV, raising=False)
    assert _cli.run(["stats"], out=io.StringIO()) == 2
    assert capsys.readouterr().err == "error: no nodes: give --url or set RQUEUE_URL\n"


def test_a_large_answer_arrives_whole(queue_urls) -> None:
    q = RqliteTransport.from_url(queue_urls)
    try:
        q.publish_many([("big", {"n": i, "pad": "x" * 200}) for i in range(2000)])
    finally:
        q.close()
    code, text = cli("peek", "big", "--limit", "2000", "--json", urls=queue_urls)
    assert code == 0 and len(text) > 400_000
    assert [json.loads(m["event"])["n"] for m in json.loads(text)] == list(range(2000))


# -- arguments: where they go, and what is refused before anything is sent ----------------

UNREACHABLE = "http://127.0.0.1:9"


def test_connection_options_go_before_or_after_the_subcommand(queue_urls) -> None:
    url = ",".join(queue_urls)
    for argv in (
        ["stats", "--json", "--url", url],
        ["dlq", "list", "--json", "--url", url, "--timeout", "5"],
        ["dlq", "--url", url, "list", "--json"],
        ["--timeout", "5", "peek", "g", "--json", "--url", url],
        ["--url", UNREACHABLE, "stats", "--json", "--url", url],  # the later one counts
    ):
        out = io.StringIO()
        assert _cli.run(argv, out=out) == 0, argv
        json.loads(out.getvalue())


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["stats", "--watch", "-1"], "--watch: must be a number of seconds > 0, got -1"),
        (["stats", "--watch", "0"], "--watch: must be a number of seconds > 0"),
        (["stats", "--watch", "nan"], "--watch: must be a number of seconds > 0"),
        (["stats", "--count", "2"], "--count needs --watch"),
        (["stats", "--watch", "1", "--count", "0"], "--count: must be >= 1"),
        (["peek", "g", "--limit", "0"], "--limit: must be between 1 and"),
        (["dlq", "list", "--after", "-1"], "--after: must be >= 0"),
        (["dlq", "redrive", "0"], "SEQ: must be > 0"),
        (["stats", "--timeout", "0"], "--timeout: must be a number of seconds > 0"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_sent(argv, says, capsys) -> None:
    code = _cli.run(["--url", UNREACHABLE, "--timeout", "1", *argv], out=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and says in err, err


# -- redrive and purge: nothing matched, and confirming a purge of everything -------------


class Terminal(io.StringIO):
    """Standard input that is a terminal, with the operator's answer typed in."""

    def isatty(self) -> bool:
        return True


def dead_letters(urls: list[str], n: int) -> list[int]:
    """Dead-letter ``n`` messages (one group each); their seqs."""
    q = RqliteTransport.from_url(urls, max_deliveries=1)
    try:
        seqs = q.publish_many([(f"p{i}", {"n": i}) for i in range(n)])
        for _ in range(n):
            q.nack(q.claim("w", VIS), 0, error="boom")
        assert q.claim("w", VIS) is None  # moves them all
        assert [d.seq for d in q.dead_letters()] == seqs
    finally:
        q.close()
    return seqs


def test_redrive_or_purge_that_matches_nothing_says_so(queue_urls, capsys) -> None:
    [seq] = dead_letters(queue_urls, 1)
    assert cli("dlq", "redrive", str(seq), urls=queue_urls) == (
        0,
        "1 redriven (back at the tail of their groups)\n",
    )
    for argv, says in (
        (("redrive", str(seq)), f"no dead letter with seq {seq}"),  # redriven already
        (("purge", "999999"), "no dead letter with seq 999999"),
        (("redrive", "--group", "nope"), "no dead letters of group 'nope'"),
        (("redrive", "--all"), "the dead-letter queue is empty"),
        (("purge", "--all", "--yes"), "the dead-letter queue is empty"),
    ):
        code, text = cli("dlq", *argv, urls=queue_urls)
        err = capsys.readouterr().err
        assert (code, text) == (3, ""), argv
        assert err.startswith("error: nothing matched: ") and says in err, err


def test_purge_all_asks_on_a_terminal(queue_urls, monkeypatch, capsys) -> None:
    dead_letters(queue_urls, 2)
    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    assert cli("dlq", "purge", "--all", urls=queue_urls) == (1, "")
    err = capsys.readouterr().err
    assert "purge all 2 dead letters" in err and "nothing was purged" in err
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    assert cli("dlq", "purge", "--all", urls=queue_urls) == (0, "2 purged\n")


def test_purge_all_without_a_terminal_needs_yes(queue_urls, monkeypatch, capsys) -> None:
    dead_letters(queue_urls, 1)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # a pipe, not a terminal
    assert cli("dlq", "purge", "--all", urls=queue_urls) == (2, "")
    err = capsys.readouterr().err
    assert "--yes" in err and "not a terminal" in err
    assert cli("dlq", "list", "--json", urls=queue_urls)[1] != "[]\n"  # nothing purged
    assert cli("dlq", "purge", "--all", "--yes", urls=queue_urls) == (0, "1 purged\n")


def test_a_named_queue_is_created_on_purpose(queue_urls, capsys) -> None:
    """A misspelt --queue is an error naming the queue and the cure, never a new empty
    queue; `queues create` makes one, and says so (or that it was there)."""
    name = f"fresh_{os.getpid()}"
    assert cli("peek", "g", "--queue", name, urls=queue_urls)[0] == 1  # no tables yet
    assert f"no queue '{name}'" in capsys.readouterr().err
    assert cli("publish", "g", '{"n": 1}', "--queue", name, urls=queue_urls) == (1, "")
    err = capsys.readouterr().err
    assert f"no queue '{name}'" in err and f"queues create {name}" in err
    assert name not in [q["name"] for q in json.loads(cli("queues", "--json", urls=queue_urls)[1])]

    assert cli("queues", "create", name, urls=queue_urls) == (0, f"queue {name} created\n")
    assert cli("queues", "create", name, urls=queue_urls) == (
        0,
        f"queue {name} exists already (its schema checked)\n",
    )
    status, out = cli("publish", "g", '{"n": 1}', "--queue", name, urls=queue_urls)
    assert status == 0 and out.strip().isdigit()
    status, out = cli("queues", "--json", urls=queue_urls)
    assert status == 0 and name in [q["name"] for q in json.loads(out)]
    with RqliteTransport.from_url(queue_urls, queue=name) as q:  # it exists: no create=
        lease = q.claim("w", VIS)
        assert lease is not None and json.loads(lease.event) == {"n": 1}
        q.ack(lease)
