"""rqlite's HTTP counters, served at ``/debug/vars`` under the key ``http`` (and, from v9 on,
the forwarding counters under ``proxy``).

rqlite's HTTP service (``http/service.go``) keeps them in an expvar map and counts:

- one per request by path prefix, before anything else is checked (a wrong method, a bad
  body or a refused login are counted too; a query string rqlite cannot parse is not):
  ``executions`` (``/db/execute``), ``queries`` (``/db/query``), ``requests``
  (``/db/request``), ``backups``, ``loads``, ``num_status``, ``num_readyz``;
- ``auth_ok`` (``authOK`` before v8.37) each time a handler checks the caller's
  permission and it passes, which, with no credentials configured, is once per request to
  ``/db/*``, ``/status``, ``/nodes``, ``/readyz``, ``/remove`` and ``/debug/vars``;
  ``auth_fail`` (``authFail``) when it fails;
- ``execute_stmts_rx``, ``query_stmts_rx``, ``request_stmts_rx``: the statements of a
  request, once its body parsed; ``queued_executions*`` for ``?queue``
  (:mod:`.write_queue`);
- the requests handed to the leader: v8 in ``http``, ``remote_executions``,
  ``remote_queries``, ``remote_requests`` for each (also when that failed, which adds
  ``remote_*_failed``), ``remote_backups`` and ``remote_loads`` when that succeeded;
  v9 and v10 in ``proxy`` (``proxy/proxy.go``): ``remote_*`` only when it succeeded,
  ``remote_*_failed`` when it failed; ``leader_not_found`` when no leader was known.

A request a follower hands to the leader reaches rqlite's leader over its cluster
protocol, not over HTTP: the leader's HTTP counters do not see it. The embedded node
forwards over HTTP, so it leaves such requests (:data:`.forward.FORWARDED_HEADER`) out.

Which counters exist is each version's list (:attr:`.versions.Api.counters`, from its
``ResetStats``); counters of features the node lacks (``/boot``, the UI, TLS) stay 0.
"""

from __future__ import annotations

import threading

from .versions import PROXY_COUNTERS, RqliteVersion

#: what v8.36 calls the counters v8.37 renamed
_BEFORE_V8_37 = {"auth_ok": "authOK", "auth_fail": "authFail"}
#: path prefix -> the counter of requests to it
PATH_COUNTERS = (
    ("/db/execute", "executions"),
    ("/db/query", "queries"),
    ("/db/request", "requests"),
    ("/db/backup", "backups"),
    ("/db/load", "loads"),
    ("/status", "num_status"),
    ("/readyz", "num_readyz"),
)
#: paths whose handler checks the caller's permission (exact: ``/debug/vars``)
_PERMISSION_PREFIXES = (*(p for p, _ in PATH_COUNTERS), "/nodes", "/remove")
#: the path of each forwarded request kind -> its remote counter
REMOTE = {
    "/db/execute": "remote_executions",
    "/db/query": "remote_queries",
    "/db/request": "remote_requests",
    "/db/backup": "remote_backups",
    "/db/load": "remote_loads",
}


class HttpStats:
    """The counters of one node, named as its rqlite version names them."""

    def __init__(self, version: RqliteVersion) -> None:
        http = version.api.counters
        self._names = {
            n: n if version.snake_case_counters else _BEFORE_V8_37.get(n, n) for n in http
        }
        self._proxy = PROXY_COUNTERS if version.api.proxy else ()
        self._leader_checks = version.api.leader_endpoint  # GET /leader checks permission
        self._counts = dict.fromkeys((*http, *self._proxy), 0)
        self._lock = threading.Lock()

    def add(self, counter: str, n: int = 1) -> None:
        """Add ``n`` to ``counter`` (its v10 name)."""
        with self._lock:
            self._counts[counter] += n

    def count_request(self, path: str) -> None:
        """What rqlite counts for a request to ``path`` before handling it."""
        with self._lock:
            for prefix, counter in PATH_COUNTERS:
                if path.startswith(prefix):
                    self._counts[counter] += 1
                    break
            if (
                path == "/debug/vars"
                or path.startswith(_PERMISSION_PREFIXES)
                or (path == "/leader" and self._leader_checks)
            ):
                self._counts["auth_ok"] += 1

    def snapshot(self) -> dict[str, int]:
        """Every ``http`` counter under the version's name."""
        with self._lock:
            return {self._names[n]: self._counts[n] for n in self._names}

    def proxy_snapshot(self) -> dict[str, int] | None:
        """The ``proxy`` counters (v9 and later), None where the version has none."""
        if not self._proxy:
            return None
        with self._lock:
            return {n: self._counts[n] for n in self._proxy}
