"""The cluster endpoints of rqlite's API: ``/status``, ``/nodes``, ``/readyz``, ``/leader``,
``/db/backup``, ``/db/load`` and ``/debug/vars`` (``/remove``: :mod:`.membership`) (shapes
checked against v8.36.18; what v9 and v10 add read in their ``http/service.go``:
``/readyz``'s ``[+]db ok``, ``GET /leader``, the ``proxy`` counters; the version reported is
that of the rqlite release the node follows).

:class:`ClusterEndpoints` is a mixin of :class:`harness.node.api.NodeService`; it uses the
service's ``cfg``, ``store``, ``db``, ``clock``, ``started``, ``leader()`` and
``_not_leader()``.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import apsw

from .config import Peer
from .dump import dump_sql
from .forward import ForwardError
from .raft import LOAD, CommitUnknown, NotApplied
from .replies import Reply, json_reply, text_reply
from .statements import QueryParams, Statement

SQLITE_HEADER = b"SQLite format 3\x00"


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String`` for a duration under a minute (``200ns``, ``1.5ms``)."""
    ns = round(seconds * 1e9)
    if ns < 1000:
        return f"{ns}ns"
    unit, size = ("µs", 1e3) if ns < 1e6 else ("ms", 1e6) if ns < 1e9 else ("s", 1e9)
    return f"{ns / size:.9f}".rstrip("0").rstrip(".") + unit


