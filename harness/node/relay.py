"""Handing a request this node cannot serve to the leader, and answering as rqlite does.

rqlite's follower sends the request, already processed (rewritten, ``RETURNING`` marked),
to the leader over its cluster protocol; the embedded node sends it over HTTP
(:mod:`.forward`), with the marks in :data:`.forward.FORCE_QUERY_HEADER`, and the leader
does not process it again. What the client sees, by version (``http/service.go``; v9 and
v10 through ``proxy/proxy.go``):

- ``redirect``: ``301`` to the leader's HTTP address, the path and query unchanged;
- no leader known: ``503 leader not found`` (with ``redirect``: ``500``);
- the deadline of each send: the request's ``?timeout``, else 30 s; v10 sends a command
  whose exchange failed (a read timeout or a reset included) once more on a new
  connection, so the leader may apply it twice (:mod:`.forward`);
- the leader answered: its answer; v9 and v10 add ``X-RQLITE-SERVED-BY`` with the leader's
  Raft address, v8 adds it whatever happened next;
- the leader could not be reached, or failed the request (it is no longer the leader:
  ``not leader``; its log did not answer: ``leadership lost while committing log``, ...):
  **HTTP 200** ``{"results": [], "error": ...}``, the error as the cluster client said it
  (v9, v10) or ``node failed to process Execute|Query|Request on remote node at ADDR: ...``
  (v8, ``ADDR`` the leader's Raft address). rqlite gives no way to tell a request that
  certainly did not run from one that may have.
"""

from __future__ import annotations

import json
from typing import Any

from .config import NodeConfig, Peer
from .forward import (
    DEFAULT_TIMEOUT,
    EXPLAIN_HEADER,
    FORCE_QUERY_HEADER,
    FORWARDED_HEADER,
    Forwarder,
    ForwardError,
)
from .replies import Reply, json_reply, text_reply
from .sqlexec import NAMED_HERE
from .statements import QueryParams, Statement
from .stats import REMOTE, HttpStats
from .versions import Api

LEADER_NOT_FOUND = "leader not found"
#: what a node answers a request forwarded to it when it no longer leads (rqlite's store)
NOT_LEADER = "not leader"
#: v8's words for a request the leader failed, by path
_V8_KIND = {"/db/execute": "Execute", "/db/query": "Query", "/db/request": "Request"}
#: what rqlite forwards through its cluster client's ``retry`` (v10 resends these)
_RESENT = frozenset({*_V8_KIND, "/db/load"})


class LeaderRelay:
    """Forwarding to the leader (a mixin of :class:`harness.node.api.NodeService`)."""

    cfg: NodeConfig
    store: Any  # RaftStore
    forwarder: Forwarder
    stats: HttpStats
    api: Api

    def count(self, headers: Any, counter: str, n: int = 1) -> None:
        """Count as rqlite's HTTP service does, unless the request was forwarded here by
        another node (rqlite's leader gets those over its cluster protocol, uncounted)."""
        if headers is None or not headers.get(FORWARDED_HEADER):
            self.stats.add(counter, n)

    def leader(self) -> tuple[str, str, str] | None:
        """(node id, raft addr, http addr) of the leader this node knows, or None."""
        addr = self.store.leader_raft_addr()
        if addr is None:
            return None
        peer = self.store.member_at(addr)
        return (peer.node_id, peer.raft_addr, peer.http_addr) if peer else None

    def leader_peer(self) -> Peer | None:
        """The leader this node knows, as a member (with the address it reaches it at)."""
        addr = self.store.leader_raft_addr()
        return None if addr is None else self.store.member_at(addr)

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
        statements, already processed, or else the ``raw`` body as it came)."""
        if headers.get(FORWARDED_HEADER):  # sent here as to the leader: no longer so
            return text_reply(503, NOT_LEADER)
        lead = self.leader_peer()
        if lead is None or lead.node_id == self.cfg.node_id:
            self.count(headers, "leader_not_found")
            # rqlite checks ``redirect`` before it looks for a leader: with none, its
            # FormRedirect fails and DoRedirect answers 500 (http/service.go, every version)
            return text_reply(500 if params.flag("redirect") else 503, LEADER_NOT_FOUND)
        target = f"{path}?{query}" if query else path
        if params.flag("redirect"):
            return Reply(301, b"", "text/html; charset=utf-8", f"http://{lead.http_addr}{target}")
        body, extra = raw, None
        if stmts is not None:
            body, extra = wire_body(stmts)
            method = "POST"
        leader_http = lead.reach

        def still_leader() -> bool:
            now = self.leader_peer()
            return now is not None and now.reach == leader_http

        sql_path = path in _V8_KIND
        try:
            # rqlite's deadline for each send, or until this node no longer sees the
            # target as leader (then: unknown outcome); v10 sends once more after a failed
            # exchange (not /db/backup: rqlite's Backup sends once)
            status, ctype, data = self.forwarder.forward(
                leader_http,
                method,
                target,
                body,
                params.duration("timeout", DEFAULT_TIMEOUT),
                still_leader,
                extra,
                resend=self.api.forward_resends and path in _RESENT,
            )
        except ForwardError as exc:
            if sql_path:
                return self._relay_failed(path, lead, str(exc))
            if not exc.sent:  # /db/backup, /db/load: nothing reached the leader
                return text_reply(503, LEADER_NOT_FOUND)
            return json_reply({"results": [], "error": str(exc)})
        if not sql_path:
            self.count(headers, REMOTE[path])
            return Reply(status, data, ctype, served_by=lead.raft_addr)
        failure = answer_error(status, data)
        if failure is not None:
            return self._relay_failed(path, lead, failure)
        self.count(headers, REMOTE[path])
        return Reply(status, data, ctype, served_by=lead.raft_addr)

    def _relay_failed(self, path: str, lead: Peer, error: str) -> Reply:
        """A forward the leader did not answer with results, as the version answers it."""
        counter = REMOTE[path]
        self.stats.add(f"{counter}_failed")
        if self.api.proxy:
            return json_reply({"results": [], "error": error})
        self.stats.add(counter)  # v8 counts the try as well
        text = f"node failed to process {_V8_KIND[path]} on remote node at {lead.raft_addr}: "
        reply = json_reply({"results": [], "error": text + error})
        reply.served_by = lead.raft_addr  # v8 sets it before it forwards
        return reply


def answer_error(status: int, data: bytes) -> str | None:
    """The error of a leader's answer to a forwarded request (None: pass it on): a 503 (its
    text: the leader could not take it, which rqlite's cluster protocol reports as an
    error), or a top-level ``"error"``. Another status (a 500 of the answer's encoding) is
    the answer rqlite's follower would give itself."""
    if status == 503:
        return data.decode("utf-8", errors="replace").strip() or "HTTP 503"
    if status != 200:
        return None
    if b'"error"' not in data:
        return None
    try:
        answer = json.loads(data)
    except ValueError:
        return None
    error = answer.get("error") if isinstance(answer, dict) else None
    return error if isinstance(error, str) and error else None


def wire_body(stmts: list[Statement]) -> tuple[bytes, dict[str, str]]:
    """Processed statements as a request body, and the headers that carry their
    ``RETURNING`` and ``EXPLAIN`` marks."""
    wire = [_wire_json(s) for s in stmts]
    body = json.dumps(wire, default=_blob_as_array).encode("utf-8")
    marks = ",".join(str(i) for i, s in enumerate(stmts) if s.returning)
    explains = ",".join(str(i) for i, s in enumerate(stmts) if s.explain)
    return body, {FORCE_QUERY_HEADER: marks, EXPLAIN_HEADER: explains}


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
