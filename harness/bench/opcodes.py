"""How heavy the statements a client sends are: SQLite's program size per statement.

rqlite prepares every statement afresh on every replica (no statement cache), so a
statement's weight is paid each time it is applied: its parse and its compiled program,
triggers included. :class:`Opcodes` counts the program of each statement text
(``EXPLAIN``: one row per opcode) on an empty in-memory copy of a schema, so the count
is the same whatever the data; the bench reports opcodes per operation next to
statements per operation (:func:`harness.bench.cost.cost_row`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable
from typing import Any


class Opcodes:
    """Opcode counts of statements on an empty database with ``schema`` (SQL texts)."""

    def __init__(self, schema: Iterable[str]) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        for sql in schema:
            self._conn.execute(sql)
        self._cache: dict[str, int | None] = {}
        self._lock = threading.Lock()

    def of(self, sql: str) -> int | None:
        """The opcodes of ``sql`` (its first statement); None when it does not prepare
        here (another schema's statement)."""
        with self._lock:
            if sql not in self._cache:
                try:
                    rows = self._conn.execute(f"EXPLAIN {sql}", (None,) * sql.count("?"))
                    self._cache[sql] = len(rows.fetchall())
                except sqlite3.Error:
                    self._cache[sql] = None
            return self._cache[sql]

    def of_body(self, body: bytes) -> int | None:
        """The opcodes of every statement in an rqlite request body (None if any is
        unknown here)."""
        total = 0
        for stmt in json.loads(body):
            n = self.of(stmt if isinstance(stmt, str) else stmt[0])
            if n is None:
                return None
            total += n
        return total


def rqueue_schema(schema: Any) -> list[str]:
    """The SQL that makes rqueue's schema, from a ``rqueue._schema`` module."""
    return [s.sql for s in (*schema.TABLES, *schema.INDEXES, *schema.COUNTERS)]


_RQUEUE: Opcodes | None = None


def rqueue_opcodes() -> Opcodes:
    """One :class:`Opcodes` on this checkout's rqueue schema."""
    global _RQUEUE
    if _RQUEUE is None:
        from rqueue import _schema

        _RQUEUE = Opcodes(rqueue_schema(_schema))
    return _RQUEUE
