"""rqlite's HTTP counters, served at ``/debug/vars`` under the key ``http``.

rqlite's HTTP service (``http/service.go``) keeps them in an expvar map and counts:

- one per request by path prefix, before anything else is checked (a wrong method, a bad
  body or a refused login are counted too; a query string rqlite cannot parse is not):
  ``executions`` (``/db/execute``), ``queries`` (``/db/query``), ``requests``
  (``/db/request``), ``backups``, ``loads``, ``num_status``, ``num_readyz``;
- ``auth_ok`` (``authOK`` before v10) each time a handler checks the caller's permission
  and it passes, which, with no credentials configured, is once per request to
  ``/db/*``, ``/status``, ``/nodes``, ``/readyz``, ``/remove`` and ``/debug/vars``;
  ``auth_fail`` (``authFail``) when it fails;
- ``execute_stmts_rx``, ``query_stmts_rx``, ``request_stmts_rx``: the statements of a
  request, once its body parsed;
- ``remote_executions``, ``remote_queries``, ``remote_requests`` for each request handed
  to the leader (also when that failed, which adds ``remote_*_failed``), ``remote_backups``
  and ``remote_loads`` when that succeeded; ``leader_not_found`` when no leader was known.

A request a follower hands to the leader reaches rqlite's leader over its cluster
protocol, not over HTTP: the leader's HTTP counters do not see it. The embedded node
forwards over HTTP, so it leaves such requests (:data:`.forward.FORWARDED_HEADER`) out.

Names: v10 names every counter in snake case (``auth_ok``, measured); v8 and v9 call the
two auth counters ``authOK`` and ``authFail``. The list is that of rqlite v8's
``http/service.go``; counters of features the node lacks (queued writes, ``/boot``) stay 0.
"""

from __future__ import annotations

import threading

from .versions import RqliteVersion

#: every counter, by its v10 name
NAMES = (
    "leader_not_found",
    "executions",
    "execute_stmts_rx",
    "queued_executions",
    "queued_executions_ok",
    "queued_executions_num_stmts_rx",
    "queued_executions_num_stmts_tx",
    "queued_executions_no_leader",
    "queued_executions_not_leader",
    "queued_executions_leadership_lost",
    "queued_executions_unknown_error",
    "queued_executions_failed",
    "queued_executions_wait",
    "queries",
    "query_stmts_rx",
    "requests",
    "request_stmts_rx",
    "remote_executions",
    "remote_executions_failed",
    "remote_queries",
    "remote_queries_failed",
    "remote_requests",
    "remote_requests_failed",
    "remote_backups",
    "remote_loads",
    "remote_remove_node",
    "num_readyz",
    "num_status",
    "backups",
    "loads",
    "loads_aborted",
    "boot",
    "auth_ok",
    "auth_fail",
)
#: what v8 and v9 call the counters v10 renamed
_BEFORE_V10 = {"auth_ok": "authOK", "auth_fail": "authFail"}
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
        self._names = {
            n: n if version.snake_case_counters else _BEFORE_V10.get(n, n) for n in NAMES
        }
        self._counts = dict.fromkeys(NAMES, 0)
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
            if path == "/debug/vars" or path.startswith(_PERMISSION_PREFIXES):
                self._counts["auth_ok"] += 1

    def snapshot(self) -> dict[str, int]:
        """Every counter under the version's name."""
        with self._lock:
            return {self._names[n]: v for n, v in self._counts.items()}
