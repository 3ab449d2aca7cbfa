"""rqlite's rewriting of time functions and random(), decided exactly as rqlite does.

Each function takes the rqlite version to follow (``version``: ``"10.2.7"``, the default,
``"9.4.5"`` or ``"8.36.18"``, see :mod:`harness.node.versions`): the versions differ in
what their parser accepts and how they print a few expressions, not in the rules below.

On the node that receives a request, rqlite parses each statement with its own SQL parser
(modelled in :mod:`.parser`), walks the tree and rewrites

- ``date``/``time``/``datetime``/``julianday``/``unixepoch`` with at least one argument,
  whose first argument is ``'now'`` (any case) or an identifier ``now`` (quoted or not);
  ``strftime`` with at least two arguments, its second; ``timediff`` with at least two,
  either of its first two: that argument becomes the Julian day of the request's clock
  in the node's local time zone (not UTC: rqlite takes the calendar fields of Go's
  ``time.Now()``, local time), printed with six decimals;
- ``random(...)`` becomes a random 63-bit integer and ``randomblob(N)`` (``N`` an integer
  literal) a blob literal of ``max(N, 1)`` random bytes, except inside an ``ORDER BY``
  term.

A statement the parser rejects is left as written; so is every call the walk does not
reach (a scalar subquery used as a value, ``IN (SELECT ...)``, a ``WITH`` clause). When a
statement was rewritten (any of the calls above was seen, even with nothing replaced)
rqlite re-prints the whole tree: identifiers double-quoted, comments and anything after the
first statement dropped, ``RETURNING`` of UPDATE and DELETE dropped. A tree holding
``LIKE ... ESCAPE`` cannot be re-printed: rqlite answers HTTP 500 (:class:`RewriteError`).

What is left unrewritten is evaluated by every replica when it applies the log entry, with
its own clock (see ``Database``), and again when a restarted node replays its log.
"""

from __future__ import annotations

import functools
import math
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ..versions import RqliteVersion
from ..versions import get as get_version
from .parser import Parser
from .tree import Node, ParseError, PrintPanic

_NOW_ARG0 = frozenset({"date", "time", "datetime", "julianday", "unixepoch"})
#: statements longer than this are processed on every call instead of cached
_CACHE_MAX_SQL = 8192


class RewriteError(Exception):
    """rqlite's processor failed on a statement: it answers HTTP 500 with ``str(self)``
    (``SQL rewrite: ...``) and applies nothing of the request."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"SQL rewrite: panic during SQL processing: {detail}")


@dataclass(frozen=True)
class Plan:
    """What processing does to one SQL text, independent of the values filled in.

    ``parts`` holds text and slots: ``("jd",)`` (the Julian day of now), ``("random",)``
    (a random 63-bit integer) or ``("blob", n)`` (``n`` random bytes). ``returning`` is
    rqlite's ForceQuery: True/False when the parser accepted the statement (it saw a
    RETURNING clause or not), None when it did not (rqlite then leaves the flag alone).
    """

    parts: tuple[str | tuple, ...]
    parsed: bool
    modified: bool
    returning: bool | None
    error: str | None = None  # rqlite answers 500: SQL rewrite: ...
    #: the text with ``?N`` placeholders for the slots, where binding is observably the
    #: same (see :func:`_bound_form`), and how many plain ``?`` of its own it has
    bound_sql: str | None = None
    own_params: int = 0

    @property
    def unchanged(self) -> bool:
        return len(self.parts) == 1 and isinstance(self.parts[0], str)


def julian_day(t: datetime) -> float:
    """rqlite's Julian day of ``t``, same float arithmetic, from ``t``'s own calendar
    fields: an aware ``t`` in its own zone, as Go's ``Time`` carries its location (rqlite
    reads ``time.Now()``, local time: see :mod:`harness.node.localzone`); naive as is."""
    year, month = t.year, t.month
    if month <= 2:
        year -= 1
        month += 12
    a = int(year / 100)
    b = 2 - a + int(a / 4)
    frac = (t.hour + t.minute / 60 + (t.second + (t.microsecond * 1000) / 1e9) / 3600) / 24.0
    whole = int(365.25 * (year + 4716) // 1) + int(30.6001 * (month + 1) // 1)
    return float(whole) + t.day + b - 1524.5 + frac


def julian_day_epoch(epoch_seconds: float, utc_offset: Callable[[int], int] | None = None) -> float:
    """:func:`julian_day` of a Unix time in the zone whose offset at each Unix second is
    ``utc_offset(second)`` (None: UTC); the node's hot path: no datetime built."""
    sec = math.floor(epoch_seconds)
    ns = round((epoch_seconds - sec) * 1e9)
    if utc_offset is not None:
        sec += utc_offset(sec)
    return julian_day_ns(sec * 1_000_000_000 + ns)


