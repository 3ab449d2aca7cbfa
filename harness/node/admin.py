"""The cluster endpoints of rqlite's API: ``/status``, ``/nodes``, ``/readyz``, ``/leader``,
``/db/backup``, ``/db/load``, ``/remove`` and ``/debug/vars`` (shapes checked against
v8.36.18; the version reported is that of the rqlite release the node follows).

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
from .raft import LOAD, CommitUnknown, NotApplied
from .replies import Reply, json_reply, text_reply
from .statements import QueryParams, Statement

SQLITE_HEADER = b"SQLite format 3\x00"
#: /remove of a member: the embedded node's membership is fixed at start
STATIC_MEMBERSHIP = "cluster membership is static in the embedded node: cannot remove {id}"


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
    build_version: str
    stats: Any  # HttpStats
    leader: Callable[[], tuple[str, str, str] | None]
    _not_leader: Callable[..., Reply]
    execute: Callable[..., Reply]

    # -- /readyz /status /nodes /leader -------------------------------------------------------
    def readyz(self, params: QueryParams) -> Reply:
        if params.flag("noleader"):
            return Reply(200, b"[+]node ok", "text/plain; charset=utf-8")
        if self.leader() is None:
            return Reply(503, b"[+]node ok\n[+]leader does not exist", "text/plain; charset=utf-8")
        if not self.store.isReady():
            return Reply(
                503, b"[+]node ok\n[+]leader ok\n[+]store not ready", "text/plain; charset=utf-8"
            )
        return Reply(200, b"[+]node ok\n[+]leader ok\n[+]store ok", "text/plain; charset=utf-8")

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
                    for m in sorted(self.cfg.members, key=lambda m: m.node_id)
                ],
                "raft": {
                    "state": st["state"],
                    "term": int(st["term"]),
                    "commit_index": int(st["commit_index"]),
                    "applied_index": int(st["applied_index"]),
                    "log_size": int(st["log_size"]),
                    "num_peers": len(self.cfg.peers),
                    "voter": True,
                },
            },
        }
        return json_reply(body, pretty=params.flag("pretty"))

    def nodes(self, params: QueryParams) -> Reply:
        """Every member, probed over HTTP (``/readyz?noleader``) for reachability, round-trip
        time and version; ``?ver=2`` lists them, otherwise they are keyed by id."""
        lead = self.leader()
        timeout = params.duration("timeout", 1.0)

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

        members = sorted(self.cfg.members, key=lambda m: m.node_id)
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
        out: Any = (
            {"nodes": listed} if params.raw.get("ver") == "2" else {e["id"]: e for e in listed}
        )
        return json_reply(out, pretty=params.flag("pretty"))

    def leader_info(self) -> Reply:
        lead = self.leader()
        if lead is None:
            return text_reply(503, "leader not found")
        return json_reply(
            {"leader": {"node_id": lead[0], "addr": lead[1], "api_addr": f"http://{lead[2]}"}}
        )

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
        wanted = params.raw.get("key")
        lines = [
            f"{json.dumps(k)}: {json.dumps(v)}"
            for k, v in sorted(variables.items())
            if not wanted or wanted == k
        ]
        body = "{\n" + ",\n".join(lines) + "\n}\n"
        return Reply(200, body.encode("utf-8"), "application/json; charset=utf-8")

    def remove(self, body: bytes) -> Reply:
        """``DELETE /remove {"id": ...}``: an id that is not a member is a no-op (200)."""
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return Reply(400, b"", "text/plain; charset=utf-8")
        node_id = data.get("id") if isinstance(data, dict) else None
        if not isinstance(node_id, str):
            return Reply(400, b"", "text/plain; charset=utf-8")
        if any(m.node_id == node_id for m in self.cfg.members):
            return text_reply(503, STATIC_MEMBERSHIP.format(id=node_id))
        return Reply(200, b"", "text/plain; charset=utf-8")


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
