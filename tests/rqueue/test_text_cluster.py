"""Every text a caller gives rqueue comes back exactly: both twins, a named queue and the
admin CLI (a real ``python -m rqueue`` process), on the cluster.

The node binds a string parameter shaped like a blob literal (``x'41'``) as a BLOB, as
rqlite >= 8.31 does; before rqueue sent such text as bytes read back by
``CAST(? AS TEXT)`` (:mod:`rqueue._text`), a group ``x'41'`` was stored as ``A``, and every
ack of its lease raised ``LeaseLost`` (``test_the_mutant_corrupts_blob_shaped_text``
shows it on the node, through the mutant subject that sends text as it is).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.subjects.mutants import BlobTextStatements
from rqueue import LeaseLost, RqliteTransport

from .test_text import ADVERSARIAL, BLOB_SHAPED

VIS = 30.0
NAMED = "texts"
TABLES = ("messages", "groups", "rqueue_dedup", "rqueue_dead")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLOW = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
#: a text field's text, and the event of a message: JSON text holding adversarial text
TEXTS = st.fixed_dictionaries(
    {
        "group": ADVERSARIAL,
        "other": ADVERSARIAL,
        "worker": ADVERSARIAL,
        "dedup": ADVERSARIAL,
        "error": ADVERSARIAL,
        "event": ADVERSARIAL.map(lambda s: json.dumps({"t": s}, ensure_ascii=False)),
        "named": st.booleans(),
    }
).filter(lambda t: t["group"] != t["other"])


def clear(urls: list[str]) -> None:
    """Empty the default queue's tables and the named queue's (created if absent)."""
    RqliteTransport.from_url(urls, queue=NAMED, create=True).close()
    stmts = [f"DELETE FROM {p}{t}" for p in ("", f"rq_{NAMED}__") for t in TABLES]
    r = requests.post(f"{urls[0]}/db/execute?transaction=true", json=stmts, timeout=10)
    assert r.status_code == 200 and "error" not in r.text, r.text


def round_trip(q: Any, moved: list[Any], t: dict[str, Any]) -> None:
    """Every queue operation with the texts ``t``; each text comes back exactly.
    ``q`` was opened with ``max_deliveries=1`` and reports dead letters into ``moved``."""
    group, other, worker, event, error = t["group"], t["other"], t["worker"], t["event"], t["error"]
    seq = q.publish(group, event, dedup_id=t["dedup"])
    assert q.publish(group, event, dedup_id=t["dedup"]) == seq  # the dedup id matched
    [queued] = q.peek(group)
    assert (queued.seq, queued.group_id, queued.event) == (seq, group, event)
    lease = q.claim(worker, VIS)
    assert (lease.seq, lease.group_id, lease.event) == (seq, group, event)
    assert q.peek(group)[0].held_by == worker
    lease = q.extend(lease, VIS)
    q.nack(lease, 0, error=error)  # its one delivery: the next claim dead-letters it
    q.publish_many([(group, event), (other, event, 1)])
    moved.clear()
    leases = q.claim_many(worker, VIS, 10)
    assert [(d.seq, d.group_id, d.event, d.last_error) for d in moved] == [
        (seq, group, event, error)
    ]
    assert sorted((x.group_id, x.event) for x in leases) == sorted([(group, event), (other, event)])
    assert q.ack_many(leases) == [None, None]
    [dead] = q.dead_letters(group)
    assert (dead.seq, dead.group_id, dead.event, dead.last_error) == (seq, group, event, error)
    assert q.stats().dead_lettered == 1
    assert q.redrive(group_id=group) == 1
    back = q.claim(worker, VIS)
    assert (back.group_id, back.event) == (group, event)
    q.publish(group, event)
    nxt = q.ack_and_claim(back, worker, VIS)
    assert (nxt.group_id, nxt.event) == (group, event)
    q.nack(nxt, 0, error=error)
    assert q.claim(worker, VIS) is None  # dead-lettered it
    assert [(d.group_id, d.last_error) for d in q.dead_letters(group)] == [(group, error)]
    assert q.purge(group_id=group) == 1
    stats = q.stats()
    assert (stats.queued, stats.dead_lettered) == (0, 0)


@pytest.fixture
def queues(queue_urls: list[str], connect: Any) -> dict[bool, tuple[Any, list[Any]]]:
    """The twin under test on the default queue (False) and on a named one (True), each
    with ``max_deliveries=1`` and a list of the dead letters its claims report."""
    out = {}
    for named in (False, True):
        moved: list[Any] = []
        q = connect(
            queue_urls,
            max_deliveries=1,
            on_dead_letter=moved.append,
            queue=NAMED if named else None,
            create=True,
        )
        out[named] = (q, moved)
    return out


def test_blob_shaped_text_in_every_field(queue_urls: list[str], queues: Any) -> None:
    shaped = dict(zip(["group", "other", "worker", "dedup", "error"], BLOB_SHAPED, strict=False))
    for named, (q, moved) in queues.items():
        clear(queue_urls)
        round_trip(q, moved, {**shaped, "event": "\"x'41'\"", "named": named})


@settings(SLOW, max_examples=12)
@given(texts=TEXTS)
def test_every_text_comes_back_exactly(queue_urls: list[str], queues: Any, texts: Any) -> None:
    clear(queue_urls)
    q, moved = queues[texts["named"]]
    round_trip(q, moved, texts)


def test_the_mutant_corrupts_blob_shaped_text(queue_urls: list[str], connect: Any) -> None:
    """Without the encoding (the mutant, and rqueue before it), the tests above fail."""
    mutant = type("Mutant", (RqliteTransport,), {"statements_class": BlobTextStatements})
    q = connect(queue_urls, cls=mutant if connect.twin == "sync" else None)
    if connect.twin == "async":
        q.transport._core.text_as_bytes = False  # the async twin, as the mutant sends
    q.publish("x'41'", {"n": 1})
    lease = q.claim("w", VIS)
    assert lease.group_id == "A"
    with pytest.raises(LeaseLost):
        q.ack(lease)


# -- the admin CLI, as a real process -----------------------------------------------------
CLI_TEXT = ADVERSARIAL.filter(lambda s: "\x00" not in s)  # argv cannot carry NUL


def rqueue_cli(urls: list[str], *argv: str) -> str:
    env = {**os.environ, "PYTHONPATH": ROOT, "RQUEUE_URL": ",".join(urls)}
    done = subprocess.run(
        [sys.executable, "-m", "rqueue", *argv], env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, (argv, done.stderr)
    return done.stdout


@pytest.mark.slow
@settings(SLOW, max_examples=6)
@given(group=CLI_TEXT, event=CLI_TEXT, dedup=CLI_TEXT, error=CLI_TEXT, named=st.booleans())
def test_the_admin_cli_keeps_every_text(
    queue_urls: list[str], group: str, event: str, dedup: str, error: str, named: bool
) -> None:
    clear(queue_urls)
    event = json.dumps({"t": event}, ensure_ascii=False)
    queue = ["--queue", NAMED] if named else []
    seq = int(rqueue_cli(queue_urls, "publish", f"--dedup-id={dedup}", *queue, "--", group, event))
    again = rqueue_cli(queue_urls, "publish", f"--dedup-id={dedup}", *queue, "--", group, event)
    assert int(again) == seq
    [m] = json.loads(rqueue_cli(queue_urls, "peek", "--json", *queue, "--", group))
    assert (m["seq"], m["event"]) == (seq, event)
    q = RqliteTransport.from_url(
        queue_urls, max_deliveries=1, queue=NAMED if named else None, create=True
    )
    try:
        for _ in range(2):
            q.nack(q.claim("w", VIS), 0, error=error)
            assert q.claim("w", VIS) is None  # dead-lettered it
            [d] = json.loads(
                rqueue_cli(queue_urls, "dlq", "list", "--json", f"--group={group}", *queue)
            )
            assert (d["group_id"], d["event"], d["last_error"]) == (group, event, error)
            action = "redrive" if _ == 0 else "purge"
            out = rqueue_cli(queue_urls, "dlq", action, f"--group={group}", *queue)
            assert out.startswith("1 ")
        assert q.stats().queued == 0 and q.stats().dead_lettered == 0
    finally:
        q.close()
