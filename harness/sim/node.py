"""A simulated rqlite node: its HTTP contract over :class:`~harness.sim.raft.RaftNode`.

The pure parts are the embedded node's own: the body parser (:mod:`harness.node.body`),
rqlite's rewriting of ``'now'`` and ``random()`` with the node's clock and zone
(:func:`harness.node.sql.rewrite.process`, :func:`harness.node.rules.rewrite_flags`),
how a read level is served (:func:`harness.node.rules.read_path`), the SQLite state
machine with the node's clock as SQLite's (:class:`harness.node.database.Database`) and
rqlite's JSON shapes (:func:`harness.node.database.render`). What rqlite answers:

* a write or a strong read goes through the log on the leader: its results once applied
  there; ``200 {"error": "leadership lost while committing log"}`` when the leader stepped
  down first (it may still commit);
* a follower forwards to the leader it knows (``503 leader not found`` when none), with
  the request's ``?timeout`` (else 30 s) as each send's deadline; as v10 it sends once
  more after a failed exchange, so the leader may apply the command twice; when both
  sends fail the client gets ``200 {"results": [], "error": ...}``;
* ``GET /readyz``: 200 while the node knows a leader, else 503.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import apsw

from ..node.body import parse as parse_body
from ..node.database import Database, render
from ..node.localzone import LocalZone
from ..node.rules import EXECUTE as AT_EXECUTE
from ..node.rules import LEADER as AT_LEADER
from ..node.rules import LINEARIZABLE, LOG, read_path, rewrite_flags
from ..node.rules import QUERY as AT_QUERY
from ..node.rules import REQUEST as AT_REQUEST
from ..node.sql.rewrite import RewriteError, process
from ..node.statements import QueryParams, RequestError, Statement
from ..node.values import json_default
from ..node.versions import get as get_version
from .loop import Loop
from .net import CLIENT, Net
from .raft import EXECUTE, LEADER, QUERY, REQUEST, Entry, RaftNode

#: the epoch second the simulation's time 0 stands for (2026-01-01T00:00:00Z)
EPOCH = 1767225600.0
#: rqlite's forwarding deadline without ``?timeout``
FORWARD_TIMEOUT = 30.0
LEADER_NOT_FOUND = "leader not found"
NOT_LEADER = "not leader"

#: (statement text, explain) -> whether SQLite counts it a read (the schema decides)
_READ_ONLY: dict[tuple[str, bool], bool] = {}
#: query string -> its parameters
_PARAMS: dict[str, QueryParams] = {}
#: (status, body text) -> None: how a node answers one request
Answer = Callable[[int, str], None]


@dataclass
class Request:
    """One HTTP request to a node (``stmts``: processed already, when forwarded)."""

    method: str
    path: str
    query: str
    body: bytes = b""
    stmts: list[Statement] | None = None
    #: how the answer gets back (set by whoever sends it)
    answer: Answer = field(default=lambda status, text: None, repr=False)


class CachedDatabase(Database):
    """The node's database with SQLite's prepared statements cached: the embedded node
    prepares every statement afresh to cost what rqlite costs; the simulation keeps the
    results and saves the time."""

    def _open(self) -> apsw.Connection:
        return apsw.Connection(":memory:", vfs=self._vfs.name, statementcachesize=256)


class SimNode(RaftNode):
    """One node: Raft, its own database, its own clock and zone, and its HTTP answers."""

    def __init__(
        self,
        node_id: str,
        peers: list[str],
        loop: Loop,
        net: Net,
        rng: random.Random,
        nodes: dict[str, Any],
        version: str = "10.2.7",
    ) -> None:
        self.version = get_version(version)
        self.api = self.version.api
        #: seconds this node's wall clock is off (clock-skew faults)
        self.skew = 0.0
        self.zone = LocalZone.utc()
        #: what the node's reply-loss fault drops: probability a /db/ answer to a client
        #: is lost after the node acted on it; forwarded answers lost, and their deadline
        self.reply_loss = 0.0
        self.loss_weights: tuple[float, ...] = (1.0, 1.0, 1.0)  # close, reset, hold
        self.lost: dict[str, int] = {}
        self.forward_loss: float | None = None
        #: the reply proxies' ``?timeout`` on clients' requests (forward-reply-loss)
        self.forward_deadline: float | None = None
        #: answers owed to clients, failed at once when the node crashes
        self.open: dict[int, Answer] = {}
        self._ids = 0
        #: committed entries this follower has not applied yet, each with its commit time
        self._behind: list[tuple[Entry, float]] = []
        self._pinned: float | None = None
        super().__init__(node_id, peers, loop, net, rng, nodes)
        self.db = self._new_db()

    # -- the node's clock and database ---------------------------------------------------
    def wall(self) -> float:
        """The node's wall clock: epoch seconds, skew included (while a follower catches
        up, the time the entry being applied was committed)."""
        if self._pinned is not None:
            return self._pinned
        return EPOCH + self.loop.now + self.skew

    def _new_db(self) -> Database:
        return CachedDatabase(now=self.wall, api=self.api)

    def restarted(self) -> None:
        self._behind = []
        self.db = self._new_db()

    def crash(self) -> None:
        owed, self.open = self.open, {}
        super().crash()
        for k in sorted(owed):
            owed[k](-1, "connection reset by peer")

    def apply(self, entry: Entry) -> Any:
        """Apply a committed entry: at once on the leader (its results answer the
        client); on a follower when its database is next needed, at the wall-clock time
        of this moment (:meth:`catch_up`), which gives the same database for less work."""
        if self.role != LEADER:
            self._behind.append((entry, self.wall()))
            return None
        self.catch_up()
        return self._run_entry(entry)

    def catch_up(self) -> None:
        """Apply the entries this follower put off, each at the time it was committed."""
        behind, self._behind = self._behind, []
        for entry, at in behind:
            self._pinned = at
            try:
                self._run_entry(entry)
            finally:
                self._pinned = None

    def _run_entry(self, entry: Entry) -> Any:
        stmts = entry.stmts
        if entry.kind == EXECUTE:
            return self.db.execute(stmts, entry.tx, False)
        if entry.kind == REQUEST:
            return self.db.request(stmts, entry.tx, False)
        if entry.kind == QUERY and entry.origin == self.id:
            return self.db.query(stmts, False)
        return None

    def read_only(self, stmt: Statement) -> bool:
        """Whether rqlite counts ``stmt`` as a read (SQLite's own test, which depends on
        the schema only: remembered by its text once the node caught up)."""
        key = (stmt.sql, stmt.explain)
        known = _READ_ONLY.get(key)
        if known is None:
            self.catch_up()
            known = _READ_ONLY[key] = self.db.is_read_only(stmt)
        return known

    # -- HTTP ----------------------------------------------------------------------------
    def receive(self, req: Request, forwarded: bool = False) -> None:
        """A request arrives (from a client, or forwarded by a node)."""
        self.run(self._handle, req, forwarded)

    def _handle(self, req: Request, forwarded: bool) -> None:
        if req.path == "/readyz":
            ready = self.known_leader() is not None
            req.answer(
                200 if ready else 503,
                "[+]node ok\n[+]leader ok" if ready else "[+]node ok\n[-]leader",
            )
            return
        try:
            params = _params(req.query)
        except RequestError as exc:
            req.answer(400, str(exc))
            return
        endpoint = {
            "/db/execute": AT_EXECUTE,
            "/db/query": AT_QUERY,
            "/db/request": AT_REQUEST,
        }.get(req.path)
        if endpoint is None:
            req.answer(404, "not found")
            return
        stmts = req.stmts
        if stmts is None:
            try:
                parsed = parse_body(
                    req.body, None, endpoint != AT_REQUEST, hex_blobs=self.version.hex_blob_params
                )
            except RequestError as exc:
                req.answer(400, str(exc))
                return
            stmts = [s for s in parsed if s.sql != ""]
            try:
                self._process(stmts, params, endpoint)
            except RewriteError as exc:
                req.answer(500, str(exc))
                return
        if not stmts:
            req.answer(200, '{"results":[]}')
            return
        counts = endpoint != AT_QUERY
        if endpoint == AT_EXECUTE or (
            endpoint == AT_REQUEST and not all(self.read_only(s) for s in stmts)
        ):
            kind = EXECUTE if endpoint == AT_EXECUTE else REQUEST
            self._through_log(req, kind, stmts, params, counts, forwarded)
            return
        route = read_path(self.api, endpoint, params.level)
        if route == LOG:
            self._through_log(req, QUERY, stmts, params, counts, forwarded)
        elif route in (LINEARIZABLE, AT_LEADER):
            if not self.is_leader():
                self._not_leader(req, stmts, forwarded)
            elif route == LINEARIZABLE and not self.has_quorum():
                req.answer(503, NOT_LEADER)
            else:
                req.answer(200, _text(self.db.query(stmts, False), counts))
        else:
            self.catch_up()
            req.answer(200, _text(self.db.query(stmts, False), counts))

    def _process(self, stmts: list[Statement], params: QueryParams, endpoint: str) -> None:
        flags = rewrite_flags(self.api, endpoint, params.level, params.raw)
        if flags is None:
            return
        for s in stmts:
            r = process(
                s.sql,
                rewrite_random=flags[0],
                rewrite_time=flags[1],
                now=self.wall,
                utc_offset=None if self.zone.is_utc else self.zone.offset,
                positional=None if s.named else len(s.positional),
                version=self.version,
            )
            s.sql = r.sql
            s.positional.extend(r.bound)
            s.returning = bool(r.returning)

    def _through_log(
        self,
        req: Request,
        kind: str,
        stmts: list[Statement],
        params: QueryParams,
        counts: bool,
        forwarded: bool,
    ) -> None:
        if not self.is_leader():
            self._not_leader(req, stmts, forwarded)
            return

        def settled(results: Any, error: str | None) -> None:
            if error is not None:
                req.answer(200, json.dumps({"results": [], "error": error}))
            else:
                req.answer(200, _text(results or [], counts))

        self.submit(kind, tuple(stmts), params.flag("transaction"), settled)

    def _not_leader(self, req: Request, stmts: list[Statement], forwarded: bool) -> None:
        if forwarded:
            req.answer(200, json.dumps({"results": [], "error": NOT_LEADER}))
            return
        leader = self.known_leader()
        if leader is None or leader == self.id:
            req.answer(503, LEADER_NOT_FOUND)
            return
        params = _params(req.query)
        deadline = params.duration("timeout", self.forward_deadline or FORWARD_TIMEOUT)
        self._forward(req, stmts, leader, deadline, resend=self.api.forward_resends)

    def _forward(
        self, req: Request, stmts: list[Statement], leader: str, deadline: float, resend: bool
    ) -> None:
        """Send ``req`` to ``leader``; on a failed exchange v10 sends it once more."""
        done = [False]
        self._ids += 1

        def answered(status: int, text: str) -> None:
            if not done[0]:
                done[0] = True
                self.run(req.answer, status, text)

        def expired() -> None:
            if done[0]:
                return
            done[0] = True
            if resend and self.up:
                self._forward(req, stmts, leader, deadline, resend=False)
            else:
                req.answer(
                    200, json.dumps({"results": [], "error": f"forward to {leader}: timeout"})
                )

        lost = self.forward_loss
        back = self.id

        def reply(status: int, text: str) -> None:
            if lost is not None and self.rng.random() < lost:
                return
            self.net.deliver(leader, back, answered, status, text)

        # processed already: the leader runs them as they are (nothing changes them)
        sent = Request(req.method, req.path, req.query, req.body, stmts, reply)
        self.net.deliver(back, leader, self.nodes[leader].receive, sent, True)
        self.loop.after(deadline, expired)

    # -- a client's connection -----------------------------------------------------------
    def from_client(self, req: Request, answer: Answer) -> None:
        """A client's request: answered over the client's link unless lost after the
        node acted (reply loss), or failed at once if the node crashes meanwhile."""
        self._ids += 1
        key = self._ids
        self.open[key] = answer
        drop = req.path.startswith("/db/") and self.reply_loss > 0

        def back(status: int, text: str) -> None:
            owed = self.open.pop(key, None)
            if owed is None:
                return
            if drop and self.rng.random() < self.reply_loss:
                how = self.rng.choices(("close", "reset", "hold"), self.loss_weights)[0]
                self.lost[how] = self.lost.get(how, 0) + 1
                if how != "hold":  # the connection ends: the client knows at once
                    self.net.deliver(self.id, CLIENT, owed, -1, f"connection {how}")
                return  # held: the client's timeout ends it
            self.net.deliver(self.id, CLIENT, owed, status, text)

        req.answer = back
        self.receive(req)


def _params(query: str) -> QueryParams:
    """A request's query parameters (parsed once per distinct query string)."""
    params = _PARAMS.get(query)
    if params is None:
        params = _PARAMS[query] = QueryParams.parse(query)
    return params


#: how a node writes its answers (the embedded node's settings)
_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, default=json_default(False), separators=(",", ":")
)


def _text(results: list[dict], counts: bool) -> str:
    return _ENCODER.encode({"results": [render(r, False, counts) for r in results]})
