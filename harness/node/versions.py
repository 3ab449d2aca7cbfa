"""The rqlite versions the embedded node can follow, and what differs between them.

The node follows one version (``--rqlite-version``, default :data:`DEFAULT`): it decides
rewriting as that version's SQL processor does, reports that version in ``/status`` and
``X-RQLITE-VERSION``, and names its ``/debug/vars`` HTTP counters as that version does.

Sources, per difference (see docs/embedded-node.md, section "rqlite versions"):

- measured: ``rewrite-corpus-v{8.36.18,9.4.5,10.2.7}.jsonl`` (tests/conformance/data), the
  same 78 statements through each version's own processor: v9.4.5 and v10.2.7 parse
  ``UPDATE ... FROM`` and ``COLLATE`` in an expression; v10.2.7 re-prints ``IS NOT NULL``
  as ``NOT NULL``;
- the measured facts of each version (the project's rqlite notes): v9 and v10 also parse
  backtick-quoted names; v10 rejects ``DELETE/UPDATE ... LIMIT``; v10 names its HTTP
  counters in snake case (``auth_ok``, not ``authOK``);
- rqlite's source, not measured: since v8.31.0 a string argument shaped like a blob
  literal (``x'4142'``) binds as a BLOB (``http/request_parser.go``, ``db/state.go``);
- rqlite/sql's own history, not measured: the postfix ``ISNULL``/``NOTNULL``/``NOT NULL``
  (rqlite/sql pull request 64, May 2025: before v9.0) parse and print as ``IS NULL`` /
  ``NOT NULL``; v10's ``NOT NULL`` re-print above is that same printer.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT", "SUPPORTED", "Dialect", "RqliteVersion", "get"]


@dataclass(frozen=True)
class Dialect:
    """What one version's SQL parser accepts, beyond rqlite v8.36.18's."""

    update_from: bool = False  # UPDATE ... SET ... FROM source
    collate_expr: bool = False  # expr COLLATE name, anywhere in an expression
    backticks: bool = False  # `name` is a quoted identifier
    null_postfix: bool = False  # expr ISNULL | NOTNULL | NOT NULL
    is_not_null_postfix: bool = False  # expr IS NOT NULL is the postfix NOT NULL
    delete_limit: bool = True  # DELETE ... [ORDER BY ...] LIMIT ...


V8 = Dialect()
V9 = Dialect(update_from=True, collate_expr=True, backticks=True, null_postfix=True)
V10 = Dialect(
    update_from=True,
    collate_expr=True,
    backticks=True,
    null_postfix=True,
    is_not_null_postfix=True,
    delete_limit=False,
)


@dataclass(frozen=True)
class RqliteVersion:
    """One rqlite release the node can follow."""

    number: str  # "10.2.7"
    dialect: Dialect
    snake_case_counters: bool  # /debug/vars: auth_ok (v10) or authOK (v8, v9)
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
        RqliteVersion("10.2.7", V10, snake_case_counters=True),
        RqliteVersion("9.4.5", V9, snake_case_counters=False),
        RqliteVersion("8.36.18", V8, snake_case_counters=False),
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
