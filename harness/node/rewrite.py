"""rqlite's rewriting of non-deterministic SQL, so every replica applies the same values.

Follows rqlite's ``command/sql`` processor (v8.33+): on the node that receives a request,

- ``date``/``time``/``datetime``/``julianday``/``unixepoch`` whose first argument is
  ``'now'`` (or the bare identifier ``now``), ``strftime`` whose second argument is, and
  ``timediff`` for either of its first two arguments: the ``now`` becomes the current
  Julian day as a number literal printed with six decimals (``%f``, as rqlite does,
  so the value has a resolution of 86.4 ms);
- ``random()`` becomes a random non-negative 63-bit integer literal, except inside an
  ``ORDER BY`` term;
- ``randomblob(N)`` with a numeric literal ``N`` becomes a blob literal of ``max(N, 1)``
  random bytes, except inside an ``ORDER BY`` term.

Like rqlite, zero-argument forms (``date()``, ``CURRENT_TIMESTAMP``) are not rewritten.
rqlite rewrites a re-rendered parse tree; this module rewrites tokens in place, so
text that is not rewritten (comments, spacing, literals) is left byte for byte.

``bind=True`` (what the node uses) puts the values of a write in bound parameters
instead of the text, where that is observably the same: an INSERT, UPDATE, DELETE or
REPLACE without RETURNING (no result columns, whose names would show the text), whose
own parameters are plain positional ``?`` matched by the values given (they become
``?1``..``?k``; the rewritten values follow as ``?k+1``...), and no ``randomblob`` (a
blob does not travel in a JSON body). Every such statement keeps one text, so SQLite's
prepared-statement cache serves it on every replica instead of compiling a new text per
request: a claim's two timed UPDATEs cost ~55 µs less per node that way.
"""

from __future__ import annotations

