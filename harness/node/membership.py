"""Cluster membership that changes while the cluster runs, as rqlite's does.

rqlite (v10.2.7, ``store.Join`` / ``store.Remove`` and ``http/service.go``'s
``handleRemove``) changes its Raft configuration on the leader only:

- ``DELETE /remove`` ``{"id": ID}``: a follower hands it to the leader (its proxy; with
  ``?redirect`` it answers ``301`` to the leader instead); the leader removes the server
  from the configuration (an unknown id is a no-op). A leader asked to remove itself
  commits the new configuration and steps down without handing leadership over (rqlite's
  ``store.remove``; hashicorp/raft's ``leaderLoop`` sets ``stepDown`` once a committed
  configuration lacks the leader's vote): there is no leader until the others elect one
  among themselves, and the requests in flight on it fail "leadership lost while
  committing log".
- ``-join``: a node that starts with no state asks a member to join; the leader adds it
  as a voter (rqlite v8+ over its cluster service on the Raft port). A member with the
  same id *and* address is already joined (nothing to do); one with the same id *or* the
  same address is removed first. A node that has state ignores ``-join``.
- A removed node is no longer in the configuration: the members ignore it (hashicorp/raft
  refuses votes to a candidate outside its configuration).

The embedded node does the same over PySyncObj's dynamic membership: each member is a
:class:`MemberNode` (PySyncObj's TCP node carrying its id and HTTP addresses), so that a
configuration change, replicated and persisted in the log and in snapshots, carries all
that ``/nodes`` and forwarding need. PySyncObj's transport refuses connections from an
address outside the configuration, so a removed node reaches nobody. The join request
is ``POST /join`` on a member's HTTP API (the embedded node's stand-in for rqlite's
cluster service); the joining node keeps the members it was told in
``DATA_DIR/members.json``, which a restart reads instead of joining again. A joining node
does not stand for election until it has heard from a leader (:class:`RaftStore`).
"""

from __future__ import annotations

import http.client
import json
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from pysyncobj.node import TCPNode

from .config import NodeConfig, Peer
from .forward import FORWARDED_HEADER, ForwardError
from .replies import Reply, json_reply, text_reply
from .statements import QueryParams

log = logging.getLogger(__name__)

#: the members a joined node learnt when it joined (its peers at every restart)
MEMBERS_FILE = "members.json"
#: how long a join keeps asking (a member may be electing a leader) and one request's bound
JOIN_TIMEOUT = 60.0
JOIN_REQUEST_TIMEOUT = 15.0
#: how long the leader waits for a configuration change to commit
CHANGE_TIMEOUT = 10.0
_POLL = 0.1


class MemberNode(TCPNode):
    """A member as PySyncObj knows it (by Raft address), with its id and HTTP addresses."""

    def __init__(self, address: str, node_id: str = "", http: str = "", reach: str = "") -> None:
        super().__init__(address, node_id=node_id, http=http, reach=reach)

    @classmethod
    def of(cls, peer: Peer) -> MemberNode:
        return cls(peer.raft_addr, peer.node_id, peer.http_addr, peer.reach_addr)

    def peer(self) -> Peer:
        """The member as the node's configuration names it."""
        node_id = getattr(self, "node_id", "") or self.address
        return Peer(node_id, self.address, getattr(self, "http", ""), getattr(self, "reach", ""))


class JoinError(RuntimeError):
    """The node could not join the cluster; the message is one line."""


# -- the joining node ------------------------------------------------------------------------
def saved_members(data_dir: Path) -> tuple[Peer, ...] | None:
    """The members a joined node saved, or None when it never joined."""
    try:
        data = json.loads((Path(data_dir) / MEMBERS_FILE).read_text())
    except FileNotFoundError:
        return None
    return tuple(Peer(**p) for p in data["members"])


def _save_members(data_dir: Path, members: tuple[Peer, ...]) -> None:
    path = Path(data_dir) / MEMBERS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"members": [asdict(p) for p in members]}, indent=2))
    tmp.replace(path)


def join(
    cfg: NodeConfig, targets: tuple[str, ...], timeout: float = JOIN_TIMEOUT
) -> tuple[NodeConfig, bool]:
    """``cfg`` with the peers of the cluster it joined through one of ``targets`` (HTTP
    addresses of members), asking until one's leader adds it, and whether it joined now;
    a node that joined before (``members.json``) joins no more. Raises :class:`JoinError`."""
    saved = saved_members(cfg.data_dir)
    joined = saved is None
    if saved is None:
        me = {"id": cfg.node_id, "addr": cfg.raft_addr, "http": cfg.http_advertised}
        me["reach"] = _reach(cfg)
        members = _ask(targets, json.dumps(me).encode(), timeout)
        saved = tuple(p for p in members if p.node_id != cfg.node_id)
        _save_members(cfg.data_dir, saved)
        log.info("joined the cluster: members %s", ", ".join(p.node_id for p in members))
    else:
        log.info("already a member (%s): not joining again", MEMBERS_FILE)
    return replace(cfg, peers=saved), joined


def _reach(cfg: NodeConfig) -> str:
    """Where the members reach this node's HTTP API: its bind address, or, when it binds
    every interface, its Raft host on its HTTP port."""
    host, _, port = cfg.http_addr.rpartition(":")
    if host.strip("[]") in ("", "0.0.0.0", "::"):
        return f"{cfg.raft_addr.rpartition(':')[0]}:{port}"
    return cfg.http_addr


