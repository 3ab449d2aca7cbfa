"""The schema: the seed's two tables, plus what rqueue needs, and the migration.

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
        "lock_expiry REAL)"
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
)

#: columns rqueue added to the seed's tables: (table, column, declaration)
ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (("groups", "head_seq", "INTEGER"),)

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
