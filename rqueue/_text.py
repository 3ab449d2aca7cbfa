"""Text parameters that reach rqlite as text: the wire form of a statement.

Since v8.31 rqlite binds every JSON string parameter shaped like a SQL blob literal as a
BLOB of its bytes (``http/request_parser.go``, ``case string``, through ``ParseHex`` in
``db/state.go``): after Go's ``strings.TrimSpace``, ``x'`` or ``X'``, an even number of
hex digits (possibly none), ``'``. A group id ``x'41'`` would be stored as the byte
``A``: its claim hands back group ``"A"``, and every ack of that lease matches no row.

So every statement leaves rqueue through :func:`wire`: a ``str`` parameter that rqlite
*might* take for a blob literal (:func:`may_bind_as_blob`, a superset of rqlite's test)
goes as the JSON array of its UTF-8 bytes, which rqlite (>= 8.31) binds as a BLOB, and
its ``?`` becomes ``CAST(? AS TEXT)``: SQLite reads a BLOB cast to TEXT as text in the
database's encoding (UTF-8), byte for byte, and the cast has TEXT affinity, so
comparisons and index use are those of a text parameter. Every other parameter, and so
every statement of ordinary text, goes out unchanged.

Why an array and not the string re-sent as ``x'…'`` hex: a server older than 8.31 binds
every string as text, and would store the hex text silently; an array it refuses with
HTTP 400 (``unsupported type``). The core sends arrays only where the server binds blob
literals (``HttpCall.text_as_bytes``), so the refusal is a guard, not a path.

Lone surrogates (not Unicode, no UTF-8 form: Go's JSON decoder would store U+FFFD) are
refused by the argument checks (:func:`check`) before anything is sent.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

#: a placeholder, past string literals, quoted names and comments (rqueue writes only
#: ``?``; a numbered one, ``?NNN``, is refused by :func:`placeholders`)
_TOKENS = re.compile(
    r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|`[^`]*`|\[[^\]]*\]|--[^\n]*|/\*.*?\*/|(\?\d*)""",
    re.DOTALL,
)
_HEX = re.compile(r"[0-9A-Fa-f]*")
CAST = "CAST(? AS TEXT)"


def may_bind_as_blob(value: str) -> bool:
    """Whether rqlite (>= 8.31) might bind ``value`` as a BLOB: a superset of its test.

    Python's ``str.strip()`` trims every character Go's ``strings.TrimSpace`` trims (and
    four more, U+001C..U+001F); the number of hex digits may be odd. Ordinary text costs
    one search for a quote.
    """
    if "'" not in value:
        return False
    t = value.strip()
    return (
        len(t) >= 3
        and t[0] in "xX"
        and t[1] == "'"
        and t[-1] == "'"
        and bool(_HEX.fullmatch(t, 2, len(t) - 1))
    )


@functools.lru_cache(maxsize=1024)
def placeholders(sql: str) -> tuple[tuple[int, int], ...]:
    """Where each ``?`` of ``sql`` stands, as ``(start, end)``; cached (an operation sends
    the same few texts again and again)."""
    spans = []
    for m in _TOKENS.finditer(sql):
        if m.group(1) is None:
            continue
        if m.group(1) != "?":
            raise AssertionError(f"only plain ? placeholders are sent, found {m.group(1)}: {sql}")
        spans.append(m.span(1))
    return tuple(spans)


def wire(text: str, params: Sequence[Any], text_as_bytes: bool) -> list[Any]:
    """A statement (its SQL ``text`` and ``params``) as rqlite takes it, ``[sql,
    *params]``; with ``text_as_bytes`` a text parameter rqlite might take for a blob
    literal goes as its UTF-8 bytes, read back as text by ``CAST(? AS TEXT)``."""
    if text_as_bytes:
        for p in params:
            if isinstance(p, str) and "'" in p and may_bind_as_blob(p):
                return _as_bytes(text, params)
    return [text, *params]


def _as_bytes(text: str, given: Sequence[Any]) -> list[Any]:
    spans = placeholders(text)
    if len(spans) != len(given):
        raise AssertionError(f"{len(spans)} placeholders but {len(given)} params: {text}")
    sql, params, at = [], [], 0
    for (start, end), p in zip(spans, given, strict=True):
        if isinstance(p, str) and may_bind_as_blob(p):
            sql.append(text[at:start] + CAST)
            params.append(list(p.encode("utf-8")))
            at = end
        else:
            params.append(p)
    sql.append(text[at:])
    return ["".join(sql), *params]


def check(name: str, value: str) -> str:
    """``value`` if it is Unicode text that has a UTF-8 form; a :class:`ValueError` naming
    ``name`` for a lone surrogate (rqlite would store U+FFFD in its place)."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{name}: a lone surrogate {value[exc.start]!r} at index {exc.start} is not "
                "Unicode text (it has no UTF-8 form)"
            ) from None
    return value
