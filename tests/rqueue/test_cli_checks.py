"""``python -m rqueue``: every command checks its arguments before anything is sent (exit
2, one line naming the argument), whether or not the nodes answer; and a closed standard
output (``| head``) ends a command quietly.

The nodes here are a port that refuses connections and a listening socket that never
answers: a command that sent anything would have connected to the listener (seen as a
pending connection afterwards) and, with nothing answering, exited 1 after its timeout.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rqueue import _cli

ROOT = Path(__file__).resolve().parents[2]
LEASE = json.dumps({"seq": 7, "group_id": "g", "token": "w:t", "event": "{}", "origin": ""})


@pytest.fixture
def silent() -> Iterator[tuple[str, socket.socket]]:
    """Node URLs (one refusing, one listening and never answering) and the listener."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        port = listener.getsockname()[1]
        yield f"http://127.0.0.1:9,http://127.0.0.1:{port}", listener


def nothing_was_sent(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["publish", "g", "{}", "--priority", "7"], "--priority: must be between 0 and 4, got 7"),
        (["publish", "g", "NaN"], "JSON: not a JSON document (NaN is not JSON"),
        (["publish", "", "{}"], "group: must not be empty"),
        (["publish", "g", "{}", "--dedup-id", ""], "dedup-id: must not be empty"),
        (["stats", "--watch", "0"], "--watch: must be a number of seconds > 0"),
        (["peek", ""], "group: must not be empty"),
        (["queues", "--timeout", "nan"], "--timeout: must be a number of seconds > 0"),
        (["queues", "create", "Orders"], "NAME: 'Orders' is not a queue name"),
        (["dlq", "list", "--limit", "0"], "--limit: must be between 1 and"),
        (["dlq", "list", "--group", ""], "group: must not be empty"),
        (["dlq", "redrive", "--group", ""], "group: must not be empty"),
        (["dlq", "purge"], "give exactly one of SEQ, --group GROUP or --all"),
        (["claim", "--visibility", "0"], "--visibility: must be > 0, got 0"),
        (["claim", "--min-priority", "5"], "--min-priority: must be between 0 and 4, got 5"),
        (["claim", "--wait", "-1"], "--wait: must be >= 0"),
        (["ack", '{"seq": 7, "group_id": "g"}'], "LEASE: no token"),
        (["ack", "{"], "LEASE: not JSON"),
        (["ack", '{"seq": 7, "group_id": "g", "token": "t", "tokn": 1}'], "unknown field 'tokn'"),
        (["nack", LEASE, "--delay", "-1"], "--delay: must be >= 0"),
        (["worker", "json:loads", "--concurrency", "0"], "--concurrency: must be >= 1"),
        (["stats", "--ca-bundle", "/no/such/ca.pem"], "--ca-bundle: no such file: /no/such"),
        (["worker", "json:loads", "--ca-bundle", "/no/such/ca.pem"], "--ca-bundle: no such"),
    ],
)
def test_a_bad_argument_exits_2_before_anything_is_sent(
    argv: list[str], says: str, silent: tuple[str, socket.socket], capsys: pytest.CaptureFixture
) -> None:
    url, listener = silent
    out = io.StringIO()
    status = _cli.run(["--url", url, "--timeout", "2", *argv], out=out)
    err = capsys.readouterr().err
    assert (status, out.getvalue()) == (2, ""), err
    assert err.startswith("error: ") and says in err and err.count("\n") == 1, err
    assert nothing_was_sent(listener)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://127.0.0.1:4001", "--url: scheme must be http or https, got 'ftp'"),
        ("http://127.0.0.1:99999", "--url: bad port in 'http://127.0.0.1:99999'"),
        (",", "--url: no node URL given"),
    ],
)
@pytest.mark.parametrize("command", [["stats"], ["publish", "g", "{}"], ["claim"], ["ack", LEASE]])
def test_a_bad_url_exits_2(url: str, says: str, command: list[str], capsys) -> None:
    assert _cli.run(["--url", url, *command], out=io.StringIO()) == 2
    assert capsys.readouterr().err == f"error: {says}\n"


def test_a_lease_of_another_queue_is_refused_before_anything_is_sent(silent, capsys) -> None:
    url, listener = silent
    port = url.rpartition(":")[2]
    theirs = json.loads(LEASE) | {"origin": "http://10.0.0.1:4001"}
    assert _cli.run(["--url", url, "ack", json.dumps(theirs)], out=io.StringIO()) == 2
    assert "LEASE: claimed from http://10.0.0.1:4001, not from these nodes" in (
        capsys.readouterr().err
    )
    # the same nodes, but the lease names its queue and --queue another
    ours = json.loads(LEASE) | {"origin": f"http://127.0.0.1:{port}#queue=orders"}
    argv = ["--url", url, "nack", json.dumps(ours), "--queue", "other"]
    assert _cli.run(argv, out=io.StringIO()) == 2
    assert "give the claim's --url (any of its nodes), and its --queue" in capsys.readouterr().err
    assert nothing_was_sent(listener)


def test_a_closed_stdout_ends_a_command_quietly(queue_urls: list[str]) -> None:
    """`python -m rqueue queues | head -1`: the reader goes away; no traceback, 141 (as a
    Unix tool killed by SIGPIPE shows in a shell). The reader here closes before the
    first byte, so every write meets the closed pipe."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), _cli.URL_ENV: ",".join(queue_urls)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rqueue", "queues"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT,
    )  # fmt: skip
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert err.decode() == ""
    assert proc.returncode == 141
