"""Running one request statement the way rqlite v8's SQLite driver runs it.

rqlite hands each statement's SQL and arguments to ``database/sql`` and its SQLite driver
(a fork of mattn/go-sqlite3). Facts about that path, checked against v8.36.18:

- One string may hold several statements. Arguments are consumed in order: each statement
  takes as many as it has parameters (SQLite's ``bind_parameter_count``) and fails with
  ``not enough args to execute query: want N got M`` when fewer are left; surplus
  positional arguments are ignored; named ones are offered to every statement.
- A named argument binds to ``:name``, ``@name`` and ``$name``; one no statement uses binds
  nothing (the parameter stays NULL). A name must begin with a letter
  (``name ":v" does not begin with a letter``); an empty name is positional.
- A write (``execute``) runs every statement and answers the counts of the last; a
  statement that is only a comment or ``;`` answers zero counts (``{}``).
- A read (``query``) only prepares the statements before the last and runs the last, whose
  rows are the answer. Only the first statement is checked to be read-only; a later write
  fails on rqlite's read-only connection (``attempt to write a readonly database``).

The common case, one statement whose arguments fit, goes straight to apsw
(:func:`fast_bindings`); everything else goes through :func:`execute_slow` or
:func:`query_slow`, which prepare each statement to learn its parameters.
"""

from __future__ import annotations

import re
import time
from typing import Any

import apsw

from .statements import Statement
from .values import rows_result

#: :func:`fast_bindings`'s answer when the statement needs the slow path
SLOW = object()
READ_ONLY_CONNECTION = "attempt to write a readonly database"

Arg = tuple[str | None, Any]
_COUNT = re.compile(r"has (\d+) bindings")


class _NamedHere:
    """Marks, in a statement's positional arguments, where its named arguments stood in the
    request (``[sql, {"a": 1}, 2]``): the driver numbers arguments in request order."""

    def __repr__(self) -> str:
        return "NAMED_HERE"

    def __reduce__(self) -> str:
        return "NAMED_HERE"  # one instance, also through pickling (the Raft log)


NAMED_HERE = _NamedHere()


class ArgsError(apsw.Error):
    """The statement's arguments do not fit it (rqlite's driver's message)."""


class WriteInQuery(Exception):
    """The first statement of a read would write."""


def is_empty(sql: str) -> bool:
    """Whether ``sql`` holds no statement: only spaces, comments and semicolons."""
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in " \t\n\r\f\v;":
            i += 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            if j < 0:
                return True
            i = j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            if j < 0:
                return True
            i = j + 2
        else:
            return False
    return True


def fast_bindings(stmt: Statement) -> Any:
    """apsw's bindings for a statement apsw can run exactly as rqlite would, else :data:`SLOW`.

    (Argument counts that do not fit surface as ``apsw.BindingsError``/``KeyError`` before
    anything runs; the caller then takes the slow path.)"""
    sql = stmt.sql
    semi = sql.find(";")
    if semi >= 0 and semi != len(sql.rstrip()) - 1:
        return SLOW  # several statements, or a trailing comment
    if is_empty(sql):
        return SLOW
    if stmt.named:
        if stmt.positional:
            return SLOW
        for key in stmt.named:
            if not key[:1].isalpha():
                return SLOW
        return stmt.named
    return tuple(stmt.positional) if stmt.positional else None


def split(sql: str) -> list[str]:
    """The statements of ``sql`` (SQLite's own ``complete`` decides where one ends); a tail
    of spaces is dropped, a tail holding only a comment is kept (it runs as nothing)."""
    out: list[str] = []
    start = pos = 0
    while True:
        idx = sql.find(";", pos)
        if idx < 0:
            break
        if apsw.complete(sql[start : idx + 1]):
            out.append(sql[start : idx + 1])
            start = idx + 1
        pos = idx + 1
    rest = sql[start:]
    if rest.strip() or not out:
        out.append(rest)
    return out


