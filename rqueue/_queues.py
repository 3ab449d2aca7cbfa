"""Named queues: several queues in one rqlite database.

The default queue (``queue=None`` or ``"default"``) is the one of every earlier release:
its tables keep their names (``messages``, ``groups``, ``rqueue_*``), so an existing
database is read as it is. A named queue, e.g. ``"orders"``, has a set of tables, indexes
and triggers of its own, the same ones under the prefix ``rq_orders__``
(``rq_orders__messages``, ``rq_orders__groups``, ``rq_orders__rqueue_dead``, ...): its own
groups, FIFO, dead letters and counters. The table ``rqueue_queues`` lists every queue
opened (each ``open()`` registers its own), for ``python -m rqueue queues``.

The statements stay unaware of queues (:class:`~rqueue.Statements`, its mutant
subclasses, the schema, the operator's reads): :func:`qualify` rewrites the names in a
rendered statement, and the core applies it to every statement it sends
(:class:`Naming`). Only names change: a table, index or trigger name as an identifier
(bare or double-quoted, never a column after a dot), a name compared with a catalog's
``name`` column as a string literal (``sqlite_sequence WHERE name = 'messages'``), and
the parameters of a catalog read (``pragma_table_info(?)``, ``sqlite_master``). Time
functions stay where they were, so rqlite's time rewriting reaches the same places (see
:mod:`rqueue._render`); a prefixed ``groups`` is not the keyword rqlite's parser
refuses, so a statement it accepted before it accepts after (one it refused for that
keyword alone it now takes, and rewrites its time functions: rqueue has them only in reads
and in the stamp, where the receiving node's clock is the one meant either way). Names
rewritten: ``messages``,
``groups`` and every ``rqueue_*`` except :data:`SHARED`: ``rqueue_clock`` (one request's
time stamp, whichever queue the request is for) and the registry itself.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from . import _stats
from ._exceptions import ProtocolError, QueueNotFound, StatementError
from ._models import Fuse, HttpCall, Op, Result, Stats, Stmt
from ._statements import NOW, Statements

#: the name of the queue whose tables carry no prefix
DEFAULT = "default"
#: what a queue's name may be: it becomes part of table names
NAME_RULE = re.compile(r"[a-z][a-z0-9_]{0,39}")
#: the rule, as error messages say it
RULE_TEXT = "a lowercase letter, then up to 39 lowercase letters, digits or underscores"
#: tables every queue shares: the request's time stamp, the registry of queues
SHARED = frozenset({"rqueue_clock", "rqueue_queues"})
#: the tables of the default queue that a named queue has under its prefix (besides every
#: ``rqueue_*`` name not in :data:`SHARED`)
PLAIN = frozenset({"messages", "groups"})

REGISTRY = Stmt("CREATE TABLE IF NOT EXISTS rqueue_queues (name TEXT PRIMARY KEY, created_at REAL)")
LIST = Stmt("SELECT name, created_at FROM rqueue_queues ORDER BY name")
#: whether the registry and the default queue's tables are there (a database from before
#: the registry has no registry, but may have a default queue)
CATALOG = Stmt(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('rqueue_queues', 'messages')"
)
#: statements about the database, not one queue: sent as they are
GLOBAL = frozenset(s.sql for s in (REGISTRY, LIST, CATALOG))


def check_name(value: Any, arg: str = "queue") -> str | None:
    """The checked queue name: None for the default queue (None or ``"default"``)."""
    if value is None or value == DEFAULT:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{arg}: expected a queue name (str) or None, got {type(value).__name__}")
    if not NAME_RULE.fullmatch(value):
        raise ValueError(f"{arg}: {value!r} is not a queue name: {RULE_TEXT}")
    return value


def display(queue: str | None) -> str:
    """The name a queue is listed under."""
    return DEFAULT if queue is None else queue


def prefix(queue: str) -> str:
    """The prefix of a named queue's tables, indexes and triggers.

    No two queues' names collide: the names prefixed hold no ``__``, so ``rq_A__T`` fixes
    both A and T.
    """
    return f"rq_{queue}__"


#: what follows each node URL in a named queue's lease origin, before the queue's name
ORIGIN_TAG = "#queue="


def origin(urls: Iterable[str], queue: str | None) -> str:
    """What a lease's ``origin`` says: the node URLs, tagged with a named queue, so that a
    lease of one queue is refused by a transport of another (``rqueue._validate.lease``)."""
    tag = "" if queue is None else f"{ORIGIN_TAG}{queue}"
    return ",".join(sorted(f"{u}{tag}" for u in urls))


# -- the rewrite ---------------------------------------------------------------------------
_TOKEN = re.compile(
    r"""(?P<str>'(?:[^']|'')*')"""
    r"""|(?P<quoted>"(?:[^"]|"")*")"""
    r"""|(?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"""
    r"""|(?P<word>[A-Za-z_][A-Za-z0-9_$]*)"""
    r"""|(?P<space>\s+)"""
    r"""|(?P<other>.)""",
    re.DOTALL,
)
#: statements whose string parameters may be names of tables, indexes or triggers
_CATALOGS = ("pragma_table_info", "sqlite_master", "sqlite_schema", "sqlite_sequence")


