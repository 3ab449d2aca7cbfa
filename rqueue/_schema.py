"""The schema: the seed's two tables, plus what rqueue needs, and the migration.

Besides the queue itself: the dead-letter table ``rqueue_dead`` (messages moved out after
``max_deliveries`` claims) and ``rqueue_counts``, counters kept exact by triggers so that
``stats()`` reads a handful of rows instead of counting the queue (see :mod:`rqueue._stats`).

rqueue keeps the seed's table names (``groups`` included), so a seed-era database is
read as it is; no statement on ``groups`` holds a time function (see rqueue._render).

A group row holds its head's lease (``locked_by``, ``lock_expiry``: a token, or
``__parked__``), the head's delivery count and the group's round-robin key
(``last_claimed_at``), so a claim writes that one row; the trigger
``rqueue_head_advance`` deletes a head when its group moves on (an ack, a dead-letter
move). A delayed message (``messages.deliver_at``) parks its group while it is the head
and not yet due: the triggers ``rqueue_delay_new`` and ``rqueue_delay_head`` set the
park when it becomes the head, so every claim skips it as it skips a ``nack`` park.
Opening a database written before leases moved to the group rows adds the columns and
moves the leases over, tokens and expiries kept (:data:`MOVE_LEASES`): a lease or park
taken before the upgrade is honoured, its holder's ack or nack fenced as before. Stop
every worker of the older release before the first open by this one: an older worker
still running would not see the moved leases.

Opening a database written by the seed's protocol (no ``groups.head_seq``, no indexes,
no dedup table) adds the column, fills it in and creates the indexes. Every step is
idempotent, so transports opening the same database at once do no harm.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._models import Stmt
from ._statements import PARKED

TABLES: tuple[Stmt, ...] = (
    Stmt(
        "CREATE TABLE IF NOT EXISTS messages ("
        "seq INTEGER PRIMARY KEY AUTOINCREMENT, "
        "group_id TEXT NOT NULL, "
        "event TEXT NOT NULL, "
        "locked_by TEXT, "
        "lock_expiry REAL, "
        "deliveries INTEGER NOT NULL DEFAULT 0, "
        "last_error TEXT, "
        "enqueued_at REAL, "
        "deliver_at REAL)"
    ),
    Stmt(
        "CREATE TABLE IF NOT EXISTS groups ("
        "group_id TEXT PRIMARY KEY, "
        "last_claimed_at REAL NOT NULL DEFAULT 0.0, "
        "priority INT NOT NULL DEFAULT 0, "
        "head_seq INTEGER, "
        "locked_by TEXT, "
        "lock_expiry REAL, "
        "deliveries INTEGER NOT NULL DEFAULT 0, "
        "acked_by TEXT)"
    ),
    Stmt(
        "CREATE TABLE IF NOT EXISTS rqueue_dedup ("
        "dedup_id TEXT PRIMARY KEY, "
        "seq INTEGER NOT NULL, "
        "created_at REAL NOT NULL)"
    ),
    # idempotency keys of publishes (with their seq) and settled lease tokens ('ack:',
    # 'nack:'), kept KEY_TTL seconds: a write applied twice finds what the first did
    Stmt(
        "CREATE TABLE IF NOT EXISTS rqueue_keys ("
        "idem_key TEXT PRIMARY KEY, "
        "seq INTEGER, "
        "created_at REAL NOT NULL)"
    ),
    # the server time of the request being applied (see rqueue._render): one row
    Stmt(
        "CREATE TABLE IF NOT EXISTS rqueue_clock ("
        "id INTEGER PRIMARY KEY CHECK (id = 1), "
        "ts REAL NOT NULL)"
    ),
    # messages moved out of the queue after max_deliveries claims (rqueue._dlq)
    Stmt(
        "CREATE TABLE IF NOT EXISTS rqueue_dead ("
        "seq INTEGER PRIMARY KEY, "
        "group_id TEXT NOT NULL, "
        "event TEXT NOT NULL, "
        "priority INT NOT NULL DEFAULT 0, "
        "deliveries INTEGER NOT NULL, "
        "last_error TEXT, "
        "enqueued_at REAL, "
        "dead_at REAL, "
        "dead_by TEXT, "
        "reason TEXT)"
    ),
    # exact counts kept by triggers (COUNTERS): kind 'queued', 'groups', 'dead' per
    # priority; 'pending' (priority 0): messages whose group row is not written yet
    Stmt(
        "CREATE TABLE IF NOT EXISTS rqueue_counts ("
        "kind TEXT NOT NULL, "
        "priority INT NOT NULL, "
        "n INTEGER NOT NULL, "
        "PRIMARY KEY (kind, priority))"
    ),
)

#: columns rqueue added to the seed's tables: (table, column, declaration)
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("groups", "head_seq", "INTEGER"),
    ("groups", "locked_by", "TEXT"),
    ("groups", "lock_expiry", "REAL"),
    ("groups", "deliveries", "INTEGER NOT NULL DEFAULT 0"),
    ("groups", "acked_by", "TEXT"),
    ("messages", "deliveries", "INTEGER NOT NULL DEFAULT 0"),
    ("messages", "last_error", "TEXT"),
    ("messages", "enqueued_at", "REAL"),
    ("messages", "deliver_at", "REAL"),
    ("rqueue_dead", "reason", "TEXT"),
)
#: the tables ADDED_COLUMNS touches, in the order open() checks them
ALTERED_TABLES: tuple[str, ...] = ("groups", "messages", "rqueue_dead")

INDEXES: tuple[Stmt, ...] = (
    # a group's head: min(seq) per group, and publish/ack bookkeeping
    Stmt("CREATE INDEX IF NOT EXISTS rqueue_messages_group_seq ON messages (group_id, seq)"),
    # read-back and fencing by token
    Stmt(
        "CREATE INDEX IF NOT EXISTS rqueue_groups_locked_by ON groups (locked_by) "
        "WHERE locked_by IS NOT NULL"
    ),
    # the claim order: oldest-claimed group first, then its head's seq
    Stmt("CREATE INDEX IF NOT EXISTS rqueue_groups_order ON groups (last_claimed_at, head_seq)"),
    Stmt("CREATE INDEX IF NOT EXISTS rqueue_dedup_created ON rqueue_dedup (created_at)"),
    Stmt("CREATE INDEX IF NOT EXISTS rqueue_keys_created ON rqueue_keys (created_at)"),
    # heads claimed at least once: the dead-lettering finds exhausted ones here
    Stmt(
        "CREATE INDEX IF NOT EXISTS rqueue_groups_delivered ON groups (deliveries) "
        "WHERE deliveries > 0"
    ),
    # the layout before leases moved to the group rows kept them on messages
    Stmt("DROP INDEX IF EXISTS rqueue_messages_locked_by"),
    Stmt("DROP INDEX IF EXISTS rqueue_messages_delivered"),
    Stmt("CREATE INDEX IF NOT EXISTS rqueue_dead_by ON rqueue_dead (dead_by)"),
    Stmt("CREATE INDEX IF NOT EXISTS rqueue_dead_group ON rqueue_dead (group_id, seq)"),
)


def _bump(kind: str, priority: str, delta: str, *, extra: str = "") -> str:
    return (
        f"UPDATE rqueue_counts SET n = n + ({delta}) "
        f"WHERE kind = '{kind}' AND priority = {priority}{extra};"
    )


def _row(kind: str, priority: str) -> str:
    return (
        f"INSERT OR IGNORE INTO rqueue_counts (kind, priority, n) VALUES ('{kind}', {priority}, 0);"
    )


#: the rqueue_counts row a message of group ``{0}.group_id`` counts in: its group's
#: 'queued' row for the group's priority, or 'pending' while the group row is not written
_TALLY_ROW = (
    "coalesce((SELECT c.rowid FROM groups g JOIN rqueue_counts c ON c.kind = 'queued' "
    "AND c.priority = g.priority WHERE g.group_id = {0}.group_id), "
    "(SELECT rowid FROM rqueue_counts WHERE kind = 'pending' AND priority = 0))"
)
_IN_GROUP = "(SELECT count(*) FROM messages WHERE group_id = {}.group_id)"


#: the ``deliver_at`` of the head of group row ``{0}`` (NULL: due at once)
_DUE = "(SELECT deliver_at FROM messages WHERE seq = {0}.head_seq)"
#: park a free group whose head is delayed until it is due (rqueue._statements.PARKED)
_PARK = (
    f"UPDATE groups SET locked_by = '{PARKED}', lock_expiry = {_DUE.format('NEW')} "
    "WHERE group_id = NEW.group_id AND head_seq = NEW.head_seq AND locked_by IS NULL;"
)


#: the time a trigger stamps a settled token with: the request's stamped time (server
#: clock), else the newest key's (a worker's clock writes publishes' keys), else 0. Not
#: written as rqueue._render.CLOCK_REF, which would make the schema's request stamped
_KEY_TIME = (
    "coalesce((SELECT max(ts) FROM rqueue_clock), (SELECT max(created_at) FROM rqueue_keys), 0)"
)


def _tally(delta: str, row: str) -> str:
    return f"UPDATE rqueue_counts SET n = n + ({delta}) WHERE rowid = {row};"


#: triggers of the layout before this one (two UPDATEs per message written)
OLD_TRIGGERS: tuple[str, ...] = (
    "rqueue_count_publish",
    "rqueue_count_remove",
    "rqueue_count_group_add",
    "rqueue_count_group_drop",
    "rqueue_count_dead_add",
    "rqueue_count_dead_drop",
)

#: the triggers that keep rqueue_counts exact, after counting afresh what is there, and
#: the one that deletes a group's head when the group moves on; sent by open() in one
#: transaction when a trigger is missing (a database written before they existed, or
#: whose tables were dropped and created again), so no write falls between the count and
#: its triggers. A message written or removed costs one UPDATE of one counter row; a group
#: is only ever dropped empty (its messages are gone: nothing to move between counters)
COUNTERS: tuple[Stmt, ...] = (
    *(Stmt(f"DROP TRIGGER IF EXISTS {name}") for name in OLD_TRIGGERS),
    Stmt("DELETE FROM rqueue_counts"),
    Stmt(
        "INSERT INTO rqueue_counts (kind, priority, n) SELECT kind, priority, n FROM ("
        "SELECT 'pending' AS kind, 0 AS priority, (SELECT count(*) FROM messages m "
        "WHERE NOT EXISTS (SELECT 1 FROM groups g WHERE g.group_id = m.group_id)) AS n "
        "UNION ALL SELECT 'queued', g.priority, count(m.seq) FROM groups g "
        "LEFT JOIN messages m ON m.group_id = g.group_id GROUP BY g.priority "
        "UNION ALL SELECT 'groups', priority, count(*) FROM groups GROUP BY priority "
        "UNION ALL SELECT 'dead', priority, count(*) FROM rqueue_dead GROUP BY priority)"
    ),
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_tally_publish AFTER INSERT ON messages BEGIN "
        + _tally("1", _TALLY_ROW.format("NEW"))
        + " END"
    ),
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_tally_remove AFTER DELETE ON messages BEGIN "
        + _tally("-1", _TALLY_ROW.format("OLD"))
        + " END"
    ),
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_tally_group_add AFTER INSERT ON groups BEGIN "
        + _row("queued", "NEW.priority")
        + _row("groups", "NEW.priority")
        + _bump("groups", "NEW.priority", "1")
        + _bump("queued", "NEW.priority", _IN_GROUP.format("NEW"))
        + _bump("pending", "0", "-" + _IN_GROUP.format("NEW"))
        + " END"
    ),
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_tally_group_drop AFTER DELETE ON groups BEGIN "
        + _bump("groups", "OLD.priority", "-1")
        + " END"
    ),
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_tally_dead_add AFTER INSERT ON rqueue_dead BEGIN "
        + _row("dead", "NEW.priority")
        + _bump("dead", "NEW.priority", "1")
        + " END"
    ),
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_tally_dead_drop AFTER DELETE ON rqueue_dead BEGIN "
        + _bump("dead", "OLD.priority", "-1")
        + " END"
    ),
    # an ack or a dead-letter move points the group at its next message: the head it
    # leaves is done with (only a head is ever leased, acked or moved out)
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_head_advance AFTER UPDATE OF head_seq ON groups "
        "WHEN OLD.head_seq IS NOT NULL AND OLD.head_seq IS NOT NEW.head_seq BEGIN "
        "DELETE FROM messages WHERE seq = OLD.head_seq; END"
    ),
    # a delayed message that becomes its group's head (a new group's first message, or
    # the next one after an ack or a dead-letter move) parks the group until it is due;
    # never over a lease (every head advance releases the group in the same UPDATE)
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_delay_new AFTER INSERT ON groups "
        f"WHEN {_DUE.format('NEW')} IS NOT NULL BEGIN {_PARK} END"
    ),
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_delay_head AFTER UPDATE OF head_seq ON groups "
        "WHEN NEW.head_seq IS NOT NULL AND OLD.head_seq IS NOT NEW.head_seq "
        f"AND NEW.locked_by IS NULL AND {_DUE.format('NEW')} IS NOT NULL BEGIN {_PARK} END"
    ),
    # every applied ack (single, batched or fused: each writes its token to acked_by)
    # is remembered as 'ack:TOKEN', so an ack applied twice, or retried after a lost
    # reply, learns that the first application acked (the group row may be gone)
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_settled_ack AFTER UPDATE OF acked_by ON groups "
        "WHEN NEW.acked_by IS NOT NULL AND NEW.acked_by IS NOT OLD.acked_by BEGIN "
        "INSERT OR IGNORE INTO rqueue_keys (idem_key, seq, created_at) VALUES "
        f"('ack:' || NEW.acked_by, OLD.head_seq, {_KEY_TIME}); END"
    ),
)

#: leases, parks and delivery counts of heads move from the message rows (the layout
#: before this one) to their group rows, which hold them now; tokens are kept, so a lease
#: taken before the migration is acked, nacked or extended as before. Idempotent: the
#: message rows' copies are cleared in the same transaction
MOVE_LEASES: tuple[Stmt, ...] = (
    Stmt(
        "UPDATE groups SET "
        "locked_by = (SELECT m.locked_by FROM messages m WHERE m.seq = groups.head_seq), "
        "lock_expiry = (SELECT m.lock_expiry FROM messages m WHERE m.seq = groups.head_seq), "
        "deliveries = coalesce((SELECT m.deliveries FROM messages m "
        "WHERE m.seq = groups.head_seq), 0) "
        "WHERE locked_by IS NULL AND deliveries = 0 AND EXISTS (SELECT 1 FROM messages m "
        "WHERE m.seq = groups.head_seq AND (m.locked_by IS NOT NULL OR m.deliveries > 0))"
    ),
    Stmt(
        "UPDATE messages SET locked_by = NULL, lock_expiry = NULL, deliveries = 0 "
        "WHERE locked_by IS NOT NULL OR deliveries > 0"
    ),
)

#: fill in head_seq for groups written by the seed; drop group rows left without messages
BACKFILL: tuple[Stmt, ...] = (
    Stmt(
        "UPDATE groups SET head_seq = "
        "(SELECT min(seq) FROM messages m WHERE m.group_id = groups.group_id) "
        "WHERE head_seq IS NULL"
    ),
    Stmt("DELETE FROM groups WHERE head_seq IS NULL"),
)


def table_columns(table: str) -> Stmt:
    """Read the column names of ``table``."""
    return Stmt("SELECT name FROM pragma_table_info(?)", (table,))


def missing_columns(table: str, present: Iterable[str]) -> list[tuple[str, Stmt]]:
    """``(column, ALTER TABLE)`` adding each of rqueue's columns that ``table`` lacks."""
    have = set(present)
    return [
        (column, Stmt(f"ALTER TABLE {t} ADD COLUMN {column} {decl}"))
        for t, column, decl in ADDED_COLUMNS
        if t == table and column not in have
    ]


def is_duplicate_column(message: str) -> bool:
    """True for SQLite's error when another client added the column first."""
    return "duplicate column" in message.lower()


#: the names of the counters' triggers
COUNTER_TRIGGERS: tuple[str, ...] = tuple(
    s.sql.split()[5] for s in COUNTERS if s.sql.startswith("CREATE TRIGGER")
)
#: how many of them exist
COUNT_TRIGGERS = Stmt(
    "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN "
    f"({', '.join('?' * len(COUNTER_TRIGGERS))})",
    COUNTER_TRIGGERS,
)
