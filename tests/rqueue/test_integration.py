"""Both twins against the shared 3-node cluster: the seed's semantics, end to end.

Each test starts from empty tables (``queue_urls``). Waits on lease time are bounded
polls on the condition under test.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
import requests

from rqueue import LeaseLost
from rqueue._statements import BATCH_ITEMS, DEFAULT_CLOCK_TOLERANCE, SERVER_CLOCK_STEP
from rqueue._version import LINEARIZABLE_READS

from .polling import wait_for

VIS = 30.0


def test_seed_semantics_script(connect, queue_urls) -> None:
    t = connect(",".join(queue_urls))
    a1 = t.publish("a", {"n": 1}, priority=1)
    a2 = t.publish("a", {"n": 2}, priority=1)
    b1 = t.publish("b", {"n": 3}, priority=3)
    c1 = t.publish("c", '{"n": 4}')

    # priority floor: only group b qualifies
    high = t.claim("w1", VIS, min_priority=2)
    assert (high.seq, high.group_id) == (b1, "b")
    assert t.claim("w1", VIS, min_priority=2) is None

    # without a floor: never-claimed groups first, oldest head first; one per group
    first = t.claim("w1", VIS)
    second = t.claim("w2", VIS)
    assert (first.seq, second.seq) == (a1, c1)
    assert t.claim("w3", VIS) is None  # a, b and c are all in flight

    t.ack(high)  # group b empties and disappears
    t.nack(second, 0)  # c free again right away
    again = t.claim("w3", VIS)
    assert again.seq == c1 and again.token != second.token
    t.ack(again)

    # park a's head: the group stays blocked until the delay passes, then FIFO resumes
    t.nack(first, delay=1.5)
    assert t.claim("w1", VIS) is None
    back = wait_for("the parked message", lambda: t.claim("w1", VIS))
    assert back.seq == a1
    t.ack(back)

    # a lapsed lease is claimable again
    short = t.claim("w1", 0.3)
    assert short.seq == a2
    relapsed = wait_for("the lapsed lease", lambda: t.claim("w2", VIS))
    assert relapsed.seq == a2
    t.ack(relapsed)
    assert t.claim("w1", VIS) is None


def test_expired_lease_ack_is_refused_and_the_new_holders_ack_succeeds(connect, queue_urls):
    t = connect(",".join(queue_urls))
    other = connect(",".join(reversed(queue_urls)))
    t.publish("g", "{}")
    old = t.claim("slow", 0.3)
    new = wait_for("the expired lease to be re-claimed", lambda: other.claim("fast", VIS))
    assert new.seq == old.seq
    with pytest.raises(LeaseLost):
        t.ack(old)
    with pytest.raises(LeaseLost):
        t.nack(old)
    with pytest.raises(LeaseLost):
        t.extend(old, VIS)
    other.ack(new)
    assert t.claim("w", VIS) is None


def test_extend_keeps_the_group_past_the_first_visibility(connect, queue_urls) -> None:
    t = connect(",".join(queue_urls))
    t.publish("g", "{}")
    started = time.monotonic()
    lease = t.claim("w", 2.0)
    t.extend(lease, VIS)
    # past the first visibility and the lapse margin (clock tolerance + one clock step)
    lapsed = 2.0 + DEFAULT_CLOCK_TOLERANCE + SERVER_CLOCK_STEP + 0.2
    wait_for("the first lease to lapse", lambda: time.monotonic() - started > lapsed)
    assert t.claim("w2", VIS) is None
    t.ack(lease)


def test_events_are_stored_verbatim(connect, queue_urls) -> None:
    t = connect(",".join(queue_urls))
    text = '{ "spaced" :  [1, 2],\n "ü": null }'
    t.publish("g", text)
    t.publish("h", {"k": [1, "ü"]})
    got = {lease.group_id: lease.event for lease in (t.claim("w", VIS), t.claim("w", VIS))}
    assert got == {"g": text, "h": '{"k": [1, "\\u00fc"]}'}


def test_publish_with_dedup_id_stores_once(connect, queue_urls) -> None:
    t = connect(",".join(queue_urls))
    first = t.publish("g", "{}", dedup_id="m-1")
    assert t.publish("g", "{}", dedup_id="m-1") == first
    t.ack(t.claim("w", VIS))
    assert t.publish("g", "{}", dedup_id="m-1") == first
    assert t.claim("w", VIS) is None


def test_publish_many(connect, queue_urls) -> None:
    t = connect(",".join(queue_urls))
    seqs = t.publish_many([("g", {"i": i}, 2) for i in range(50)] + [("h", "[]")])
    assert len(seqs) == 51 and seqs == sorted(seqs)
    lease = t.claim("w", VIS, min_priority=2)
    assert (lease.seq, lease.event) == (seqs[0], '{"i": 0}')


def test_publish_many_in_chunks_keeps_order_heads_and_counts(connect, queue_urls) -> None:
    """More items than one batch statement takes: seqs come back in item order and name
    the rows stored; each new group's head and priority are its first item's; a group
    that already exists keeps its own; the counters behind stats() stay exact."""
    t = connect(",".join(queue_urls))
    old = t.publish("old", '"first"', priority=4)
    items = [(f"g{i % 7}", {"i": i}, i % 3) for i in range(BATCH_ITEMS * 2 + 3)]
    items[10] = ("old", {"i": 10}, 1)
    seqs = t.publish_many(items)
    assert len(seqs) == len(items) and seqs == sorted(seqs) and seqs[0] > old
    session = requests.Session()
    stored = dict(_rows(session, queue_urls, "SELECT seq, event FROM messages WHERE seq > ?", old))
    assert stored == {seq: json.dumps(item[1]) for seq, item in zip(seqs, items, strict=True)}
    heads = _rows(session, queue_urls, "SELECT group_id, priority, head_seq FROM groups")
    want = {"old": (4, old)}
    for seq, (group, _, prio) in zip(seqs, items, strict=True):
        want.setdefault(group, (prio, seq))
    assert {g: (p, h) for g, p, h in heads} == want
    s = t.stats()
    assert (s.ready, s.groups) == (len(items) + 1, 8)
    # FIFO per group follows the returned seqs
    lease = t.claim("w", VIS, min_priority=4)
    assert (lease.group_id, lease.seq) == ("old", old)
    t.ack(lease)
    nxt = t.claim("w", VIS, min_priority=4)
    assert (nxt.group_id, nxt.seq) == ("old", seqs[10])


def _rows(session: requests.Session, urls: list[str], sql: str, *params) -> list[list]:
    """Rows of a strong read (through whichever node leads)."""
    for url in urls:
        r = session.post(
            f"{url}/db/query?level=strong", json=[[sql, *params]], timeout=10, allow_redirects=True
        )
        if r.status_code == 200:
            return r.json()["results"][0].get("values", [])
    raise AssertionError(f"no node answered {sql!r}")


def test_old_protocol_on_the_same_cluster(connect, queue_urls, monkeypatch) -> None:
    """``assume_version`` below 8.23/8.33: three-request claim, worker clock."""
    t = connect(",".join(queue_urls), assume_version="v8.0.0")
    assert not t.server.one_request_claim
    t.publish("g", '"a"')
    t.publish("g", '"b"')
    lease = t.claim("w", VIS)
    assert lease.event == '"a"' and t.claim("w", VIS) is None
    t.ack(lease)
    assert t.claim("w", VIS).event == '"b"'


@pytest.mark.needs_rqlite(LINEARIZABLE_READS, "read_consistency='linearizable'")
def test_linearizable_reads(connect, queue_urls) -> None:
    """Opening reads the schema with level=linearizable; the queue works as usual."""
    t = connect(",".join(queue_urls), read_consistency="linearizable")
    t.publish("g", "{}")
    t.ack(t.claim("w", VIS))
    assert t.claim("w", VIS) is None


SEED_SCHEMA = [
    "DROP TABLE IF EXISTS messages",
    "DROP TABLE IF EXISTS groups",
    "DROP TABLE IF EXISTS rqueue_dedup",
    "CREATE TABLE messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, group_id TEXT NOT NULL,"
    " event TEXT NOT NULL, locked_by TEXT, lock_expiry REAL)",
    "CREATE TABLE groups (group_id TEXT PRIMARY KEY, last_claimed_at REAL NOT NULL"
    " DEFAULT 0.0, priority INT NOT NULL DEFAULT 0)",
    "INSERT INTO messages (group_id, event) VALUES ('old', '1'), ('old', '2')",
    "INSERT INTO groups (group_id, priority) VALUES ('old', 2)",
]


def test_opening_a_seed_era_database_migrates_it(connect, queue_urls) -> None:
    r = requests.post(f"{queue_urls[0]}/db/execute?transaction=true", json=SEED_SCHEMA, timeout=10)
    assert r.status_code == 200 and "error" not in r.text, r.text
    t = connect(",".join(queue_urls))
    lease = t.claim("w", VIS, min_priority=2)
    assert (lease.group_id, lease.event) == ("old", "1")
    t.ack(lease)
    assert t.claim("w", VIS).event == "2"


def test_concurrent_claimers_keep_exclusivity_and_fifo(connect, queue_urls) -> None:
    """Eight claimers share one transport (threads, or tasks on one loop)."""
    t = connect(",".join(queue_urls))
    t.publish_many([(f"g{i % 4}", {"i": i}) for i in range(80)])
    held: dict[str, str] = {}
    order: dict[str, list[int]] = {}
    problems: list[str] = []

    # a group is held from its claim's answer until just before its ack is sent (after
    # that the server may free it); another claim answered inside that window is a bug
    def leased(lease, who: str) -> None:
        if lease.group_id in held:
            problems.append(f"{who} leased {lease.group_id} held by {held[lease.group_id]}")
        held[lease.group_id] = who
        order.setdefault(lease.group_id, []).append(lease.seq)

    if connect.twin == "sync":

        def work(who: str) -> None:
            while (lease := t.claim(who, VIS)) is not None or held:
                if lease is not None:
                    leased(lease, who)
                    time.sleep(0.005)  # work, while other claimers run
                    del held[lease.group_id]
                    t.ack(lease)

        threads = [threading.Thread(target=work, args=(f"w{k}",)) for k in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=60)
    else:
        a = t.transport

        async def work(who: str) -> None:
            while (lease := await a.claim(who, VIS)) is not None or held:
                if lease is not None:
                    leased(lease, who)
                    await asyncio.sleep(0.005)  # work, while other claimers run
                    del held[lease.group_id]
                    await a.ack(lease)

        async def all_workers() -> None:
            await asyncio.gather(*(work(f"w{k}") for k in range(8)))

        t._loop.run_until_complete(all_workers())
    assert not problems, problems
    assert sum(len(v) for v in order.values()) == 80
    assert all(seqs == sorted(seqs) for seqs in order.values())
