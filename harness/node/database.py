"""The SQLite state machine each node applies committed log entries to.

Results use rqlite's shapes (``command/encoding/json.go``): a write gives
``{"last_insert_id", "rows_affected"}``, a read ``{"columns", "types", "values"}``,
a failed statement ``{"error"}`` (a failed read, in associative form, ``{"rows": [],
"error"}``). :func:`render` drops empty fields exactly as rqlite's ``omitempty`` does.
The database lives in memory and is rebuilt from the Raft journal
(and the last snapshot) when a node starts.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import apsw

from .sqlexec import (
    EXECUTE_TIMEOUT,
    QUERY_TIMEOUT,
    SLOW,
    Deadline,
    WriteInQuery,
    check_named_fit,
    execute_slow,
    fast_bindings,
    is_empty,
    param_info,
    query_slow,
    run_rows,
    split,
    stepped_once,
)
from .statements import Statement
from .values import rows_result
from .versions import V10_API, Api

READ_ONLY_VIOLATION = "attempt to change database via query operation"
_VFS_IDS = itertools.count(1)

Result = dict[str, Any]


class _NotPrepared(Exception):
    """A statement that SQLite could not prepare (its message is SQLite's)."""


def _rows_from(description: tuple, rows: list) -> Result:
    """A rows result from a cursor's description and the rows it gave (see :mod:`.values`)."""
    return rows_result(description, rows)


def _error(message: str, read: bool = False) -> Result:
    """A failed statement; ``read``: rqlite reported it as a read's (``QueryRows.Error``),
    which the associative form writes with ``"rows": []``."""
    return {"kind": "error", "error": message, "read": read}


class _ClockVFS(apsw.VFS):
    """The default VFS, except that SQLite's own clock (``'now'`` that was not rewritten,
    ``CURRENT_TIMESTAMP``) is the node's clock, offset included."""

    def __init__(self, name: str, now: Callable[[], float]) -> None:
        self.name = name
        self._now = now
        super().__init__(name, base="")

    def xCurrentTimeInt64(self) -> int:
        return int((self._now() / 86400.0 + 2440587.5) * 86_400_000)


class Database:
    """One in-memory SQLite database, serialised by a lock (writes come from the Raft
    thread, reads from HTTP threads). ``now`` is the clock SQLite's date functions read;
    ``api`` the rqlite version's behaviour (whether ``EXPLAIN`` reads, how a read that
    would write fails)."""

    def __init__(
        self,
        now: Callable[[], float] = time.time,
        api: Api = V10_API,
        foreign_keys: bool = False,
    ) -> None:
        self._api = api
        self._foreign_keys = foreign_keys
        self._vfs = _ClockVFS(f"rqueue-clock-{next(_VFS_IDS)}", now)
        self._conn = self._open()
        self._lock = threading.RLock()

    def _open(self) -> apsw.Connection:
        """A connection without apsw's statement cache: rqlite keeps none (its driver
        prepares, runs and finalizes every statement of every request on every replica,
        ``db/db.go``), so each statement here is prepared afresh too, and a statement
        costs the node what it costs rqlite (docs/embedded-node.md, "Cost"). With
        ``foreign_keys`` (rqlited's ``-fk``) SQLite enforces them on every connection,
        a restored one included, as rqlite's ``_fk`` connection option does."""
        conn = apsw.Connection(":memory:", vfs=self._vfs.name, statementcachesize=0)
        if self._foreign_keys:
            conn.execute("PRAGMA foreign_keys=ON")
        return conn

    # -- writes (applied from the Raft log) -------------------------------------------
    def execute(
        self, stmts: Sequence[Statement], tx: bool, timings: bool, db_timeout: float = 0.0
    ) -> list[Result]:
        """Run writes (and RETURNING writes); with ``tx`` stop and roll back at the first
        error, as rqlite does."""
        return self._run(stmts, tx, timings, mixed=False, db_timeout=db_timeout)

    def request(
        self, stmts: Sequence[Statement], tx: bool, timings: bool, db_timeout: float = 0.0
    ) -> list[Result]:
        """Run a mix of reads and writes (``/db/request``): reads give rows."""
        return self._run(stmts, tx, timings, mixed=True, db_timeout=db_timeout)

    def _run(
        self,
        stmts: Sequence[Statement],
        tx: bool,
        timings: bool,
        mixed: bool,
        db_timeout: float = 0.0,
    ) -> list[Result]:
        results: list[Result] = []
        with self._lock, Deadline(self._conn, db_timeout) as deadline:
            if tx:
                self._conn.execute("BEGIN")
            failed = False
            for stmt in stmts:
                start = time.perf_counter()
                try:
                    res = self._run_one(stmt, mixed, deadline)
                except _NotPrepared as exc:  # rqlite: such a statement fails alone, even in a tx
                    res = _error(str(exc))
                except apsw.Error as exc:
                    # a read of /db/request fails as a read (rqlite: createEQQueryResponse)
                    read = mixed and not stmt.returning and bool(self._read_only_locked(stmt))
                    res = _error(str(exc), read)
                    failed = True
                if timings and res["kind"] != "error":
                    res["time"] = time.perf_counter() - start
                results.append(res)
                if failed and tx:
                    break
            if tx:
                # the batch itself may have ended the transaction already
                with contextlib.suppress(apsw.Error):
                    self._conn.execute("ROLLBACK" if failed else "COMMIT")
        return results

    def _run_one(self, stmt: Statement, mixed: bool, deadline: Deadline) -> Result:
        """One statement of a write request, under the request's ``db_timeout``."""
        if deadline.expired():
            if self._reads(stmt, mixed):
                raise apsw.InterruptError(QUERY_TIMEOUT)
            deadline.disarm()
        try:
            if mixed:
                res = self._mixed_one(stmt)
                if stmt.returning:
                    res.pop("tables", None)  # rqlite qualifies the columns of reads only
                return res
            if stmt.returning:
                res = self._query_one(stmt, read_only=False)
                res.pop("tables", None)
                return res
            return self._exec_one(stmt)
        except apsw.InterruptError:
            if not deadline.expired():
                raise
            raise apsw.InterruptError(
                QUERY_TIMEOUT if self._reads(stmt, mixed) else EXECUTE_TIMEOUT
            ) from None
        finally:
            deadline.rearm()

    def _reads(self, stmt: Statement, mixed: bool) -> bool:
        """Whether rqlite runs this statement of a write request as a query."""
        return stmt.returning or (mixed and bool(self._read_only_locked(stmt)))

    def _exec_one(self, stmt: Statement) -> Result:
        bindings = fast_bindings(stmt)
        if bindings is not SLOW:
            cur = self._conn.cursor()
            if type(bindings) is dict:
                cur.exec_trace = lambda c, _s, _b: check_named_fit(c, bindings) or True
            try:
                cur.execute(stmt.sql, bindings)
                return stepped_once(self._conn, cur)
            except (apsw.BindingsError, KeyError):
                pass  # the arguments do not fit: nothing ran; rqlite's rules below
        return execute_slow(self._conn, stmt)

    def _mixed_one(self, stmt: Statement) -> Result:
        """One statement of ``/db/request``: rows when SQLite says it only reads (or it has
        RETURNING), counts when it writes. Raises :class:`_NotPrepared` when it does not
        even prepare.

        rqlite asks SQLite first whether the statement reads (``StmtReadOnlyWithConn``:
        a prepare of its own) and prepares it again to run it, on every replica
        (``db.Request``); so does the node, for the same cost."""
        self._read_only_locked(stmt)  # the verdict's prepare; running it decides below
        bindings = fast_bindings(stmt)
        if bindings is not SLOW:
            try:
                return self._mixed_fast(stmt, bindings)
            except (apsw.BindingsError, KeyError):
                pass  # the arguments do not fit: nothing ran; rqlite's rules below
        first = next((p for p in split(stmt.sql) if not is_empty(p)), None)
        if first is None:
            return execute_slow(self._conn, stmt)
        try:
            read_only = param_info(self._conn, first)[2]
        except apsw.BindingsError:
            raise
        except apsw.Error as exc:
            raise _NotPrepared(str(exc)) from exc
        if read_only or stmt.returning:
            return query_slow(self._conn, stmt, read_only_conn=False)
        return execute_slow(self._conn, stmt)

    def _mixed_fast(self, stmt: Statement, bindings: Any) -> Result:
        """A single statement whose arguments fit, prepared once; its read-only verdict is
        taken as it starts."""
        cur = self._conn.cursor()
        started = False  # SQLite began running it: it prepared
        read_only = True
        described: tuple = ()

        def trace(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
            nonlocal started, read_only, described
            started = True
            check_named_fit(cursor, bindings)
            read_only = read_only and cursor.is_readonly
            if read_only or stmt.returning:
                described = cursor.description_full
            return True

        cur.exec_trace = trace
        try:
            cur.execute(stmt.sql, bindings)
            if not (stmt.returning or read_only):
                return stepped_once(self._conn, cur)
            rows = list(cur)
        except apsw.BindingsError:
            raise  # nothing ran (binding precedes running): the caller's slow path
        except UnicodeDecodeError:
            if not read_only:
                raise apsw.Error("invalid UTF-8 in a TEXT value") from None
            return run_rows(self._conn, stmt.sql, bindings)
        except apsw.Error as exc:
            if not started:
                raise _NotPrepared(str(exc)) from exc
            raise
        return _rows_from(described, rows)

    def is_read_only(self, stmt: Statement) -> bool:
        """Whether rqlite counts the statement (its first, if several) as a read when it
        decides how to serve a ``/db/request`` (``RORWCount``): SQLite's
        ``sqlite3_stmt_readonly``, or marked ``EXPLAIN`` by the processing (v9+); one that
        does not prepare counts as a write, so it goes through the log and fails there."""
        if stmt.explain:
            return True
        with self._lock:
            return bool(self._read_only_locked(stmt))

    def _read_only_locked(self, stmt: Statement) -> bool | None:
        """True/False as SQLite says, None when the statement does not even prepare."""
        bindings = fast_bindings(stmt)
        if bindings is not SLOW:
            cur = self._conn.cursor()
            verdict: list[bool] = []

            def trace(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
                verdict.append(cursor.is_readonly)
                return False  # only look, never run

            cur.exec_trace = trace
            try:
                cur.execute(stmt.sql, bindings)
            except apsw.ExecTraceAbort:
                return all(verdict) if verdict else True
            except (apsw.BindingsError, KeyError):
                pass  # look again below, without the arguments
            except apsw.Error:
                return None
            else:
                return all(verdict) if verdict else True
        first = next((p for p in split(stmt.sql) if not is_empty(p)), None)
        if first is None:
            return True
        try:
            return param_info(self._conn, first)[2]
        except apsw.Error:
            return None

    # -- reads -------------------------------------------------------------------------
    def query(
        self, stmts: Sequence[Statement], timings: bool, db_timeout: float = 0.0
    ) -> list[Result]:
        """Run reads; a statement that would write gets rqlite's read-only error. With
        ``db_timeout`` (seconds, :class:`~.sqlexec.Deadline`) every statement not finished
        when it passes gets ``query timeout``."""
        results: list[Result] = []
        with self._lock, Deadline(self._conn, db_timeout) as deadline:
            for stmt in stmts:
                start = time.perf_counter()
                try:
                    if deadline.expired():
                        raise apsw.InterruptError(QUERY_TIMEOUT)
                    res = self._query_one(stmt, read_only=True)
                except WriteInQuery:
                    res = _error(READ_ONLY_VIOLATION, read=True)
                except apsw.InterruptError as exc:
                    res = _error(QUERY_TIMEOUT if deadline.expired() else str(exc), read=True)
                except apsw.ReadOnlyError as exc:
                    # v10 reads on a query_only connection and remaps SQLite's refusal
                    message = READ_ONLY_VIOLATION if self._api.query_only_reads else str(exc)
                    res = _error(message, read=True)
                except apsw.Error as exc:
                    res = _error(str(exc), read=True)
                if timings and res["kind"] != "error":
                    res["time"] = time.perf_counter() - start
                results.append(res)
        return results

    def _query_one(self, stmt: Statement, read_only: bool) -> Result:
        # an EXPLAIN passes a read's check when marked (v9), or always on v10's query_only
        # connection (it writes nothing)
        explain_ok = read_only and (stmt.explain or self._api.query_only_reads)
        bindings = fast_bindings(stmt)
        if bindings is not SLOW:
            try:
                return run_rows(
                    self._conn, stmt.sql, bindings, refuse_writes=read_only, explain_ok=explain_ok
                )
            except (apsw.BindingsError, KeyError):
                pass  # the arguments do not fit: nothing ran; rqlite's rules below
        return query_slow(self._conn, stmt, read_only_conn=read_only, explain_ok=explain_ok)

    # -- snapshots ---------------------------------------------------------------------
    def serialize(self) -> bytes:
        with self._lock:
            return self._conn.serialize("main") or b""

    def restore(self, image: bytes) -> None:
        with self._lock:
            if image:
                self._conn.deserialize("main", image)
            else:
                self._conn.close()
                self._conn = self._open()


def render(result: Result, associative: bool = False, in_request: bool = False) -> dict:
    """One result as rqlite's JSON (``command/encoding/json.go``): empty fields left out
    (Go's ``omitempty``), keys in its structs' order. ``associative``: rows as objects,
    a read's error with ``"rows": []``, and in a request a write's counts with
    ``"rows": null``."""
    kind = result.get("kind")
    out: dict[str, Any] = {}
    if kind == "rows":
        if associative:  # keys in Go's map order (sorted), a repeated name: the last one
            cols = result["columns"]
            order = sorted(range(len(cols)), key=cols.__getitem__)
            types = result["types"]
            if cols:
                out["types"] = {cols[i]: types[i] for i in order}
            out["rows"] = [{cols[i]: row[i] for i in order} for row in result["values"]]
        else:
            for key in ("columns", "types", "values"):
                if result.get(key):
                    out[key] = result[key]
    elif kind == "exec":
        for key in ("last_insert_id", "rows_affected"):
            if result.get(key):
                out[key] = result[key]
    elif kind == "error":
        if associative and result.get("read"):
            out["rows"] = []
        out["error"] = result["error"]
    if result.get("time"):
        out["time"] = result["time"]
    if kind == "exec" and associative and in_request:
        out["rows"] = None
    return out


def qualified(result: Result) -> Result:
    """``result`` with its columns named ``table.column`` where SQLite knows the column's
    table (rqlite v10's ``qualify_columns``: ``sqlite3_column_table_name``)."""
    tables = result.get("tables")
    if result.get("kind") != "rows" or not tables:
        return result
    cols = [f"{t}.{c}" if t else c for c, t in zip(result["columns"], tables, strict=True)]
    return {**result, "columns": cols}