def julian_day_ns(epoch_ns: int) -> float:
    """:func:`julian_day` of a Unix time in nanoseconds (of local time: UTC plus the
    offset): the whole days sum exactly, the fraction of the day is computed as rqlite
    computes it, so the float is the same."""
    sec, ns = divmod(epoch_ns, 1_000_000_000)
    days, of_day = divmod(sec, 86400)
    hour, rest = divmod(of_day, 3600)
    minute, second = divmod(rest, 60)
    frac = (hour + minute / 60 + (second + ns / 1e9) / 3600) / 24.0
    return float(days) + 2440587.5 + frac


class _Walker:
    """rqlite's rewriting visitor over the walkable part of a tree."""

    def __init__(self, rewrite_random: bool, rewrite_time: bool) -> None:
        self.rand, self.time = rewrite_random, rewrite_time
        self.ordered = False
        self.modified = False
        self.returning = False

    def walk(self, node: Node) -> None:
        if not node.walk:
            return
        if node.kind == "returning":
            self.returning = True
        elif node.kind == "order":
            self.ordered = True
        elif node.kind == "call":
            self.visit_call(node)
        for child in node.children():
            self.walk(child)
        if node.kind == "order":
            self.ordered = False

    def visit_call(self, n: Node) -> None:
        name, args = n.name.lower(), n.args
        if self.time and args and name in _NOW_ARG0:
            self.now_arg(args[0])
            self.modified = True
        elif self.time and len(args) > 1 and name == "strftime":
            self.now_arg(args[1])
            self.modified = True
        elif self.time and len(args) > 1 and name == "timediff":
            self.now_arg(args[0])
            self.now_arg(args[1])
            self.modified = True
        elif not self.ordered and self.rand and name == "random":
            _become(n, ("random",))
            self.modified = True
        elif not self.ordered and self.rand and name == "randomblob" and len(args) == 1:
            arg = args[0]
            if arg.kind == "num" and arg.value.isascii() and arg.value.isdigit():
                count = int(arg.value)
                if count < 2**63:
                    _become(n, ("blob", max(count, 1)))
                    self.modified = True

    @staticmethod
    def now_arg(arg: Node) -> None:
        if arg.kind in ("ident", "str") and arg.value.lower() == "now":
            _become(arg, ("jd",))


def _become(node: Node, slot: tuple) -> None:
    """Replace a node in place by a slot for a value filled in per request."""
    node.kind, node.parts, node.args, node.walk = "slot", [], [], False
    node.value = repr(slot)
    node.parts = [slot]  # type: ignore[list-item]


def _render(node: Node, out: list[str | tuple]) -> None:
    if node.kind == "hidden":
        return
    if node.kind == "escape":
        node.render()  # raises PrintPanic, as rqlite's printer panics
    for part in node.parts:
        if isinstance(part, Node):
            _render(part, out)
        elif isinstance(part, tuple):
            out.append(part)
        elif out and isinstance(out[-1], str):
            out[-1] += part
        else:
            out.append(part)


def plan(
    sql: str,
    rewrite_random: bool = True,
    rewrite_time: bool = True,
    version: str | RqliteVersion | None = None,
) -> Plan:
    """Decide what rqlite's processor (of ``version``, default the node's default) does with
    ``sql`` (cached for short texts)."""
    v = get_version(version)
    if len(sql) <= _CACHE_MAX_SQL:
        return _cached_plan(sql, rewrite_random, rewrite_time, v)
    return _plan(sql, rewrite_random, rewrite_time, v)


@functools.lru_cache(maxsize=4096)
def _cached_plan(sql: str, rewrite_random: bool, rewrite_time: bool, v: RqliteVersion) -> Plan:
    return _plan(sql, rewrite_random, rewrite_time, v)


def _plan(sql: str, rewrite_random: bool, rewrite_time: bool, v: RqliteVersion) -> Plan:
    if not rewrite_random and not rewrite_time and "returning" not in sql.lower():
        return Plan((sql,), False, False, None)
    try:
        tree = Parser(sql, v.dialect).statement()
    except ParseError:
        return Plan((sql,), False, False, None)
    walker = _Walker(rewrite_random, rewrite_time)
    walker.walk(tree)
    if not walker.modified:
        return Plan((sql,), True, False, walker.returning)
    out: list[str | tuple] = []
    try:
        _render(tree, out)
    except PrintPanic as exc:
        return Plan((sql,), True, True, walker.returning, error=str(exc))
    bound_sql, own = (None, 0) if walker.returning else _bound_form(tree.kind, out)
    return Plan(tuple(out), True, True, walker.returning, None, bound_sql, own)


_BINDABLE = frozenset({"insert", "update", "delete"})
_BIND_SCAN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|(?P<bind>\?\d*|[:@$]\w+)|\x00")