import functools
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
  | (?P<blob>[xX]'[^']*'?)
  | (?P<str>'(?:[^']|'')*'?)
  | (?P<qid>"(?:[^"]|"")*"?|`(?:[^`]|``)*`?|\[[^\]]*\]?)
  | (?P<num>0[xX][0-9a-fA-F]+|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<param>\?\d*|[:@$][A-Za-z0-9_]+)
  | (?P<id>[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]*)
  | (?P<op>.)
    """,
    re.VERBOSE | re.DOTALL,
)

_NOW_ARG0 = frozenset({"date", "time", "datetime", "julianday", "unixepoch"})


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


@dataclass(frozen=True)
class Rewritten:
    """The outcome of :func:`rewrite`; ``bound``: values for placeholders added to ``sql``
    (after the statement's own positional parameters)."""

    sql: str
    modified: bool
    returning: bool  # the statement has a RETURNING clause (a write that returns rows)
    bound: tuple[float | int, ...] = ()


def tokenize(sql: str) -> list[Token]:
    """Split SQL into tokens; concatenating their text gives ``sql`` back."""
    return [Token(m.lastgroup or "op", m.group()) for m in _TOKEN.finditer(sql)]


def julian_day(epoch_seconds: float) -> float:
    """The Julian day number of a Unix time (UTC)."""
    return epoch_seconds / 86400.0 + 2440587.5


def _is_now(tokens: list[Token], arg: list[int]) -> bool:
    if len(arg) != 1:
        return False
    tok = tokens[arg[0]]
    if tok.kind == "str":
        return tok.text[1:-1].lower() == "now"
    if tok.kind == "id":
        return tok.text.lower() == "now"
    if tok.kind == "qid" and tok.text.startswith('"'):
        return tok.text[1:-1].lower() == "now"
    return False


def _call_args(tokens: list[Token], sig: list[int], open_pos: int) -> tuple[list[list[int]], int]:
    """Arguments (lists of token indexes) of the call whose '(' is ``sig[open_pos]``,
    and the position in ``sig`` of its closing ')' (or the last position if unclosed)."""
    args: list[list[int]] = []
    current: list[int] = []
    depth = 0
    pos = open_pos + 1
    while pos < len(sig):
        text = tokens[sig[pos]].text
        if text == "(":
            depth += 1
        elif text == ")":
            if depth == 0:
                break
            depth -= 1
        elif text == "," and depth == 0:
            args.append(current)
            current = []
            pos += 1
            continue
        current.append(sig[pos])
        pos += 1
    if current or args:
        args.append(current)
    return args, min(pos, len(sig) - 1)


#: slots of a plan: where a rewritten value goes
_JD, _RANDOM = "jd", "random"
#: statements longer than this are analysed on every call instead of cached
_CACHE_MAX_SQL = 8192


@dataclass(frozen=True)
class _Plan:
    """What rewriting does to one SQL text: text pieces and the slots between them.

    ``parts`` holds ``str`` pieces and ``tuple`` slots: ``("jd",)`` (the Julian day of
    now), ``("random",)`` (a random 63-bit integer) or ``("blob", n)`` (n random bytes).
    """

    parts: tuple[str | tuple, ...]
    modified: bool
    returning: bool
    #: the text with placeholders for the slots, when values may be bound (module doc)
    bound_sql: str | None = None
    #: how many plain ``?`` the statement has (its own parameters)
    plain_params: int = 0


def rewrite(
    sql: str,
    *,
    rewrite_random: bool = True,
    rewrite_time: bool = True,
    now: Callable[[], float] | None = None,
    bind: bool = False,
    positional: int = 0,
) -> Rewritten:
    """Rewrite one statement's SQL text as rqlite does; ``now`` gives epoch seconds.

    ``bind``: put the values in bound parameters where that is observably the same (see
    the module); ``positional`` is how many positional parameters the statement came with
    (pass ``-1`` for named ones). The analysis of a text is cached (clients send the same
    statements over and over); the values that fill its slots are new on every call.
    """
    if len(sql) <= _CACHE_MAX_SQL:
        plan = _cached_plan(sql, rewrite_random, rewrite_time)
    else:
        plan = _plan(sql, rewrite_random, rewrite_time)
    if len(plan.parts) == 1 and isinstance(plan.parts[0], str):
        return Rewritten(sql, plan.modified, plan.returning)
    jd: list[float] = []

    def now_jd() -> float:
        if not jd:  # one value for every 'now' of the statement, printed as rqlite does
            jd.append(float(f"{julian_day((now or time.time)()):f}"))
        return jd[0]

    if bind and plan.bound_sql is not None and positional == plan.plain_params:
        slots = (part for part in plan.parts if not isinstance(part, str))
        values = tuple(now_jd() if slot[0] == _JD else secrets.randbits(63) for slot in slots)
        return Rewritten(plan.bound_sql, plan.modified, plan.returning, values)
    out: list[str] = []
    for part in plan.parts:
        if isinstance(part, str):
            out.append(part)
        elif part[0] == _JD:
            out.append(f"{now_jd():f}")
        elif part[0] == _RANDOM:
            out.append(str(secrets.randbits(63)))
        else:
            out.append(f"X'{secrets.token_hex(part[1]).upper()}'")
    return Rewritten("".join(out), plan.modified, plan.returning)


@functools.lru_cache(maxsize=4096)
def _cached_plan(sql: str, rewrite_random: bool, rewrite_time: bool) -> _Plan:
    return _plan(sql, rewrite_random, rewrite_time)


def _plan(sql: str, rewrite_random: bool, rewrite_time: bool) -> _Plan:
    """Find what :func:`rewrite` replaces in ``sql`` (rqlite's rules, see the module)."""
    tokens = tokenize(sql)
    sig = [i for i, t in enumerate(tokens) if t.kind not in ("ws", "comment")]
    returning = any(tokens[i].kind == "id" and tokens[i].text.lower() == "returning" for i in sig)
    if not (rewrite_random or rewrite_time):
        return _Plan((sql,), False, returning)

    replace: dict[int, tuple] = {}  # token index -> slot
    drop: set[int] = set()  # token indexes folded into a replacement
    modified = False
    depth = 0
    order_depths: list[int] = []

    for pos, idx in enumerate(sig):
        tok = tokens[idx]
        if tok.text == "(":
            depth += 1
            continue
        if tok.text == ")":
            depth -= 1
            while order_depths and order_depths[-1] > depth:
                order_depths.pop()
            continue
        if tok.text == ";":
            order_depths.clear()
            continue
        if tok.kind != "id":
            continue
        word = tok.text.lower()
        nxt = tokens[sig[pos + 1]] if pos + 1 < len(sig) else None
        if word == "order" and nxt is not None and nxt.text.lower() == "by":
            order_depths.append(depth)
            continue
        if word == "limit" and order_depths and order_depths[-1] == depth:
            order_depths.pop()
            continue
        if nxt is None or nxt.text != "(":
            continue
        in_order_by = bool(order_depths) and order_depths[-1] == depth
        args, close_pos = _call_args(tokens, sig, pos + 1)
        if rewrite_time and word in _NOW_ARG0 and args:
            if _is_now(tokens, args[0]):
                replace[args[0][0]] = (_JD,)
            modified = True
        elif rewrite_time and word == "strftime" and len(args) > 1:
            if _is_now(tokens, args[1]):
                replace[args[1][0]] = (_JD,)
            modified = True
        elif rewrite_time and word == "timediff" and len(args) > 1:
            for arg in args[:2]:
                if _is_now(tokens, arg):
                    replace[arg[0]] = (_JD,)
            modified = True
        elif rewrite_random and not in_order_by and word == "random":
            replace[idx] = (_RANDOM,)
            drop.update(range(idx + 1, sig[close_pos] + 1))
            modified = True
        elif rewrite_random and not in_order_by and word == "randomblob" and len(args) == 1:
            arg = args[0]
            if len(arg) == 1 and tokens[arg[0]].kind == "num" and tokens[arg[0]].text.isdigit():
                replace[idx] = ("blob", max(int(tokens[arg[0]].text), 1))
                drop.update(range(idx + 1, sig[close_pos] + 1))
                modified = True
    if not replace:
        return _Plan((sql,), modified, returning)
    parts: list[str | tuple] = []
    for i, t in enumerate(tokens):
        if i in drop:
            continue
        part = replace.get(i, t.text)
        if isinstance(part, str) and parts and isinstance(parts[-1], str):
            parts[-1] += part
        else:
            parts.append(part)
    bound_sql, plain = _bound_form(tokens, sig, replace, drop, returning)
    return _Plan(tuple(parts), modified, returning, bound_sql, plain)


_WRITES = frozenset({"insert", "update", "delete", "replace"})


def _bound_form(
    tokens: list[Token], sig: list[int], replace: dict[int, tuple], drop: set[int], returning: bool
) -> tuple[str | None, int]:
    """The text with numbered placeholders for the slots, and the number of plain ``?``;
    (None, 0) when binding the values would not be observably the same (module doc)."""
    first = tokens[sig[0]].text.lower() if sig else ""
    if returning or first not in _WRITES or any(s[0] == "blob" for s in replace.values()):
        return None, 0
    if any(tokens[i].text == ";" for i in sig[:-1]):
        return None, 0  # several statements in one text: parameters number per statement
    params = [i for i in sig if tokens[i].kind == "param"]
    if any(tokens[i].text != "?" for i in params):
        return None, 0  # numbered or named parameters: keep the literal form
    number = {i: n for n, i in enumerate(params, start=1)}
    next_slot = len(params) + 1
    out: list[str] = []
    for i, t in enumerate(tokens):
        if i in drop:
            continue
        if i in replace:
            out.append(f"?{next_slot}")
            next_slot += 1
        elif i in number:
            out.append(f"?{number[i]}")
        else:
            out.append(t.text)
    return "".join(out), len(params)