class ClusterEndpoints:
    """Handlers for the endpoints that are not ``/db/execute|query|request`` (the service
    provides ``leader()``, ``_not_leader()`` and ``execute()``)."""

    cfg: Any
    store: Any
    db: Any
    clock: Any
    started: float
    version: Any  # the RqliteVersion followed
    api: Any  # its versions.Api
    build_version: str
    stats: Any  # HttpStats
    leader: Callable[[], tuple[str, str, str] | None]
    leader_peer: Callable[[], Peer | None]
    _not_leader: Callable[..., Reply]
    execute: Callable[..., Reply]
    forwarder: Any  # its forward.Forwarder

    # -- /readyz /status /nodes /leader -------------------------------------------------------
    def _unreachable(self, http_addr: str, timeout: float) -> str | None:
        """Why the leader at ``http_addr`` did not answer ``/readyz?noleader`` within
        ``timeout``, or None when it did: over the forwarder's kept-alive connection (as
        rqlite asks over its pooled cluster connection), marked as forwarded, so it is
        not counted there."""
        try:
            self.forwarder.forward(http_addr, "GET", "/readyz?noleader", None, timeout)
        except ForwardError as exc:
            return str(exc)
        return None

    def readyz(self, params: QueryParams) -> Reply:
        """rqlite's ``handleReadyz`` (``http/service.go``): the node; a leader known, and
        reachable (rqlite asks it for its meta over the cluster port: the node probes its
        HTTP API, bounded by ``timeout``); the store; with ``sync`` also that this node's
        commit index reached the leader's (``Committed``, bounded by ``timeout``); v10 last
        runs ``SELECT 1`` (``[+]db ok``). It does not wait for the node to catch up."""
        plain = "text/plain; charset=utf-8"
        if params.flag("noleader"):
            return Reply(200, b"[+]node ok", plain)
        lead = self.leader_peer()
        if lead is None:
            return Reply(503, b"[+]node ok\n[+]leader does not exist", plain)
        timeout = params.duration("timeout", 30.0)
        if lead.node_id != self.cfg.node_id:
            error = self._unreachable(lead.reach, timeout)
            if error is not None:
                failed = f"[+]node ok\n[+]leader not contactable: {error}"
                return Reply(503, failed.encode(), plain)
        if not self.store.isReady():
            return Reply(503, b"[+]node ok\n[+]leader ok\n[+]store not ready", plain)
        text = "[+]node ok\n[+]leader ok\n[+]store ok"
        if params.flag("sync"):
            if not self.store.wait_committed(timeout):
                failed = f"{text}\n[+]sync timeout waiting for commit index"
                return Reply(503, failed.encode(), plain)
            text += "\n[+]sync ok"
        if self.api.readyz_db_check:
            ok = self.db.query([Statement("SELECT 1")], False)[0].get("values") == [[1]]
            text += "\n[+]db ok" if ok else "\n[+]db not ok"
            if not ok:
                return Reply(503, text.encode(), plain)
        return Reply(200, text.encode(), plain)

    def status(self, params: QueryParams) -> Reply:
        st = self.store.raft_stats()
        lead = self.leader()
        body = {
            "build": {
                "version": self.build_version,
                "compatible_with": self.version.tag,
                "engine": "rqueue-embedded (PySyncObj Raft + SQLite)",
            },
            "http": {"bind_addr": self.cfg.http_addr, "auth": "disabled"},
            "node": {
                "start_time": self.started,
                "current_time": self.clock.now(),
                "uptime": f"{time.time() - self.started:.3f}s",
                "clock_offset": self.clock.offset,
            },
            "os": {"pid": os.getpid()},
            "store": {
                "node_id": self.cfg.node_id,
                "addr": self.cfg.raft_addr,
                "dir": str(self.cfg.data_dir),
                "ready": bool(self.store.isReady()),
                "leader": {"addr": lead[1] if lead else "", "node_id": lead[0] if lead else ""},
                "apply_timeout": f"{self.cfg.apply_timeout:g}s",
                "nodes": [
                    {"id": m.node_id, "addr": m.raft_addr, "suffrage": "Voter"}
                    for m in sorted(self.store.members(), key=lambda m: m.node_id)
                ],
                "raft": {
                    "state": st["state"],
                    "term": int(st["term"]),
                    "commit_index": int(st["commit_index"]),
                    "applied_index": int(st["applied_index"]),
                    "log_size": int(st["log_size"]),
                    "num_peers": len(self.store.members()) - 1,
                    "voter": True,
                },
            },
        }
        return json_reply(body, pretty=params.flag("pretty"))

    def nodes(self, params: QueryParams) -> Reply:
        """Every member, probed over HTTP (``/readyz?noleader``) for reachability, round-trip
        time and version; ``?ver=2`` lists them, otherwise they are keyed by id."""
        members = sorted(self.store.members(), key=lambda m: m.node_id)
        listed = self._probed(members, params.duration("timeout", 1.0))
        out: Any = (
            {"nodes": listed} if params.raw.get("ver") == "2" else {e["id"]: e for e in listed}
        )
        return json_reply(out, pretty=params.flag("pretty"))

    def _probed(self, members: list[Peer], timeout: float) -> list[dict[str, Any]]:
        """``members`` as ``/nodes`` describes them, each probed over HTTP."""
        lead = self.leader()

        def probe(member: Peer) -> tuple[bool, float, str, str]:
            t0 = time.perf_counter()
            if member.node_id == self.cfg.node_id:
                return True, time.perf_counter() - t0, self.build_version, ""
            http_addr = member.reach
            conn = None
            try:
                host, _, port = http_addr.rpartition(":")
                conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
                conn.request("GET", "/readyz?noleader")
                resp = conn.getresponse()
                resp.read()
                return True, time.perf_counter() - t0, resp.getheader("X-RQLITE-VERSION", ""), ""
            except OSError as exc:
                return False, 0.0, "", str(exc)
            finally:
                if conn is not None:
                    conn.close()

        with ThreadPoolExecutor(max_workers=len(members)) as pool:
            probes = list(pool.map(probe, members))
        listed: list[dict[str, Any]] = []
        for m, (ok, took, version, err) in zip(members, probes, strict=True):
            entry: dict[str, Any] = {
                "id": m.node_id,
                "api_addr": f"http://{m.http_addr}",
                "addr": m.raft_addr,
                "version": version,
                "voter": True,
                "reachable": ok,
                "leader": bool(lead and lead[0] == m.node_id),
            }
            if ok:
                entry["time"] = took
                entry["time_s"] = go_duration(took)
            if err:
                entry["error"] = err
            listed.append(entry)
        return listed

    def leader_info(self, params: QueryParams) -> Reply:
        """``GET /leader`` (v9 and later): the leader as ``/nodes`` describes a node."""
        lead = self.leader()
        if lead is None:
            return text_reply(503, "leader not found")
        member = next((m for m in self.store.members() if m.node_id == lead[0]), None)
        if member is None:
            return text_reply(503, "leader not found")
        (entry,) = self._probed([member], params.duration("timeout", 1.0))
        return json_reply(entry, pretty=params.flag("pretty"))

    # -- /db/backup /db/load /remove ----------------------------------------------------------
    def backup(self, params: QueryParams, query: str, headers: Any) -> Reply:
        """The leader's database: the SQLite file, or with ``fmt=sql`` a SQL dump."""
        if not self.store.is_leader():
            return self._not_leader("GET", "/db/backup", query, params, None, headers)
        image = self.db.serialize()
        if params.raw.get("fmt") == "sql":
            return Reply(200, dump_sql(image), "application/sql")
        return Reply(200, image, "application/octet-stream")

    def load(self, params: QueryParams, query: str, body: bytes, headers: Any) -> Reply:
        """Replace the database with a SQLite file, or run a SQL text (a dump) as one
        statement; rqlite answers either as ``text/plain``."""
        if not self.store.is_leader():
            return self._not_leader("POST", "/db/load", query, params, None, headers, body)
        if body.startswith(SQLITE_HEADER) and _is_database(body):
            try:
                self.store.submit(
                    LOAD,
                    [Statement("", [body])],
                    False,
                    False,
                    params.duration("timeout", self.cfg.apply_timeout),
                )
            except NotApplied as exc:
                return text_reply(503, str(exc))
            except CommitUnknown as exc:
                return json_reply({"results": [], "error": str(exc)})
            reply = json_reply({"results": []})
        else:
            reply = self.execute(params, query, body, headers, "text/plain", counted=False)
        reply.content_type = "text/plain; charset=utf-8"
        return reply

    def debug_vars(self, params: QueryParams) -> Reply:
        """rqlite's expvar page, as its handler writes it (one top-level key a line, in
        key order; ``?key=NAME`` keeps one): the command line and the HTTP counters, under
        the names of the rqlite version followed (:mod:`.stats`)."""
        variables = {"cmdline": sys.argv, "http": dict(sorted(self.stats.snapshot().items()))}
        proxy = self.stats.proxy_snapshot()
        if proxy is not None:
            variables["proxy"] = dict(sorted(proxy.items()))
        wanted = params.raw.get("key")
        lines = [
            f"{json.dumps(k)}: {json.dumps(v)}"
            for k, v in sorted(variables.items())
            if not wanted or wanted == k
        ]
        body = "{\n" + ",\n".join(lines) + "\n}\n"
        return Reply(200, body.encode("utf-8"), "application/json; charset=utf-8")


def _is_database(image: bytes) -> bool:
    """Whether SQLite can open ``image`` as a database."""
    conn = apsw.Connection(":memory:")
    try:
        conn.deserialize("main", image)
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
    except apsw.Error:
        return False
    finally:
        conn.close()
    return True
