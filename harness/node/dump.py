"""``GET /db/backup?fmt=sql``: a SQL dump of a database image, in rqlite's layout.

``PRAGMA foreign_keys=OFF;`` and ``BEGIN TRANSACTION;``, then per table (by name) its
``CREATE`` statement and one ``INSERT INTO "t" VALUES(...);`` per row (values written by
SQLite's ``quote()``, text bytes as stored), then indexes, triggers and views, then
``COMMIT;``. ``sqlite_sequence`` is emptied and refilled, ``sqlite_stat1`` gets
``ANALYZE "sqlite_master";`` and its rows, other internal tables are left out. (As in
rqlite, a table with AUTOINCREMENT makes a dump that a fresh database refuses:
``sqlite_sequence`` is filled before the table that creates it.)
"""

from __future__ import annotations

import apsw


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def dump_sql(image: bytes) -> bytes:
    """The dump of the SQLite database ``image`` (the bytes of its file)."""
    conn = apsw.Connection(":memory:")
    try:
        if image:
            conn.deserialize("main", image)
        return b"".join(_lines(conn))
    finally:
        conn.close()


def _lines(conn: apsw.Connection) -> list[bytes]:
    out = [b"PRAGMA foreign_keys=OFF;\n", b"BEGIN TRANSACTION;\n"]
    tables = conn.execute(
        "SELECT name, CAST(sql AS BLOB) FROM sqlite_master "
        "WHERE sql NOT NULL AND type = 'table' ORDER BY name"
    ).fetchall()
    for name, sql in tables:
        if name == "sqlite_sequence":  # (rqlite writes these two with ";;")
            out.append(b'DELETE FROM "sqlite_sequence";;\n')
        elif name == "sqlite_stat1":
            out.append(b'ANALYZE "sqlite_master";;\n')
        elif name.startswith("sqlite_"):
            continue
        else:
            out.append(sql + b";\n")
        cols = [row[1] for row in conn.execute(f"PRAGMA table_info({_ident(name)})")]
        if not cols:
            continue
        values = " || ',' || ".join(f"quote({_ident(c)})" for c in cols)
        select = (
            f"SELECT CAST('INSERT INTO ' || {_quote_literal(_ident(name))} || ' VALUES(' || "
            f"{values} || ');' AS BLOB) FROM {_ident(name)}"
        )
        out.extend(row[0] + b"\n" for row in conn.execute(select))
    others = conn.execute(
        "SELECT CAST(sql AS BLOB) FROM sqlite_master "
        "WHERE sql NOT NULL AND type IN ('index', 'trigger', 'view') ORDER BY rowid"
    ).fetchall()
    out.extend(sql + b";\n" for (sql,) in others)
    out.append(b"COMMIT;\n")
    return out


def _quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
