"""rqlite's ``/db/execute``, ``/db/query`` and ``/db/request`` (the request logic, apart
from the HTTP plumbing in :mod:`.httpd` and the cluster endpoints in :mod:`.admin`).

Bodies are parsed by :mod:`.body`, statements run by :mod:`.database` and
:mod:`.sqlexec`, values rendered by :mod:`.values`; facts checked against rqlite v8.36.18.
Rewriting follows the rqlite version of ``--rqlite-version`` (:mod:`.versions`); the
requests are counted as rqlite counts them (:mod:`.stats`).
"""

from __future__ import annotations

import json
import time
from typing import Any

from .admin import ClusterEndpoints
from .body import parse as parse_body
from .clock import OffsetClock
from .config import NodeConfig, Peer
from .database import Database, render
from .forward import FORWARDED_HEADER, Forwarder, ForwardError
from .raft import BARRIER, EXECUTE, QUERY, REQUEST, CommitUnknown, NotApplied, RaftStore
from .replies import Reply, json_reply, text_reply
from .sql.rewrite import mentions_returning, process
from .sqlexec import NAMED_HERE
from .statements import QueryParams, Statement
from .stats import REMOTE, HttpStats
from .values import infinity_sign, json_default
from .versions import get as get_version

LEADER_NOT_FOUND = "leader not found"
#: rqlite's 500 when a result holds an infinite REAL (Go's JSON encoder refuses it)
UNSUPPORTED_VALUE = (
    "json: error calling MarshalJSON for type *http.DBResults: json: unsupported value: {}"
)