def _ask(targets: tuple[str, ...], body: bytes, timeout: float) -> list[Peer]:
    deadline = time.monotonic() + timeout
    last = "no member answered"
    while True:
        for target in targets:
            addr = target
            for _ in range(3):  # a redirect to the leader, at most twice
                try:
                    status, location, data = _post(addr, "/join", body)
                except OSError as exc:
                    last = f"{addr}: {exc}"
                    break
                if status in (301, 307) and location:
                    addr = location.split("://", 1)[-1].split("/", 1)[0]
                    continue
                if status == 200:
                    return [Peer(**p) for p in json.loads(data)["members"]]
                last = f"{addr}: HTTP {status} {data[:200].decode('utf-8', 'replace')}"
                break
        if time.monotonic() >= deadline:
            raise JoinError(f"could not join through {', '.join(targets)} in {timeout:g}s: {last}")
        time.sleep(0.5)


def _post(addr: str, path: str, body: bytes) -> tuple[int, str, bytes]:
    host, _, port = addr.rpartition(":")
    conn = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=JOIN_REQUEST_TIMEOUT)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Location", ""), resp.read()
    finally:
        conn.close()


# -- the members' endpoints ------------------------------------------------------------------
class MembershipEndpoints:
    """``POST /join`` and ``DELETE /remove`` (a mixin of :class:`harness.node.api.NodeService`)."""

    cfg: NodeConfig
    store: Any  # RaftStore
    api: Any
    forwarder: Any
    leader_peer: Any

    def join_request(self, params: QueryParams, body: bytes) -> Reply:
        """Add the node the body describes (``id``, ``addr`` its Raft address, ``http``),
        on the leader; a follower redirects to it. Answers the members, the new one too."""
        try:
            data = json.loads(body)
            peer = Peer(data["id"], data["addr"], data["http"], data.get("reach", ""))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return text_reply(400, "a join names id, addr and http")
        if not self.store.is_leader():
            lead = self.leader_peer()
            if lead is None or lead.node_id == self.cfg.node_id:
                return text_reply(503, "leader not found")
            return Reply(301, b"", "text/html; charset=utf-8", f"http://{lead.http_addr}/join")
        same = [
            m
            for m in self.store.members()
            if peer.node_id == m.node_id or peer.raft_addr == m.raft_addr
        ]
        try:
            for m in same:
                if (m.node_id, m.raft_addr) == (peer.node_id, peer.raft_addr):
                    break  # already a member: nothing to change
                self.store.change_members("rem", m, CHANGE_TIMEOUT)
            else:
                self.store.change_members("add", peer, CHANGE_TIMEOUT)
        except RuntimeError as exc:
            return text_reply(503, str(exc))
        log.info("node %s at %s joined", peer.node_id, peer.raft_addr)
        return json_reply({"members": [asdict(m) for m in self.store.members()]})

    def remove(self, params: QueryParams, query: str, body: bytes, headers: Any) -> Reply:
        """``DELETE /remove {"id": ...}``: the body an object of exactly one string, ``id``
        (else 400). The leader removes the member (an unknown id: a no-op, 200); a
        follower forwards to the leader (``?redirect``: 301 there), ``503 leader not
        found`` without one. A leader asked to remove itself commits its removal and
        steps down without handing leadership over (:meth:`RaftStore.remove_self`)."""
        bad = Reply(400, b"", "text/plain; charset=utf-8")
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return bad
        if not isinstance(data, dict) or len(data) != 1 or not isinstance(data.get("id"), str):
            return bad
        node_id = data["id"]
        if self.store.is_leader() and node_id == self.cfg.node_id:
            try:
                self.store.remove_self(CHANGE_TIMEOUT)
            except RuntimeError as exc:
                return text_reply(503, str(exc))
            log.info("node %s (this leader) removed: stepped down", node_id)
            served_by = self.cfg.http_advertised if self.api.proxy else None
            return Reply(200, b"", "text/plain; charset=utf-8", served_by=served_by)
        if self.store.is_leader():
            member = next((m for m in self.store.members() if m.node_id == node_id), None)
            if member is not None:
                try:
                    self.store.change_members("rem", member, CHANGE_TIMEOUT)
                except RuntimeError as exc:
                    return text_reply(503, str(exc))
                log.info("node %s removed", node_id)
            served_by = self.cfg.http_advertised if self.api.proxy else None
            return Reply(200, b"", "text/plain; charset=utf-8", served_by=served_by)
        return self._remove_at_leader(params, query, body, headers)

    def _remove_at_leader(
        self, params: QueryParams, query: str, body: bytes, headers: Any
    ) -> Reply:
        if headers.get(FORWARDED_HEADER):
            return text_reply(503, "not leader")
        lead = self.leader_peer()
        if lead is None or lead.node_id == self.cfg.node_id:
            return text_reply(503, "leader not found")
        target = f"/remove?{query}" if query else "/remove"
        if params.flag("redirect"):
            return Reply(301, b"", "text/html; charset=utf-8", f"http://{lead.http_addr}{target}")
        try:
            status, ctype, data = self.forwarder.forward(
                lead.reach, "DELETE", target, body, CHANGE_TIMEOUT + 5.0, lambda: True, None
            )
        except ForwardError as exc:
            return text_reply(503, str(exc))
        return Reply(status, data, ctype, served_by=lead.raft_addr if self.api.proxy else None)
