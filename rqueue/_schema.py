"""The schema: the seed's two tables, plus what rqueue needs, and the migration.

Besides the queue itself: the dead-letter table ``rqueue_dead`` (messages moved out after
``max_deliveries`` claims) and ``rqueue_counts``, counters kept exact by triggers so that
``stats()`` reads a handful of rows instead of counting the queue (see :mod:`rqueue._stats`).

rqueue keeps the seed's table names (``groups`` included), so a seed-era database is
read as it is; no statement on ``groups`` holds a time function (see rqueue._statements).

Opening a database written by the seed's protocol (no ``groups.head_seq``, no indexes,
no dedup table) adds the column, fills it in and creates the indexes. Every step is
idempotent, so transports opening the same database at once do no harm.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._models import Stmt

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
        "enqueued_at REAL)"
    ),
    Stmt(
        "CREATE TABLE IF NOT EXISTS groups ("
        "group_id TEXT PRIMARY KEY, "
        "last_claimed_at REAL NOT NULL DEFAULT 0.0, "
        "priority INT NOT NULL DEFAULT 0, "
        "head_seq INTEGER)"
    ),
    Stmt(
        "CREATE TABLE IF NOT EXISTS rqueue_dedup ("
        "dedup_id TEXT PRIMARY KEY, "
        "seq INTEGER NOT NULL, "
        "created_at REAL NOT NULL)"
    ),
    # the server time of the request being applied (see rqueue._statements): one row
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
        "dead_by TEXT)"
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
    ("messages", "deliveries", "INTEGER NOT NULL DEFAULT 0"),
    ("messages", "last_error", "TEXT"),
    ("messages", "enqueued_at", "REAL"),
)
#: the tables ADDED_COLUMNS touches, in the order open() checks them
ALTERED_TABLES: tuple[str, ...] = ("groups", "messages")

INDEXES: tuple[Stmt, ...] = (
    # a group's head: min(seq) per group, and publish/ack bookkeeping
    Stmt("CREATE INDEX IF NOT EXISTS rqueue_messages_group_seq ON messages (group_id, seq)"),
    # read-back and fencing by token
    Stmt(
        "CREATE INDEX IF NOT EXISTS rqueue_messages_locked_by ON messages (locked_by) "
        "WHERE locked_by IS NOT NULL"
    ),
    # the claim order: oldest-claimed group first, then its head's seq
    Stmt("CREATE INDEX IF NOT EXISTS rqueue_groups_order ON groups (last_claimed_at, head_seq)"),
    Stmt("CREATE INDEX IF NOT EXISTS rqueue_dedup_created ON rqueue_dedup (created_at)"),
    # heads claimed at least once: the dead-lettering finds exhausted ones here
    Stmt(
        "CREATE INDEX IF NOT EXISTS rqueue_messages_delivered ON messages (deliveries) "
        "WHERE deliveries > 0"
    ),
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


_GROUP_OF = "(SELECT priority FROM groups WHERE group_id = {}.group_id)"
_NO_GROUP = " AND NOT EXISTS (SELECT 1 FROM groups WHERE group_id = {}.group_id)"
_IN_GROUP = "(SELECT count(*) FROM messages WHERE group_id = {}.group_id)"

#: the triggers that keep rqueue_counts exact, after counting afresh what is there; sent
#: by open() in one transaction when a trigger is missing (a database written before the
#: counters existed, or whose tables were dropped and created again), so no write falls
#: between the count and its triggers
COUNTERS: tuple[Stmt, ...] = (
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
        "CREATE TRIGGER IF NOT EXISTS rqueue_count_publish AFTER INSERT ON messages BEGIN "
        + _bump("queued", _GROUP_OF.format("NEW"), "1")
        + _bump("pending", "0", "1", extra=_NO_GROUP.format("NEW"))
        + " END"
    ),
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_count_remove AFTER DELETE ON messages BEGIN "
        + _bump("queued", _GROUP_OF.format("OLD"), "-1")
        + _bump("pending", "0", "-1", extra=_NO_GROUP.format("OLD"))
        + " END"
    ),
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_count_group_add AFTER INSERT ON groups BEGIN "
        + _row("queued", "NEW.priority")
        + _row("groups", "NEW.priority")
        + _bump("groups", "NEW.priority", "1")
        + _bump("queued", "NEW.priority", _IN_GROUP.format("NEW"))
        + _bump("pending", "0", "-" + _IN_GROUP.format("NEW"))
        + " END"
    ),
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_count_group_drop AFTER DELETE ON groups BEGIN "
        + _bump("groups", "OLD.priority", "-1")
        + _bump("queued", "OLD.priority", "-" + _IN_GROUP.format("OLD"))
        + _bump("pending", "0", _IN_GROUP.format("OLD"))
        + " END"
    ),
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_count_dead_add AFTER INSERT ON rqueue_dead BEGIN "
        + _row("dead", "NEW.priority")
        + _bump("dead", "NEW.priority", "1")
        + " END"
    ),
    Stmt(
        "CREATE TRIGGER IF NOT EXISTS rqueue_count_dead_drop AFTER DELETE ON rqueue_dead BEGIN "
        + _bump("dead", "OLD.priority", "-1")
        + " END"
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


def missing_columns(table: str, present: Iterable[str]) -> list[Stmt]:
    """``ALTER TABLE`` statements adding rqueue's columns that ``table`` lacks."""
    have = set(present)
    return [
        Stmt(f"ALTER TABLE {t} ADD COLUMN {column} {decl}")
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