def _quote(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def args_of(stmt: Statement) -> list[Arg]:
    """The statement's arguments in request order: the named ones where
    :data:`NAMED_HERE` stands, or else after the positional ones."""
    named: list[Arg] = []
    for key, value in stmt.named.items():
        if key == "":
            named.append((None, value))
            continue
        if not key[0].isalpha():
            raise ArgsError(f"name {_quote(key)} does not begin with a letter")
        named.append((key, value))
    out: list[Arg] = []
    for value in stmt.positional:
        if value is NAMED_HERE:
            out.extend(named)
            named = []
        else:
            out.append((None, value))
    return out + named


def param_info(conn: apsw.Connection, sql: str) -> tuple[int, tuple, bool]:
    """(parameter count, parameter names without prefix or None, read-only) of the first
    statement of ``sql``, prepared but not run. Raises SQLite's error if it does not prepare."""
    cur = conn.cursor()
    seen: list[tuple[int, tuple, bool]] = []

    def trace(cursor: apsw.Cursor, _sql: str, _bindings: Any) -> bool:
        seen.append((cursor.bindings_count, cursor.bindings_names, cursor.is_readonly))
        return False

    cur.exec_trace = trace
    bindings: tuple | None = None
    while True:
        try:
            cur.execute(sql, bindings)
        except apsw.ExecTraceAbort:
            pass
        except apsw.BindingsError as exc:
            m = _COUNT.search(str(exc))
            if m is None or bindings is not None:
                raise
            bindings = (None,) * int(m[1])
            continue
        break
    return seen[0] if seen else (0, (), True)


def _bind(count: int, names: tuple, args: list[Arg], start: int) -> tuple:
    """The values for parameters 1..count, as the driver binds ``args`` from ``start``."""
    window = args[start : start + count] + [
        a for i, a in enumerate(args) if (i < start or i >= count) and a[0]
    ]
    values: list[Any] = [None] * count
    for ordinal, (name, value) in enumerate(window, 1):
        if name is None:
            if ordinal <= count:
                values[ordinal - 1] = value
            continue
        for idx, pname in enumerate(names):
            if pname == name:
                values[idx] = value
    return tuple(values)


def execute_slow(conn: apsw.Connection, stmt: Statement) -> dict[str, Any]:
    """Run every statement in ``stmt.sql``; the counts of the last (``{}`` for nothing)."""
    args = args_of(stmt)
    start = 0
    counts = (0, 0)
    for piece in split(stmt.sql):
        if is_empty(piece):
            counts = (0, 0)
            continue
        count, names, _ = param_info(conn, piece)
        if len(args) - start < count:
            raise ArgsError(f"not enough args to execute query: want {count} got {len(args)}")
        done = stepped_once(conn, conn.cursor().execute(piece, _bind(count, names, args, start)))
        counts = (done["last_insert_id"], done["rows_affected"])
        start += count
    return {"kind": "exec", "last_insert_id": counts[0], "rows_affected": counts[1]}


def stepped_once(conn: apsw.Connection, cur: apsw.Cursor) -> dict[str, Any]:
    """The counts of a write ``cur`` just started, as rqlite's ``ExecContext`` reports them:
    go-sqlite3 (``execSync``) steps a statement once, reads ``last_insert_rowid()`` and
    ``changes()``, and finalizes it. A ``RETURNING`` write rqlite's parser did not mark
    (no ``ForceQuery``) makes all its changes in that step, but SQLite counts them only
    when it ends: ``rows_affected`` is the previous statement's, and its rows are lost."""
    counts = {"kind": "exec", "last_insert_id": conn.last_insert_rowid()}
    counts["rows_affected"] = conn.changes()
    cur.close()
    return counts


def query_slow(
    conn: apsw.Connection, stmt: Statement, read_only_conn: bool, explain_ok: bool = False
) -> dict[str, Any]:
    """Prepare every statement in ``stmt.sql`` and run the last: its rows. With
    ``read_only_conn`` (rqlite's query connection) a write fails as it would there (an
    ``EXPLAIN``, which writes nothing, passes with ``explain_ok``)."""
    args = args_of(stmt)
    pieces = split(stmt.sql)
    start = 0
    for k, piece in enumerate(pieces):
        if is_empty(piece):
            continue
        count, names, read_only = param_info(conn, piece)
        if explain_ok and not read_only and piece.lstrip()[:7].upper() == "EXPLAIN":
            read_only = True
        if not read_only and read_only_conn:
            if k == 0:
                raise WriteInQuery()
            if k == len(pieces) - 1:
                raise apsw.ReadOnlyError(READ_ONLY_CONNECTION)
        if len(args) - start < count:
            raise ArgsError(
                f"not enough args to execute query: want {count} got {len(args) - start}"
            )
        if k == len(pieces) - 1:
            return run_rows(conn, piece, _bind(count, names, args, start), explain_ok=explain_ok)
        start += count
    return {"kind": "rows", "columns": [], "types": [], "values": []}


def check_named_fit(cursor: apsw.Cursor, bindings: Any) -> None:
    """The driver's count check for named arguments (apsw binds by name and would not
    mind): a statement with more parameters than arguments fails."""
    if type(bindings) is dict and cursor.bindings_count > len(bindings):
        raise ArgsError(
            f"not enough args to execute query: want {cursor.bindings_count} got {len(bindings)}"
        )


def run_rows(
    conn: apsw.Connection,
    sql: str,
    bindings: Any,
    refuse_writes: bool = False,
    explain_ok: bool = False,
) -> dict[str, Any]:
    """Run one statement and return its rows result (:class:`WriteInQuery` if it would write
    and ``refuse_writes``, unless it is an ``EXPLAIN`` and ``explain_ok``); text that is not
    valid UTF-8 comes back with U+FFFD in place of the bad bytes, as rqlite's JSON encoder
    writes it."""
    cur = conn.cursor()
    described: list[tuple] = []

    def trace(cursor: apsw.Cursor, _sql: str, _bindings: Any) -> bool:
        check_named_fit(cursor, bindings)
        writes = not cursor.is_readonly and not (explain_ok and cursor.is_explain)
        if refuse_writes and writes:
            raise WriteInQuery()
        described[:] = [cursor.description_full]
        return True

    cur.exec_trace = trace
    try:
        rows = list(cur.execute(sql, bindings))
    except UnicodeDecodeError:
        return _rows_replacing_bad_text(conn, sql, bindings, described[0] if described else ())
    return rows_result(described[0] if described else (), rows)


def _rows_replacing_bad_text(
    conn: apsw.Connection, sql: str, bindings: Any, description: tuple
) -> dict[str, Any]:
    """Read again with every TEXT value fetched as a BLOB (and decoded leniently here). Only
    a statement usable as a subquery can be read so; another one fails with the decode error."""
    n = len(description)
    if n == 0 or not sql.lstrip().upper().startswith(("SELECT", "WITH", "VALUES")):
        raise apsw.Error("invalid UTF-8 in a TEXT value")
    cols = ", ".join(f"c{i}" for i in range(n))
    picks = ", ".join(
        f"CASE WHEN typeof(c{i}) = 'text' THEN CAST(c{i} AS BLOB) ELSE c{i} END, typeof(c{i})"
        for i in range(n)
    )
    inner = sql.rstrip().rstrip(";")
    wrapped = f"WITH _rqueue_q({cols}) AS ({inner}) SELECT {picks} FROM _rqueue_q"
    rows = []
    for raw in conn.cursor().execute(wrapped, bindings):
        rows.append(
            tuple(
                raw[2 * i].decode("utf-8", errors="replace")
                if raw[2 * i + 1] == "text"
                else raw[2 * i]
                for i in range(n)
            )
        )
    return rows_result(description, rows)


QUERY_TIMEOUT = "query timeout"
EXECUTE_TIMEOUT = "execute timeout"


class Deadline:
    """rqlite's ``db_timeout`` for one request: SQLite is interrupted once it has passed.

    As seen on v8.36.18: a read that is running when it passes, or starts after it, fails
    with ``query timeout``; a write running when it passes fails with ``execute timeout``,
    but a write that starts after it runs to its end (rqlite's interrupt comes before the
    statement starts, when SQLite ignores it).
    """

    def __init__(self, conn: apsw.Connection, seconds: float) -> None:
        self._conn = conn
        self._end = time.monotonic() + seconds if seconds > 0 else None
        self._armed = True

    def expired(self) -> bool:
        return self._end is not None and time.monotonic() >= self._end

    def disarm(self) -> None:
        """Let the statement about to start run to its end."""
        self._armed = False

    def rearm(self) -> None:
        self._armed = True

    def _interrupt(self) -> bool:
        return self._armed and self.expired()

    def __enter__(self) -> Deadline:
        if self._end is not None:
            self._conn.set_progress_handler(self._interrupt, 1000)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._end is not None:
            self._conn.set_progress_handler(None)
