"""Opening a database written by the release before leases moved to the group rows.

``data/release-406eb71.json`` is that release's database (``make_release_db.py`` wrote it
with the release's own code): a live lease, a park, a lapsed lease, dead letters, a dedup
record. Opened by this code, nothing is lost, the live lease and the park are honoured
(the lease's holder can still ack it; nobody else gets the group), the lapsed lease is
claimable again, and the counters of ``stats()`` stay exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rqueue import LeaseLost
from rqueue._models import Lease
from rqueue._schema import COUNTERS

from .fakes import SqliteExecutor
from .test_core_semantics import Queue

RELEASE = Path(__file__).parent / "data" / "release-406eb71.json"
QUEUED = "SELECT seq, group_id, event FROM messages ORDER BY seq"


def load() -> tuple[SqliteExecutor, dict]:
    data = json.loads(RELEASE.read_text())
    ex = SqliteExecutor()
    ex.conn.executescript("\n".join(data["dump"]))
    return ex, data


def recount(ex: SqliteExecutor) -> set:
    """What the counters should hold: counted afresh from the tables."""
    ex.sql("CREATE TEMP TABLE IF NOT EXISTS c (kind TEXT, priority INT, n INTEGER)")
    ex.sql("DELETE FROM c")
    count = next(c.sql for c in COUNTERS if c.sql.startswith("INSERT INTO rqueue_counts"))
    ex.sql(count.replace("rqueue_counts", "temp.c", 1))
    return {r for r in ex.sql("SELECT kind, priority, n FROM temp.c") if r[2]}


def counters(ex: SqliteExecutor) -> set:
    return {r for r in ex.sql("SELECT kind, priority, n FROM rqueue_counts") if r[2]}


@pytest.fixture
def migrated() -> tuple[Queue, dict, list]:
    ex, data = load()
    before = ex.sql(QUEUED)
    q = Queue(ex)
    q.clock.now = data["clock"]
    return q, data, before


def test_nothing_is_lost_and_the_leases_move_to_their_groups(migrated) -> None:
    q, data, before = migrated
    assert q.ex.sql(QUEUED) == before
    held, lapsed = (data["leases"][k] for k in ("held", "lapsed"))
    rows = q.ex.sql("SELECT group_id, head_seq, locked_by, lock_expiry, deliveries FROM groups")
    by_group = {r[0]: r[1:] for r in rows}
    assert by_group["b"] == (held["seq"], held["token"], held["expires_at"], 1)
    assert by_group["c"][1] == "__parked__" and by_group["c"][3] == 1
    assert by_group["e"] == (lapsed["seq"], lapsed["token"], lapsed["expires_at"], 1)
    assert by_group["a"][1:] == (None, None, 0)
    assert q.ex.sql("SELECT count(*) FROM messages WHERE locked_by IS NOT NULL") == [(0,)]
    assert q.ex.sql("SELECT count(*) FROM rqueue_dead") == [(2,)]
    assert counters(q.ex) == recount(q.ex)
    names = {r[0] for r in q.ex.sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert not any(n.startswith("rqueue_count_") for n in names)  # the old triggers are gone


def test_the_live_lease_and_the_park_are_honoured_the_lapsed_one_is_not(migrated) -> None:
    q, data, _ = migrated
    held, lapsed = (Lease(**data["leases"][k]) for k in ("held", "lapsed"))
    taken = []
    while (lease := q.claim()) is not None:
        taken.append(lease)
    groups = [lease.group_id for lease in taken]
    assert sorted(groups) == ["a", "d", "e"]  # not b (leased), not c (parked)
    assert next(x for x in taken if x.group_id == "e").seq == lapsed.seq
    with pytest.raises(LeaseLost):
        q.ack(lapsed)  # its lease lapsed and the message was claimed again
    q.ack(held)  # the holder from before the migration acks as always
    taken.append(q.claim())
    assert taken[-1].event == '"b1"'
    for lease in taken:
        q.ack(lease)
    assert q.claim() is None
    q.clock.now += 300.0  # the park runs out
    assert q.claim().event == '"c0"'
    assert counters(q.ex) == recount(q.ex)


def test_opening_again_changes_nothing(migrated) -> None:
    q, _, _ = migrated
    state = q.ex.sql("SELECT * FROM groups ORDER BY group_id")
    Queue(q.ex)
    assert q.ex.sql("SELECT * FROM groups ORDER BY group_id") == state
    assert counters(q.ex) == recount(q.ex)