class NodeService(ClusterEndpoints):
    """The request handling logic, independent of the HTTP server plumbing."""

    def __init__(self, cfg: NodeConfig, store: RaftStore, db: Database, clock: OffsetClock):
        self.cfg = cfg
        self.store = store
        self.db = db
        self.clock = clock
        self.forwarder = Forwarder(cfg.node_id, timeout=cfg.apply_timeout + 5.0)
        self.started = time.time()
        #: the rqlite release this node follows, and what it reports as its version
        self.version = get_version(cfg.rqlite_version)
        self.build_version = self.version.build_version
        self.stats = HttpStats(self.version)

    def count(self, headers: Any, counter: str, n: int = 1) -> None:
        """Count as rqlite's HTTP service does, unless the request was forwarded here by
        another node (rqlite's leader gets those over its cluster protocol, uncounted)."""
        if headers is None or not headers.get(FORWARDED_HEADER):
            self.stats.add(counter, n)

    # -- leadership -------------------------------------------------------------------------
    def leader(self) -> tuple[str, str, str] | None:
        """(node id, raft addr, http addr) of the leader this node knows, or None."""
        addr = self.store.leader_raft_addr()
        if addr is None:
            return None
        peer = self.cfg.by_raft_addr(addr)
        return (peer.node_id, peer.raft_addr, peer.http_addr) if peer else None

    def leader_peer(self) -> Peer | None:
        """The leader this node knows, as a member (with the address it reaches it at)."""
        addr = self.store.leader_raft_addr()
        return None if addr is None else self.cfg.by_raft_addr(addr)

    def _not_leader(
        self,
        method: str,
        path: str,
        query: str,
        params: QueryParams,
        stmts: list[Statement] | None,
        headers: Any,
        raw: bytes | None = None,
    ) -> Reply:
        """Answer a request this node cannot serve itself: redirect or forward (the
        statements, already rewritten, or else the ``raw`` body as it came)."""
        lead = self.leader_peer()
        if lead is None or lead.node_id == self.cfg.node_id or headers.get(FORWARDED_HEADER):
            self.count(headers, "leader_not_found")
            return text_reply(503, LEADER_NOT_FOUND)
        target = f"{path}?{query}" if query else path
        if params.flag("redirect"):
            return Reply(301, b"", "text/html; charset=utf-8", f"http://{lead.http_addr}{target}")
        body = raw
        if stmts is not None:
            wire = [_wire_json(s) for s in stmts]
            body = json.dumps(wire, default=_blob_as_array).encode("utf-8")
            # already rewritten here, on the receiving node: the leader must not redo it
            sep = "&" if query else ""
            target = f"{path}?{query}{sep}norwrandom&norwtime"
            method = "POST"
        leader_http = lead.reach

        def still_leader() -> bool:
            now = self.leader_peer()
            return now is not None and now.reach == leader_http

        try:
            # wait a little longer than the leader will wait for the log, but no longer
            # than this node still sees the target as leader (then: unknown outcome)
            wait = max(params.duration("timeout", 0.0), self.cfg.apply_timeout) + 5.0
            status, ctype, data = self.forwarder.forward(
                leader_http, method, target, body, wait, still_leader
            )
        except ForwardError as exc:
            if path in ("/db/execute", "/db/query", "/db/request"):  # rqlite: failed and tried
                self.count(headers, f"{REMOTE[path]}_failed")
                self.count(headers, REMOTE[path])
            if not exc.sent:
                return text_reply(503, LEADER_NOT_FOUND)
            return json_reply({"results": [], "error": str(exc)})
        self.count(headers, REMOTE[path])
        return Reply(status, data, ctype, served_by=lead.raft_addr)

    # -- /db/* ------------------------------------------------------------------------------
    def _rewrite(self, stmts: list[Statement], params: QueryParams, execute: bool = False) -> None:
        """rqlite's processing on the receiving node; random() only on /db/execute (rqlite
        v8.36.18 rewrites only time functions on /db/request and strong queries)."""
        rw_random = execute and not params.flag("norwrandom")
        rw_time = not params.flag("norwtime")
        for s in stmts:  # raises RewriteError (HTTP 500) before anything is applied
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
            s.returning = mentions_returning(s.sql) if r.returning is None else r.returning

    def _through_log(
        self,
        kind: str,
        stmts: list[Statement],
        params: QueryParams,
        start: float,
        request: bool = False,
    ) -> Reply:
        try:
            results = self.store.submit(
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
        return self._results(results or [], params, start, request)

    def _results(
        self, results: list[dict], params: QueryParams, start: float, request: bool = False
    ) -> Reply:
        assoc = params.flag("associative")
        out: dict[str, Any] = {"results": [render(r, assoc, request) for r in results]}
        if params.flag("timings"):
            out["time"] = time.perf_counter() - start
        pretty = params.flag("pretty")
        try:
            text = json.dumps(
                out,
                ensure_ascii=False,
                allow_nan=False,
                default=json_default(params.flag("blob_array")),
                indent=4 if pretty else None,
                separators=None if pretty else (",", ":"),
            )
        except ValueError:  # an infinite REAL (SQLite turns NaN into NULL)
            return text_reply(500, UNSUPPORTED_VALUE.format(infinity_sign(out) or "+Inf"))
        return Reply(200, text.encode("utf-8"))

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

    def execute(
        self,
        params: QueryParams,
        query: str,
        body: bytes,
        headers: Any,
        content_type: str | None = None,
        counted: bool = True,
    ) -> Reply:
        """``counted``: False for a SQL dump run by ``/db/load`` (rqlite counts a load).
        ``queue`` is run as an ordinary write, but counted as rqlite counts a queued one."""
        start = time.perf_counter()
        queued = counted and params.flag("queue")
        if queued:
            self.count(headers, "queued_executions")
        rx = "execute_stmts_rx" if counted and not queued else None
        stmts = self._statements(body, content_type, True, headers, rx)
        if stmts is None:
            return self._results([], params, start)
        self._rewrite(stmts, params, execute=True)
        if not self.store.is_leader():
            return self._not_leader("POST", "/db/execute", query, params, stmts, headers)
        return self._through_log(EXECUTE, stmts, params, start)

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
        return self._read(stmts, params, query, start, headers, "/db/query", request=False)

    def request(
        self,
        params: QueryParams,
        query: str,
        body: bytes,
        headers: Any,
        content_type: str | None = None,
    ) -> Reply:
        start = time.perf_counter()
        stmts = self._statements(body, content_type, False, headers, "request_stmts_rx")
        if stmts is None:
            return self._results([], params, start)
        self._rewrite(stmts, params)
        writes = any(s.returning or not self.db.is_read_only(s) for s in stmts)
        if not writes:
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
        level = params.level
        if level == "none":
            fresh = params.raw.get("freshness")
            if fresh and not self.store.is_leader():
                limit = params.duration("freshness", 0.0)
                if limit > 0 and self.store.seconds_since_leader_contact() > limit:
                    return json_reply({"results": [], "error": "stale read"})
            return self._results(self._local_read(stmts, params), params, start, request)
        if level == "strong":  # it goes through the log: rewrite here, on the receiving node
            self._rewrite(stmts, params)
        if not self.store.is_leader():
            return self._not_leader("POST", path, query, params, stmts, headers)
        if level == "strong":
            return self._through_log(QUERY, stmts, params, start, request)
        if level == "linearizable":
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


def _wire_json(stmt: Statement) -> list[Any]:
    """The statement as a request body element, its named arguments where they stood."""
    item: list[Any] = [stmt.sql]
    placed = False
    for value in stmt.positional:
        if value is NAMED_HERE:
            item.append(stmt.named)
            placed = True
        else:
            item.append(value)
    if stmt.named and not placed:
        item.append(stmt.named)
    return item


def _blob_as_array(obj: Any) -> Any:
    """Forwarded statements carry BLOB arguments as arrays of bytes, as clients send them."""
    if isinstance(obj, bytes):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")
