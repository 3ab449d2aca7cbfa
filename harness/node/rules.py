"""What rqlite decides about a request before anything runs, version by version (sans IO).

- :func:`rewrite_flags`: whether the receiving node rewrites ``random()`` and the time
  functions (``http/service.go``, where each handler calls ``sql.Process(stmts, rwrand,
  rwtime)``):

  ======================  ===========================  ===========================
  endpoint                v8.36.18, v9.4.5             v10.2.7
  ======================  ===========================  ===========================
  ``/db/execute``         random, time                 random, time
  ``/db/execute?queue``   random, time (no ``noparse``) random, time (no ``noparse``)
  ``/db/request``         time; random only *with*     random, time
                          ``norwrandom`` (inverted)
  ``/db/query`` strong    as ``/db/request``           random, time
  ``/db/query`` other     not processed                nothing rewritten
  ======================  ===========================  ===========================

  (v10 processes every ``/db/query`` with both off, which only marks ``RETURNING`` and
  ``EXPLAIN`` statements: nothing a read shows, so the node skips it.)

  ``norwtime``/``norwrandom`` turn each off (but for the inversion); ``noparse`` skips the
  processing (and with it ``RETURNING`` detection) except on the queue.
- :func:`read_path`: how a request whose statements all read is served, by level
  (``store/store.go``, ``Query`` and ``Request``).
- :func:`marks_explain`: whether the processing marks a statement ``EXPLAIN`` (v9+), which
  then counts as a read.
- :func:`is_stale_read`: rqlite's freshness test for ``level=none`` (``store/state.go``).
- :func:`breaking_pragma`: the PRAGMAs that make rqlite refuse a whole request
  (``db/state.go``, ``BreakingPragmas``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .sql.parser import Parser
from .sql.tree import ParseError
from .versions import Api, RqliteVersion

EXECUTE, QUEUE, REQUEST, QUERY = "execute", "queue", "request", "query"

#: how an all-read request is served
LOCAL = "local"  # this node's database, no check at all
NONE = "none"  # this node's database, after the freshness check (when one is given)
LEADER = "leader"  # the leader's database (weak): a follower forwards
LOG = "log"  # through the Raft log (strong)
LINEARIZABLE = "linearizable"  # the leader's database once it confirmed its leadership

#: rqlite's ``DISALLOWED_PRAGMA`` error text (``store/state.go``)
DISALLOWED_PRAGMA = "disallowed pragma"


def rewrite_flags(
    api: Api, endpoint: str, level: str, flags: Mapping[str, str]
) -> tuple[bool, bool] | None:
    """``(rewrite random(), rewrite time)`` as the receiving node of ``api``'s version
    decides for ``endpoint`` (one of :data:`EXECUTE`, :data:`QUEUE`, :data:`REQUEST`,
    :data:`QUERY`) at read ``level``; None when the statements are not processed at all
    (nothing rewritten, ``RETURNING`` not looked for)."""
    rand_off, time_off = "norwrandom" in flags, "norwtime" in flags
    if endpoint == QUEUE:
        return (not rand_off, not time_off)
    if "noparse" in flags:
        return None
    if endpoint == EXECUTE:
        return (not rand_off, not time_off)
    if endpoint == QUERY and level != "strong":
        return None
    # /db/request at any level, or a strong /db/query
    return (rand_off if api.random_flag_inverted else not rand_off, not time_off)


def read_path(api: Api, endpoint: str, level: str) -> str:
    """How an all-read ``/db/query`` or ``/db/request`` at ``level`` is served.
    ``auto`` is ``weak`` on a voter for a query
    (every embedded node votes), but ``/db/request`` never converts it and reads locally;
    ``linearizable`` on ``/db/request`` is checked only from v9 on."""
    if level == "none":
        return NONE
    if level == "strong":
        return LOG
    if level == "linearizable":
        if endpoint == REQUEST and not api.linearizable_request_checked:
            return LOCAL
        return LINEARIZABLE
    if level == "auto" and endpoint == REQUEST:
        return LOCAL
    return LEADER


_SPACE = "[\t\n\f\r ]"  # Go's \s
_PRAGMA_RES: dict[str, re.Pattern[str]] = {
    name: re.compile(rf"^{_SPACE}*PRAGMA{_SPACE}+{schema}{name}{tail}", re.IGNORECASE | re.ASCII)
    for name, schema, tail in (
        ("journal_mode", r"(\w+\.)?", f"{_SPACE}*={_SPACE}*"),
        ("wal_autocheckpoint", "", f"{_SPACE}*={_SPACE}*"),
        ("wal_checkpoint", r"(\w+\.)?", ""),
        ("synchronous", r"(\w+\.)?", f"{_SPACE}*={_SPACE}*"),
        ("query_only", r"(\w+\.)?", f"{_SPACE}*={_SPACE}*"),
    )
}


def breaking_pragma(api: Api, sqls: Iterable[str]) -> bool:
    """Whether one of the statement texts sets a PRAGMA rqlite of ``api``'s version refuses
    (matched at the start of each text, as rqlite's regular expressions do)."""
    patterns = [_PRAGMA_RES[name] for name in api.breaking_pragmas]
    return any(
        p.search(sql) for sql in sqls if sql.lstrip()[:6].upper() == "PRAGMA" for p in patterns
    )


def marks_explain(sql: str, version: RqliteVersion) -> bool:
    """Whether the processing of ``version`` marks ``sql`` as an ``EXPLAIN``
    (``SqlExplain``, v9+): its text holds ``explain `` and rqlite's parser reads an
    ``EXPLAIN`` statement. rqlite then counts it as a read on ``/db/request`` and lets it
    through a read-only check."""
    if not version.api.explain_reads or "explain " not in sql.lower():
        return False
    try:
        return Parser(sql, version.dialect).statement().kind == "explain"
    except ParseError:
        return False


def is_stale_read(
    *,
    leader: bool,
    since_contact: float,
    freshness: float,
    strict: bool,
    applied_index: int,
    commit_index: int,
    fsm_update_time: float | None,
    appended_at: float | None,
) -> bool:
    """rqlite's ``IsStaleRead`` (``store/state.go``, the same in v8.36.18, v9.4.5 and
    v10.2.7) for a ``level=none`` read: never on the leader nor without a freshness
    (``0``); stale when the leader was last heard from (``since_contact`` seconds ago)
    longer than ``freshness`` ago; with ``strict`` also when this node has not applied all
    it knows committed and the entry it applied last took longer than ``freshness`` from
    the leader's append (``appended_at``, the leader's clock) to its apply here
    (``fsm_update_time``, this node's clock)."""
    if leader or freshness == 0:
        return False
    if since_contact > freshness:
        return True
    if not strict or appended_at is None or fsm_update_time is None:
        return False
    if applied_index >= commit_index:
        return False
    return fsm_update_time - appended_at > freshness
