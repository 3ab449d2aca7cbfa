"""The rqlite versions the embedded node can follow, and what differs between them.

The node follows one version (``--rqlite-version``, default :data:`DEFAULT`): it decides
rewriting as that version's SQL processor does, answers its HTTP API as that version's
``http/service.go``, ``store/store.go`` and ``db/db.go`` do (:class:`Api`), reports that
version in ``/status`` and ``X-RQLITE-VERSION``, and names its ``/debug/vars`` counters as
that version does.

Sources, per difference (see docs/embedded-node.md, sections "rqlite versions" and "The
HTTP API, version by version"):

- measured: ``rewrite-corpus-v{8.36.18,9.4.5,10.2.7}.jsonl`` (tests/conformance/data), the
  same 78 statements through each version's own processor: v9.4.5 and v10.2.7 parse
  ``UPDATE ... FROM`` and ``COLLATE`` in an expression; v10.2.7 re-prints ``IS NOT NULL``
  as ``NOT NULL``; no version parses ``UPDATE ... LIMIT``;
- the measured facts of each version (the project's rqlite notes): v9 and v10 also parse
  backtick-quoted names;
- rqlite's source at each tag (``git show TAG:PATH`` in the rqlite mirror), not measured:
  a string argument shaped like a blob literal (``x'4142'``) binds as a BLOB since v8.31.0
  (``http/request_parser.go``, ``db/state.go``); every version's rqlite/sql (the commit
  its ``go.mod`` pins) parses ``DELETE ... [ORDER BY ...] LIMIT`` (``parser.go``,
  ``parseDeleteStatement``); the HTTP counters are snake case (``auth_ok``) from v8.37.0
  on, so in v9.4.5 too (``http/service.go``; the project's notes said v9 still wrote
  ``authOK``: the source of the tag says otherwise); everything in :class:`Api`;
- rqlite/sql's own history, not measured: the postfix ``ISNULL``/``NOTNULL``/``NOT NULL``
  (rqlite/sql pull request 64, May 2025: before v9.0) parse and print as ``IS NULL`` /
  ``NOT NULL``; v10's ``NOT NULL`` re-print above is that same printer.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT", "SUPPORTED", "Api", "Dialect", "RqliteVersion", "get"]


@dataclass(frozen=True)
class Dialect:
    """What one version's SQL parser accepts, beyond rqlite v8.36.18's."""

    update_from: bool = False  # UPDATE ... SET ... FROM source
    collate_expr: bool = False  # expr COLLATE name, anywhere in an expression
    backticks: bool = False  # `name` is a quoted identifier
    null_postfix: bool = False  # expr ISNULL | NOTNULL | NOT NULL
    is_not_null_postfix: bool = False  # expr IS NOT NULL is the postfix NOT NULL
    delete_limit: bool = True  # DELETE ... [ORDER BY ...] LIMIT ...
    #: where a re-printed chain of JOINs puts each ON/USING (rqlite/sql's ``parseSource``
    #: and ``JoinClause.String`` at the commit the version pins): "first-last" (v8: the
    #: first join's printed last), "three-joins" (v9: each with its join for up to three
    #: joins, then the first's after the last but two), "in-place" (v10)
    join_constraints: str = "first-last"


V8 = Dialect()
V9 = Dialect(
    update_from=True,
    collate_expr=True,
    backticks=True,
    null_postfix=True,
    join_constraints="three-joins",
)
V10 = Dialect(
    update_from=True,
    collate_expr=True,
    backticks=True,
    null_postfix=True,
    is_not_null_postfix=True,
    join_constraints="in-place",
)


#: rqlite v8's breaking PRAGMAs (``db/state.go``, ``BreakingPragmas``): a request holding
#: one is refused whole (``store/state.go``, ``PragmaCheckRequest``)
_BREAKING_PRAGMAS = ("journal_mode", "wal_autocheckpoint", "wal_checkpoint", "synchronous")
#: rqlite v8.36's HTTP counters (``http/service.go``, ``ResetStats``), by their v10 names
_V8_COUNTERS = (
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
    "queued_executions_wait_timeout",
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
    "user_snapshots",
    "auth_ok",
    "auth_fail",
)
#: the counters v9 moved from ``http`` to the ``proxy`` map (``proxy/proxy.go``)
PROXY_COUNTERS = (
    "remote_remove_node",
    "remote_backups",
    "remote_loads",
    "remote_stepdowns",
    "remote_executions",
    "remote_executions_failed",
    "remote_queries",
    "remote_queries_failed",
    "remote_requests",
    "remote_requests_failed",
)
_V9_COUNTERS = (
    *(c for c in _V8_COUNTERS if c not in PROXY_COUNTERS),
    "sql_analyze",
    "tls_cert_fetched",
)
_V10_COUNTERS = (
    "ui",
    *(c for c in _V9_COUNTERS if c != "loads_aborted"),
    "user_reaps",
)


@dataclass(frozen=True)
class Api:
    """What one version's HTTP API does, where the three versions differ (rqlite's source at
    each tag: ``http/service.go``, ``http/query_params.go``, ``store/store.go``,
    ``db/db.go``, ``proxy/proxy.go``, ``command/sql/processor.go``)."""

    #: ``/db/request`` and ``/db/query?level=strong`` hand ``norwrandom`` to the processor
    #: un-negated (``sql.Process(stmts, qp.NoRewriteRandom(), ...)``): ``random()`` is
    #: rewritten there only when the request says ``norwrandom`` (v8, v9)
    random_flag_inverted: bool
    #: ``/db/request?level=linearizable`` (all reads) is checked at the leader
    #: (``waitForLinearizableRead``, v9+); v8 reads it locally, unchecked, on any node
    linearizable_request_checked: bool
    #: an ``EXPLAIN`` statement counts as a read (``SqlExplain``, v9+)
    explain_reads: bool
    #: reads run on a ``query_only`` connection, a write's error remapped to
    #: ``attempt to change database via query operation`` whatever statement of the
    #: string it was (v10); before, only the first statement is checked up front
    query_only_reads: bool
    #: forwarding goes through ``proxy/proxy.go`` (v9+): ``X-RQLITE-SERVED-BY`` on every
    #: answer that succeeded (this node's HTTP address, or the leader's Raft address), a
    #: failed forward's error as the cluster client said it, remote counters under
    #: ``proxy``; v8 sets the header only when forwarding, and prefixes the error
    proxy: bool
    #: ``?raft_index``: the log index of a write or strong read in the answer (v9+)
    raft_index: bool
    #: ``?qualify_columns``: ``table.column`` names (v10)
    qualify_columns: bool
    #: ``/readyz`` also runs ``SELECT 1`` and says ``[+]db ok`` (v10)
    readyz_db_check: bool
    #: ``GET /leader`` answers the leader as a node of ``/nodes`` (v9+; v8: 404)
    leader_endpoint: bool
    #: ``/db/execute`` honours ``associative`` and ``blob_array`` (v9+: ``execute`` sets
    #: them on its response as ``/db/query`` and ``/db/request`` do; v8 does not)
    execute_associative: bool
    breaking_pragmas: tuple[str, ...]
    #: the ``http`` counters of ``/debug/vars`` (v10 names)
    counters: tuple[str, ...]
    #: a forwarded command whose exchange with the leader failed is sent once more on a
    #: new connection, though the request asked for no retries (v10: ``cluster/client.go``
    #: ``retry``, ``effectiveRetries := max(1, maxRetries)``); v8 and v9 send once
    forward_resends: bool = False


V8_API = Api(
    random_flag_inverted=True,
    linearizable_request_checked=False,
    explain_reads=False,
    query_only_reads=False,
    proxy=False,
    raft_index=False,
    qualify_columns=False,
    readyz_db_check=False,
    leader_endpoint=False,
    execute_associative=False,
    breaking_pragmas=_BREAKING_PRAGMAS,
    counters=_V8_COUNTERS,
)
V9_API = Api(
    random_flag_inverted=True,
    linearizable_request_checked=True,
    explain_reads=True,
    query_only_reads=False,
    proxy=True,
    raft_index=True,
    qualify_columns=False,
    readyz_db_check=False,
    leader_endpoint=True,
    execute_associative=True,
    breaking_pragmas=_BREAKING_PRAGMAS,
    counters=_V9_COUNTERS,
)
V10_API = Api(
    random_flag_inverted=False,
    linearizable_request_checked=True,
    explain_reads=True,
    query_only_reads=True,
    proxy=True,
    raft_index=True,
    qualify_columns=True,
    readyz_db_check=True,
    leader_endpoint=True,
    execute_associative=True,
    breaking_pragmas=(*_BREAKING_PRAGMAS, "query_only"),
    counters=_V10_COUNTERS,
    forward_resends=True,
)


@dataclass(frozen=True)
class RqliteVersion:
    """One rqlite release the node can follow."""

    number: str  # "10.2.7"
    dialect: Dialect
    api: Api
    snake_case_counters: bool  # /debug/vars: auth_ok (>= 8.37, so v9, v10) or authOK (v8.36)
    #: a string argument shaped ``x'hex'`` binds as a BLOB (>= 8.31, from the source:
    #: ``http/request_parser.go`` calls ``db.ParseHex``); every version followed has it
    hex_blob_params: bool = True

    @property
    def tag(self) -> str:
        """As rqlite reports its own version: ``v10.2.7``."""
        return f"v{self.number}"

    @property
    def build_version(self) -> str:
        """What the embedded node following it reports (``/status`` ``build.version``,
        ``X-RQLITE-VERSION``): rqlite's tag and a suffix that says it is not rqlite."""
        return f"{self.tag}-rqueue-embedded"


_VERSIONS = {
    v.number: v
    for v in (
        RqliteVersion("10.2.7", V10, V10_API, snake_case_counters=True),
        RqliteVersion("9.4.5", V9, V9_API, snake_case_counters=True),
        RqliteVersion("8.36.18", V8, V8_API, snake_case_counters=False),
    )
}
#: the versions the node can follow, newest first
SUPPORTED: tuple[str, ...] = tuple(_VERSIONS)
#: what the node follows unless told otherwise: the current release
DEFAULT = "10.2.7"


def get(version: str | RqliteVersion | None = None) -> RqliteVersion:
    """The supported version named ``version`` (``"10.2.7"`` or ``"v10.2.7"``; None: the
    default); a :class:`ValueError` naming the supported ones otherwise."""
    if isinstance(version, RqliteVersion):
        return version
    name = DEFAULT if version is None else version.removeprefix("v")
    try:
        return _VERSIONS[name]
    except KeyError:
        raise ValueError(
            f"rqlite version {version!r} is not one the embedded node follows; "
            f"choose one of {', '.join(SUPPORTED)}"
        ) from None