def _owned(name: str) -> bool:
    """Whether ``name`` (a table, index or trigger) belongs to one queue."""
    low = name.lower()
    return low in PLAIN or (low.startswith("rqueue_") and low not in SHARED)


@functools.lru_cache(maxsize=512)
def qualify_sql(sql: str, queue: str | None) -> str:
    """``sql`` with the queue's names of tables, indexes and triggers (see the module doc);
    cached: an operation sends the same few texts again and again."""
    if queue is None:
        return sql
    pre = prefix(queue)
    out: list[str] = []
    seen: list[str] = []  # the significant tokens so far, lowercased
    for m in _TOKEN.finditer(sql):
        kind, text = m.lastgroup, m.group()
        if kind == "word" and _owned(text) and (not seen or seen[-1] != "."):
            text = pre + text
        elif kind == "quoted" and _owned(text[1:-1]) and (not seen or seen[-1] != "."):
            text = f'"{pre}{text[1:-1]}"'
        elif kind == "str" and _owned(text[1:-1]) and seen[-2:] == ["name", "="]:
            text = f"'{pre}{text[1:-1]}'"
        out.append(text)
        if kind != "space":
            seen.append(text.lower())
    return "".join(out)


def qualify(stmt: Stmt, queue: str | None) -> Stmt:
    """``stmt`` for the queue ``queue`` (None: the default queue, unchanged)."""
    if queue is None or stmt.sql in GLOBAL:
        return stmt
    sql = qualify_sql(stmt.sql, queue)
    params = stmt.params
    if params and _reads_catalog(stmt.sql):
        pre = prefix(queue)
        params = tuple(pre + p if isinstance(p, str) and _owned(p) else p for p in params)
    return Stmt(sql, params, stmt.fuse)


@functools.lru_cache(maxsize=512)
def _reads_catalog(sql: str) -> bool:
    """Whether ``sql`` reads a catalog, whose parameters may name tables."""
    low = sql.lower()
    return any(c in low for c in _CATALOGS)


class Naming:
    """One queue's names, as the core applies them to the statements it sends."""

    def __init__(self, queue: str | None) -> None:
        self.queue = check_name(queue)
        self._fuser: Any = None
        self._wrapped: _Fuser | None = None

    def stmts(self, stmts: Sequence[Stmt]) -> tuple[Stmt, ...]:
        if self.queue is None:
            return tuple(stmts)
        return tuple(qualify(s, self.queue) for s in stmts)

    def fuser(self, fuser: Statements | None) -> Any:
        """``fuser`` (see ``Statements.fuser``), its fused statements qualified; the same
        object for the same fuser, as merging requires of the calls it merges."""
        if self.queue is None or fuser is None:
            return fuser
        if self._fuser is not fuser:
            self._fuser, self._wrapped = fuser, _Fuser(fuser, self.queue)
        return self._wrapped


@dataclass(frozen=True)
class _Fuser:
    fuser: Statements
    queue: str

    def fused(self, fuses: Sequence[Fuse]) -> Stmt:
        return qualify(self.fuser.fused(fuses), self.queue)


