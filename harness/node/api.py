"""rqlite's ``/db/execute``, ``/db/query`` and ``/db/request`` (the request logic, apart
from the HTTP plumbing in :mod:`.httpd`, forwarding in :mod:`.relay` and the cluster
endpoints in :mod:`.admin`).

Bodies are parsed by :mod:`.body`, statements run by :mod:`.database` and
:mod:`.sqlexec`, values rendered by :mod:`.values`. What differs between the rqlite
versions the node follows (``--rqlite-version``) is decided by :mod:`.rules` from
:class:`.versions.Api`; queued writes are :mod:`.write_queue`; the requests are counted as
rqlite counts them (:mod:`.stats`).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from .admin import ClusterEndpoints
from .body import NO_STATEMENTS
from .body import parse as parse_body
from .clock import OffsetClock
from .config import NodeConfig
from .database import Database, qualified, render
from .forward import (
    DEFAULT_TIMEOUT,
    EXPLAIN_HEADER,
    FORCE_QUERY_HEADER,
    FORWARDED_HEADER,
    Forwarder,
    ForwardError,
)
from .membership import MembershipEndpoints
from .raft import BARRIER, EXECUTE, QUERY, REQUEST, CommitUnknown, NotApplied, RaftStore
from .relay import LEADER_NOT_FOUND, LeaderRelay, answer_error, wire_body
from .replies import Reply, json_reply, text_reply
from .rules import (
    DISALLOWED_PRAGMA,
    LINEARIZABLE,
    LOCAL,
    LOG,
    NONE,
    breaking_pragma,
    marks_explain,
    read_path,
    rewrite_flags,
)
from .rules import EXECUTE as AT_EXECUTE
from .rules import QUERY as AT_QUERY
from .rules import QUEUE as AT_QUEUE
from .rules import REQUEST as AT_REQUEST
from .sql.rewrite import process
from .statements import QueryParams, RequestError, Statement
from .stats import HttpStats
from .values import infinity_sign, json_default
from .versions import get as get_version
from .write_queue import WriteQueue

#: rqlite's 500 when a result holds an infinite REAL (Go's JSON encoder refuses it)
UNSUPPORTED_VALUE = (
    "json: error calling MarshalJSON for type *http.DBResults: json: unsupported value: {}"
)
#: ``?queue&wait`` waits this long unless ``timeout`` says otherwise (rqlite's default)
QUEUE_WAIT = 30.0
STALE_READ = "stale read"


class NodeService(LeaderRelay, ClusterEndpoints, MembershipEndpoints):
    """The request handling logic, independent of the HTTP server plumbing."""

    def __init__(self, cfg: NodeConfig, store: RaftStore, db: Database, clock: OffsetClock):
        self.cfg = cfg
        self.store = store
        self.db = db
        self.clock = clock
        self.forwarder = Forwarder(cfg.node_id, timeout=DEFAULT_TIMEOUT)
        self.started = time.time()
        #: the rqlite release this node follows, and what it reports as its version
        self.version = get_version(cfg.rqlite_version)
        self.api = self.version.api
        self.build_version = self.version.build_version
        self.stats = HttpStats(self.version)
        self.queue = WriteQueue(self._write_queued, self.stats.add, int(clock.now() * 1e9))

    def close(self) -> None:
        """Stop the write queue (queued writes not written yet are lost, as in rqlite)."""
        self.queue.close()

    # -- processing on the receiving node ---------------------------------------------------
    def _process(self, stmts: list[Statement], params: QueryParams, at: str, headers: Any) -> None:
        """rqlite's ``sql.Process`` on the node that received the request, as the version
        decides for the endpoint ``at`` (:func:`.rules.rewrite_flags`); a request another
        node forwarded here comes processed, with its ``RETURNING`` marks in a header.
        Raises ``RewriteError`` (HTTP 500) before anything is applied."""
        if headers is not None and headers.get(FORWARDED_HEADER):
            marks = {int(i) for i in (headers.get(FORCE_QUERY_HEADER) or "").split(",") if i}
            explains = {int(i) for i in (headers.get(EXPLAIN_HEADER) or "").split(",") if i}
            for i, s in enumerate(stmts):
                s.returning, s.explain = i in marks, i in explains
            return
        flags = rewrite_flags(self.api, at, params.level, params.raw)
        if flags is None:
            return
        rw_random, rw_time = flags
        for s in stmts:
            r = process(
                s.sql,
                rewrite_random=rw_random,
                rewrite_time=rw_time,
                now=self.clock.now,
                utc_offset=self.clock.zone.offset,
                positional=None if s.named else len(s.positional),
                version=self.version,
            )
            s.sql = r.sql
            s.positional.extend(r.bound)
            s.returning = bool(r.returning)
            s.explain = marks_explain(s.sql, self.version)

    def _refused(self, stmts: list[Statement]) -> Reply | None:
        """rqlite refuses a whole request that sets a PRAGMA it depends on (its store's
        check, before anything else, on the node that received the request)."""
        if breaking_pragma(self.api, (s.sql for s in stmts)):
            return json_reply({"results": [], "error": DISALLOWED_PRAGMA})
        return None

    # -- answers -----------------------------------------------------------------------------
    def _through_log(
        self,
        kind: str,
        stmts: list[Statement],
        params: QueryParams,
        start: float,
        request: bool = False,
        execute: bool = False,
    ) -> Reply:
        try:
            applied = self.store.submit(
                kind,
                stmts,
                params.flag("transaction"),
                params.flag("timings"),
                params.duration("timeout", self.cfg.apply_timeout),
                params.duration("db_timeout", 0.0),
            )
        except NotApplied as exc:
            return text_reply(503, str(exc))
        except CommitUnknown as exc:
            return json_reply({"results": [], "error": str(exc)})
        return self._results(applied.results or [], params, start, request, execute, applied.index)

    def _results(
        self,
        results: list[dict],
        params: QueryParams,
        start: float,
        request: bool = False,
        execute: bool = False,
        raft_index: int = 0,
    ) -> Reply:
        """The answer of results this node produced (v9+ name it in ``X-RQLITE-SERVED-BY``).
        ``/db/execute`` of v8 ignores ``associative`` and ``blob_array``."""
        formats = not execute or self.api.execute_associative
        assoc = formats and params.flag("associative")
        qualify = self.api.qualify_columns and params.flag("qualify_columns")
        counts_too = request or execute  # exec results, "rows": null when associative
        out: dict[str, Any] = {
            "results": [render(qualified(r) if qualify else r, assoc, counts_too) for r in results]
        }
        if params.flag("timings"):
            out["time"] = time.perf_counter() - start
        if raft_index and self.api.raft_index and params.flag("raft_index"):
            out["raft_index"] = raft_index
        pretty = params.flag("pretty")
        try:
            text = json.dumps(
                out,
                ensure_ascii=False,
                allow_nan=False,
                default=json_default(formats and params.flag("blob_array")),
                indent=4 if pretty else None,
                separators=None if pretty else (",", ":"),
            )
        except ValueError:  # an infinite REAL (SQLite turns NaN into NULL)
            return text_reply(500, UNSUPPORTED_VALUE.format(infinity_sign(out) or "+Inf"))
        served_by = self.cfg.http_advertised if self.api.proxy else None
        return Reply(200, text.encode("utf-8"), served_by=served_by)

    def _statements(
        self,
        body: bytes,
        content_type: str | None,
        plain_ok: bool,
        headers: Any = None,
        received: str | None = None,
    ) -> list[Statement] | None:
        """The body's statements without the empty ones (rqlite skips ``""``); None when
        nothing is left to run. Counted (as rqlite counts them: every statement parsed)
        on ``received``, when given."""
        parsed = parse_body(body, content_type, plain_ok, hex_blobs=self.version.hex_blob_params)
        if received is not None:
            self.count(headers, received, len(parsed))
        stmts = [s for s in parsed if s.sql != ""]
        return stmts or None

    # -- /db/execute -------------------------------------------------------------------------
    def execute(
        self,
        params: QueryParams,
        query: str,
        body: bytes,
        headers: Any,
        content_type: str | None = None,
        counted: bool = True,
    ) -> Reply:
        """``counted``: False for a SQL dump run by ``/db/load`` (rqlite counts a load)."""
        start = time.perf_counter()
        if counted and params.flag("queue"):
            return self._queued(params, body, headers)
        rx = "execute_stmts_rx" if counted else None
        stmts = self._statements(body, content_type, True, headers, rx)
        if stmts is None:
            return self._results([], params, start, execute=True)
        self._process(stmts, params, AT_EXECUTE, headers)
        refused = self._refused(stmts)
        if refused is not None:
            return refused
        if not self.store.is_leader():
            return self._not_leader("POST", "/db/execute", query, params, stmts, headers)
        return self._through_log(EXECUTE, stmts, params, start, execute=True)

    def _queued(self, params: QueryParams, body: bytes, headers: Any) -> Reply:
        """``/db/execute?queue`` (:mod:`.write_queue`): answered with a sequence number
        before anything runs. As rqlite's ``queuedExecute``: the leader must be known
        (unless ``noleader``); the body is JSON whatever its type, and a body that does not
        parse queues nothing rather than failing, but for ``no statements`` without
        ``wait``."""
        start = time.perf_counter()
        self.count(headers, "queued_executions")
        if not params.flag("noleader") and self.leader() is None:
            self.count(headers, "leader_not_found")
            return text_reply(503, LEADER_NOT_FOUND)
        wait = params.flag("wait")
        stmts: list[Statement] | None
        try:
            parsed = parse_body(body, hex_blobs=self.version.hex_blob_params)
            stmts = [s for s in parsed if s.sql != ""]
        except RequestError as exc:
            if str(exc) == NO_STATEMENTS and not wait:
                raise
            stmts = None
        self._process(stmts or [], params, AT_QUEUE, None)
        flushed = threading.Event() if wait else None
        if wait:
            self.count(headers, "queued_executions_wait")
        number = self.queue.write(stmts, flushed)
        if flushed is not None and not flushed.wait(params.duration("timeout", QUEUE_WAIT)):
            self.count(headers, "queued_executions_wait_timeout")
            return text_reply(408, "queue wait timeout")
        out: dict[str, Any] = {"results": []}
        if params.flag("timings"):
            out["time"] = time.perf_counter() - start
        out["sequence_number"] = number
        return json_reply(out, pretty=params.flag("pretty"))

    def _write_queued(self, stmts: list[Statement]) -> str | None:
        """Write one batch of queued statements as one ``/db/execute`` (no transaction),
        here or on the leader; None once written, else why not (the queue tries again).
        Runs on the queue's thread."""
        if breaking_pragma(self.api, (s.sql for s in stmts)):
            return DISALLOWED_PRAGMA  # rqlite's store refuses it on every try
        if self.store.is_leader():
            try:
                self.store.submit(EXECUTE, stmts, False, False, self.cfg.apply_timeout)
            except (NotApplied, CommitUnknown) as exc:
                return str(exc)
            return None
        lead = self.leader_peer()
        if lead is None or lead.node_id == self.cfg.node_id:
            return LEADER_NOT_FOUND
        body, extra = wire_body(stmts)
        try:
            status, _, data = self.forwarder.forward(  # rqlite: defaultTimeout, Retries 0
                lead.reach,
                "POST",
                "/db/execute",
                body,
                DEFAULT_TIMEOUT,
                None,
                extra,
                resend=self.api.forward_resends,
            )
        except ForwardError as exc:
            error: str | None = str(exc)
        else:
            error = answer_error(status, data) or (None if status == 200 else f"HTTP {status}")
        if error is None:
            self.stats.add("remote_executions")
        elif self.api.proxy:
            self.stats.add("remote_executions_failed")
        return error

    # -- /db/query and /db/request -------------------------------------------------------------
    def query(
        self,
        method: str,
        params: QueryParams,
        query: str,
        body: bytes,
        headers: Any,
        content_type: str | None = None,
    ) -> Reply:
        """A body wins over ``q`` (even on GET); a GET with neither runs nothing."""
        start = time.perf_counter()
        if method == "GET" and not body:
            stmts = [Statement(params.raw["q"])] if "q" in params.raw else None
            self.count(headers, "query_stmts_rx", len(stmts or ()))
        else:
            stmts = self._statements(body, content_type, True, headers, "query_stmts_rx")
        if stmts is None:
            return self._results([], params, start)
        self._process(stmts, params, AT_QUERY, headers)
        refused = self._refused(stmts)
        if refused is not None:
            return refused
        return self._read(stmts, params, query, start, headers, "/db/query", request=False)

    def request(
        self,
        params: QueryParams,
        query: str,
        body: bytes,
        headers: Any,
        content_type: str | None = None,
    ) -> Reply:
        """One write among the statements (as rqlite's store counts them: SQLite's
        read-only test, an ``EXPLAIN`` a read from v9 on, one that does not prepare a
        write) makes the whole request one log entry; otherwise it is read at its level."""
        start = time.perf_counter()
        stmts = self._statements(body, content_type, False, headers, "request_stmts_rx")
        if stmts is None:
            return self._results([], params, start, request=True)
        self._process(stmts, params, AT_REQUEST, headers)
        refused = self._refused(stmts)
        if refused is not None:
            return refused
        if all(self.db.is_read_only(s) for s in stmts):
            return self._read(stmts, params, query, start, headers, "/db/request", request=True)
        if not self.store.is_leader():
            return self._not_leader("POST", "/db/request", query, params, stmts, headers)
        return self._through_log(REQUEST, stmts, params, start, request=True)

    def _read(
        self,
        stmts: list[Statement],
        params: QueryParams,
        query: str,
        start: float,
        headers: Any,
        path: str,
        request: bool,
    ) -> Reply:
        """Statements that all read, served as the level says (:func:`.rules.read_path`)."""
        route = read_path(self.api, AT_REQUEST if request else AT_QUERY, params.level)
        if route == NONE:
            freshness = params.duration("freshness", 0.0)
            if self.store.is_stale_read(freshness, params.flag("freshness_strict")):
                return json_reply({"results": [], "error": STALE_READ})
        if route in (NONE, LOCAL):
            return self._results(self._local_read(stmts, params), params, start, request)
        if not self.store.is_leader():
            return self._not_leader("POST", path, query, params, stmts, headers)
        if route == LOG:
            return self._through_log(QUERY, stmts, params, start, request)
        if route == LINEARIZABLE:
            try:
                self.store.submit(
                    BARRIER,
                    [],
                    False,
                    False,
                    params.duration("linearizable_timeout", self.cfg.apply_timeout),
                )
            except NotApplied as exc:
                return text_reply(503, str(exc))
            except CommitUnknown as exc:
                return json_reply({"results": [], "error": str(exc)})
        return self._results(self._local_read(stmts, params), params, start, request)

    def _local_read(self, stmts: list[Statement], params: QueryParams) -> list[dict]:
        return self.db.query(stmts, params.flag("timings"), params.duration("db_timeout", 0.0))