def _bound_form(kind: str, out: list[str | tuple]) -> tuple[str | None, int]:
    """The rendered statement with numbered placeholders for its slots, or None where
    binding the values instead of printing them could be told apart: anything but a plain
    INSERT/UPDATE/DELETE (result columns are named after the text), blob values, or
    parameters of its own other than plain ``?``. The node uses it so that each such
    statement keeps one text and SQLite's statement cache serves it (rqlite prints the
    literals into the text; the values bound are the same numbers)."""
    if kind not in _BINDABLE or any(isinstance(p, tuple) and p[0] == "blob" for p in out):
        return None, 0
    joined = "".join(p if isinstance(p, str) else "\x00" for p in out)
    binds = [m.group("bind") for m in _BIND_SCAN.finditer(joined) if m.group("bind")]
    if any(b != "?" for b in binds):
        return None, 0
    own = len(binds)
    counter = iter(range(1, own + 1))
    slots = iter(range(own + 1, own + 1 + joined.count("\x00")))

    def number(m: re.Match) -> str:
        if m.group() == "\x00":
            return f"?{next(slots)}"
        if m.group("bind"):
            return f"?{next(counter)}"
        return m.group()

    return _BIND_SCAN.sub(number, joined), own


def fill(
    p: Plan, jd: Callable[[], float], rand: Callable[[], int], blob: Callable[[int], bytes]
) -> str:
    """The statement text of a plan with values filled into its slots."""
    if p.error is not None:
        raise RewriteError(p.error)
    if p.unchanged:
        return p.parts[0]  # type: ignore[return-value]
    out: list[str] = []
    for part in p.parts:
        if isinstance(part, str):
            out.append(part)
        elif part[0] == "jd":
            out.append(f"{jd():f}")
        elif part[0] == "random":
            out.append(str(rand()))
        else:
            out.append(f"x'{blob(part[1]).hex().upper()}'")
    return "".join(out)


def rqlite_process(
    sql: str, now: datetime, rand: int, version: str | RqliteVersion | None = None
) -> str:
    """``sql`` as rqlite ``version`` (default: v10.2.7, see :mod:`harness.node.versions`)
    puts it in its Raft log, its clock reading ``now`` (in ``now``'s own zone, as rqlite
    reads its local time) and its random source giving
    ``rand`` (blob bytes are drawn from ``rand`` too, big-endian and repeated: rqlite takes
    them from a separate source). Raises :class:`RewriteError` where rqlite answers HTTP 500."""
    seed = (rand & (2**64 - 1)).to_bytes(8, "big")
    return fill(
        plan(sql, version=version),
        lambda: julian_day(now),
        lambda: rand,
        lambda n: (seed * (n // 8 + 1))[:n],
    )


_RETURNING = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|--[^\n]*|/\*.*?(?:\*/|\Z)"
    r"|(?P<kw>\breturning\b)",
    re.IGNORECASE | re.DOTALL,
)


def mentions_returning(sql: str) -> bool:
    """Whether a RETURNING keyword occurs outside literals, quoted names and comments
    (how the node decides for a statement rqlite's parser rejects)."""
    return any(m.group("kw") for m in _RETURNING.finditer(sql))


@dataclass(frozen=True)
class Processed:
    """A statement after processing on the receiving node: its text, values to bind after
    its own positional parameters, and rqlite's ForceQuery (None: not parsed)."""

    sql: str
    returning: bool | None
    bound: tuple[float | int, ...] = ()


def process(
    sql: str,
    *,
    rewrite_random: bool = True,
    rewrite_time: bool = True,
    now: Callable[[], float] | None = None,
    utc_offset: Callable[[int], int] | None = None,
    positional: int | None = None,
    version: str | RqliteVersion | None = None,
) -> Processed:
    """What the node does with one statement of a request: rqlite's processing (of
    ``version``) with the node's clock (``now``: epoch seconds, read once per statement)
    in its local zone (``utc_offset``: seconds east of UTC at a Unix second, None for UTC,
    see :mod:`harness.node.localzone`) and a random source. With ``positional`` (how many
    positional parameters came with it; None for named ones) the values may come back as
    ``bound`` values instead of literals, where that is observably the same. Raises
    :class:`RewriteError` where rqlite answers HTTP 500."""
    p = plan(sql, rewrite_random, rewrite_time, version)
    if p.unchanged and p.error is None:
        return Processed(sql, p.returning)
    clock = now or time.time
    jd: list[float] = []

    def now_jd() -> float:
        if not jd:
            jd.append(float(f"{julian_day_epoch(clock(), utc_offset):f}"))  # as rqlite prints
        return jd[0]

    if p.bound_sql is not None and positional == p.own_params:
        values = tuple(
            now_jd() if part[0] == "jd" else secrets.randbits(63)
            for part in p.parts
            if isinstance(part, tuple)
        )
        return Processed(p.bound_sql, p.returning, values)
    text = fill(p, now_jd, lambda: secrets.randbits(63), secrets.token_bytes)
    return Processed(text, p.returning)