# -- the registry --------------------------------------------------------------------------
class Core(Protocol):
    """What the registry's operations use of a queue's core (:class:`rqueue._core.QueueCore`,
    which stands above this module)."""

    statements: Statements
    naming: Naming

    def write(
        self, stmts: Sequence[Stmt], what: str, *, idempotent: bool = False, mergeable: bool = False
    ) -> HttpCall: ...

    def read(self, stmts: Sequence[Stmt], what: str, *, qualified: bool = True) -> HttpCall: ...


@dataclass(frozen=True)
class QueueInfo:
    """A queue of the database, as ``queues()`` lists it: its name, when it was first
    opened (server epoch seconds; None for a database from before the registry) and its
    depth, as its own ``stats()`` would say (None when its schema is of a release that
    kept no counters: a transport's ``from_url`` migrates it)."""

    name: str
    created_at: float | None = None
    stats: Stats | None = None


def register(core: Core) -> Op[None]:
    """Create the registry if absent and add the core's queue (kept if already there)."""
    s = core.statements
    entry = s.stmt(
        "INSERT OR IGNORE INTO rqueue_queues (name, created_at) VALUES (?, {now})",
        display(core.naming.queue),
        NOW,
    )
    yield core.write([REGISTRY, entry], "register the queue", idempotent=True)


#: whether the core's queue has its tables (qualified as every statement is: the string
#: becomes the queue's own table name)
EXISTS = Stmt("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'messages'")


def exists(core: Core) -> Op[bool]:
    """Whether the core's queue was created: its tables are there (a queue a release
    before ``create=`` opened has them too, and is in the registry)."""
    (res,) = yield core.read([EXISTS], "find the queue")
    return bool(res.rows and res.rows[0][0])


def require(core: Core) -> Op[None]:
    """:class:`~rqueue.QueueNotFound` unless the core's queue exists (the default queue
    always does: opening it creates it, as every earlier release did)."""
    queue = core.naming.queue
    if queue is not None and not (yield from exists(core)):
        raise QueueNotFound(not_found(queue))


def not_found(queue: str) -> str:
    """The one line that says a named queue is missing, and how to create it."""
    return (
        f"no queue {queue!r} on these nodes (misspelt? `python -m rqueue queues` lists "
        f"them); create it on purpose: from_url(..., queue={queue!r}, create=True) or "
        f"`python -m rqueue queues create {queue}`"
    )


def list_queues(core: Core) -> Op[list[QueueInfo]]:
    """Every queue of the database, by name, with its depth (one more read for all of
    them). A database no transport of this release has opened has no registry yet: its
    default queue is listed if its tables are there."""
    (found,) = yield core.read([CATALOG], "queues")
    tables = {row[0] for row in found.rows}
    if "rqueue_queues" not in tables:
        listed = [QueueInfo(DEFAULT)] if "messages" in tables else []
    else:
        (res,) = yield core.read([LIST], "queues")
        listed = queues_of(res)
    try:
        stats = yield from stats_by_queue(core, [q.name for q in listed])
    except StatementError:  # a schema without counters (older than this release)
        return listed
    return [dataclasses.replace(q, stats=stats[q.name]) for q in listed]


def queues_of(res: Result) -> list[QueueInfo]:
    """The rows of :data:`LIST` as :class:`QueueInfo`."""
    try:
        return [QueueInfo(str(name), None if at is None else float(at)) for name, at in res.rows]
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"queues: unreadable row: {exc}") from exc


def stats_by_queue(core: Core, names: Sequence[str]) -> Op[dict[str, Stats]]:
    """``stats()`` of each queue in ``names``, in one read: each statement is qualified
    here for its own queue, and sent as it is whichever queue ``core`` is for."""
    per = len(_stats.STATEMENTS)
    stmts = [qualify(s, check_name(n)) for n in names for s in _stats.STATEMENTS]
    if not stmts:
        return {}
    results = yield core.read(stmts, "stats of every queue", qualified=False)
    return {n: _stats.stats_of(results[i * per : (i + 1) * per]) for i, n in enumerate(names)}
