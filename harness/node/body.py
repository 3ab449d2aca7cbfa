"""Request bodies as rqlite v8.36 parses them (``http/request_parser.go``, checked by sending
the same bodies to v8.36.18).

- A JSON array whose elements are each a SQL string or ``[sql, args...]`` (both forms may
  mix, since 8.24.8). An argument that is an object gives named arguments.
- 400 messages: not JSON at all (or an empty body) -> ``invalid JSON body``; JSON that is
  not an array, an element that is neither a string nor an array, an empty ``[]`` element
  or one whose first item is not a string -> ``invalid request``; ``[]`` -> ``no
  statements``. Text after the array is ignored (rqlite reads one JSON value).
- Numbers: an integer that fits int64 binds as INTEGER, any other number as REAL; one too
  large even for a float -> ``invalid number 1e400``; ``NaN``/``Infinity`` are not JSON.
- An array argument is a BLOB of byte values 0..255; anything else in it ->
  ``unsupported type X`` with X the number as written or Go's name of its type.
- ``Content-Type: text/plain`` on ``/db/execute`` and ``/db/query``: the body is one SQL
  string (which may hold several statements).
- Text as Go's ``encoding/json`` decodes it: bytes that are not UTF-8 inside a JSON string
  become U+FFFD, one per byte (outside a string they are not JSON), and a ``\\u`` escape
  of a UTF-16 surrogate that is not half of a pair becomes U+FFFD too (Python's ``json``
  would keep it, and SQLite could not take it). A ``text/plain`` body reaches rqlite's
  SQLite as raw bytes; here its bad bytes become U+FFFD.
- A string argument shaped like a blob literal binds as a BLOB of its bytes (rqlite
  >= 8.31: ``http/request_parser.go``, ``case string``, through ``ParseHex`` in
  ``db/state.go``): after trimming what Go's ``strings.TrimSpace`` trims, ``x'`` or ``X'``,
  an even number of hex digits (none is an empty BLOB), ``'``. Any other string binds as
  TEXT. :func:`blob_literal` decides.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any, NoReturn

from .sqlexec import NAMED_HERE
from .statements import RequestError, Statement

INVALID_JSON = "invalid JSON body"
INVALID_REQUEST = "invalid request"
NO_STATEMENTS = "no statements"
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_INF = float("inf")
_WS = re.compile(r"[ \t\r\n]*")
#: what Go's ``unicode.IsSpace`` calls space (``strings.TrimSpace`` trims these): the
#: Latin-1 ones and the other code points of Unicode's White_Space property
GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)
_HEX_DIGITS = re.compile(r"(?:[0-9a-fA-F]{2})*")
#: a ``\\u`` escape of a surrogate somewhere in the body (a cheap test before a walk)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_GO_REPLACE = "rqueue-go-utf8-replace"


def _go_replace(exc: UnicodeError) -> tuple[str, int]:
    """Go's decoding of bytes that are not UTF-8: one U+FFFD per byte."""
    assert isinstance(exc, UnicodeDecodeError)
    return "\ufffd" * (exc.end - exc.start), exc.end


codecs.register_error(_GO_REPLACE, _go_replace)


class _Num(str):
    """A JSON number as written (rqlite decodes numbers with ``UseNumber``)."""


class _NeedRaw(Exception):
    """An error whose message quotes a number as written: parse again keeping the text."""


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


#: the fast decoder (C scanner, numbers as int/float) and the one that keeps numbers as text
_FAST = json.JSONDecoder(parse_constant=_reject_constant)
_RAW = json.JSONDecoder(parse_int=_Num, parse_float=_Num, parse_constant=_reject_constant)


def is_text_plain(content_type: str | None) -> bool:
    """rqlite takes a body as raw SQL when its type starts with ``text/plain`` (exactly)."""
    return content_type is not None and content_type.startswith("text/plain")


def blob_literal(value: str) -> bytes | None:
    """The bytes rqlite >= 8.31 binds for the string argument ``value``, or None when it
    binds it as TEXT: ``x'4142'`` (either case of ``x``, surrounded by any space Go's
    ``strings.TrimSpace`` trims, an even number of hex digits of either case) is
    ``b"AB"``; ``x''`` is an empty BLOB."""
    if "'" not in value:
        return None
    t = value.strip(GO_SPACE)
    if len(t) < 3 or t[0] not in "xX" or t[1] != "'" or t[-1] != "'":
        return None
    digits = t[2:-1]
    if not _HEX_DIGITS.fullmatch(digits):
        return None
    return bytes.fromhex(digits)


def parse(
    body: bytes,
    content_type: str | None = None,
    plain_ok: bool = False,
    *,
    hex_blobs: bool = True,
) -> list[Statement]:
    """The statements of a request body; raises :class:`RequestError` with rqlite's text.
    ``plain_ok``: the endpoint takes a ``text/plain`` body as one SQL string;
    ``hex_blobs``: string arguments shaped like blob literals bind as BLOBs (rqlite >=
    8.31, :func:`blob_literal`)."""
    if plain_ok and is_text_plain(content_type):
        return [Statement(body.decode("utf-8", errors="replace"))]
    text = body.decode("utf-8", errors=_GO_REPLACE)  # U+FFFD is not JSON outside a string
    start = _WS.match(text).end()  # type: ignore[union-attr]
    if start == len(text):
        raise RequestError(INVALID_JSON)
    if text[start] == "{":
        raise RequestError(INVALID_REQUEST)
    lone = _SURROGATE_ESCAPE.search(text) is not None
    try:
        return _statements(_go_text(_decode(_FAST, text, start), lone), hex_blobs)
    except _NeedRaw:
        return _statements(_go_text(_decode(_RAW, text, start), lone), hex_blobs)


def _go_text(data: Any, lone: bool) -> Any:
    """``data`` with every unpaired surrogate (``lone``: the body escapes one) as U+FFFD."""
    if not lone:
        return data
    if type(data) is str:  # not a number kept as written (_Num)
        return _SURROGATE.sub("\ufffd", data)
    if isinstance(data, list):
        return [_go_text(v, lone) for v in data]
    if isinstance(data, dict):
        return {_go_text(k, lone): _go_text(v, lone) for k, v in data.items()}
    return data


def _decode(decoder: json.JSONDecoder, text: str, start: int) -> list:
    try:
        data, _ = decoder.raw_decode(text, start)
    except ValueError:
        _raise_first_error(text, start)
    if not isinstance(data, list):
        raise RequestError(INVALID_REQUEST)
    if not data:
        raise RequestError(NO_STATEMENTS)
    return data


def _raise_first_error(text: str, start: int) -> NoReturn:
    """For a body that is not valid JSON: the error rqlite meets first, reading element by
    element (a mistyped element before the broken spot is ``invalid request``)."""
    if text[start] != "[":
        try:
            _RAW.raw_decode(text, start)
        except ValueError:
            raise RequestError(INVALID_JSON) from None
        raise RequestError(INVALID_REQUEST)
    pos = start + 1
    while True:
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if text.startswith("{", pos):
            raise RequestError(INVALID_REQUEST)
        try:
            item, pos = _RAW.raw_decode(text, pos)
        except ValueError:
            raise RequestError(INVALID_JSON) from None
        _statement(item, hex_blobs=False)  # raises for a mistyped element or argument
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if not text.startswith(",", pos):
            raise RequestError(INVALID_JSON)
        pos += 1


def _statements(data: list, hex_blobs: bool) -> list[Statement]:
    return [_statement(item, hex_blobs) for item in data]


def _statement(item: Any, hex_blobs: bool) -> Statement:
    if type(item) is str:
        return Statement(item)
    if not isinstance(item, list):
        raise RequestError(INVALID_REQUEST)
    if not item or type(item[0]) is not str:
        raise RequestError(INVALID_REQUEST)
    stmt = Statement(item[0])
    named_at = -1  # how many positional arguments came before the (first) object
    for arg in item[1:]:
        if isinstance(arg, dict):
            if named_at < 0:
                named_at = len(stmt.positional)
            for key, value in arg.items():
                stmt.named[key] = _param(value, hex_blobs)
        else:
            stmt.positional.append(_param(arg, hex_blobs))
    if 0 <= named_at < len(stmt.positional):  # positional ones follow: keep the order
        stmt.positional.insert(named_at, NAMED_HERE)
    return stmt


def _param(value: Any, hex_blobs: bool) -> Any:
    t = type(value)
    if t is str:
        if hex_blobs:
            blob = blob_literal(value)
            if blob is not None:
                return blob
        return value
    if value is None:
        return value
    if t is int:
        return value if _INT64_MIN <= value <= _INT64_MAX else _float(value)
    if t is float:
        if value in (_INF, -_INF):
            raise _NeedRaw()
        return value
    if t is bool:
        return int(value)  # JSON true/false bind as 1/0, as rqlite's driver does
    if t is _Num:
        return _number(value)
    if t is list:
        return bytes(_byte(v) for v in value)
    raise RequestError(f"unsupported type {_go_type(value)}")


def _float(n: int) -> float:
    try:
        return float(n)
    except OverflowError:
        raise _NeedRaw() from None


def _number(raw: str) -> int | float:
    try:
        n = int(raw)
    except ValueError:
        pass
    else:
        if _INT64_MIN <= n <= _INT64_MAX:
            return n
    f = float(raw)
    if f in (_INF, -_INF):
        raise RequestError(f"invalid number {raw}")
    return f


def _byte(v: Any) -> int:
    t = type(v)
    if t is int and 0 <= v <= 255:
        return v
    if t is int or t is float:
        raise _NeedRaw()  # the message quotes the number as written
    if t is _Num:
        try:
            n = int(v)
        except ValueError:
            n = -1
        if 0 <= n <= 255:
            return n
        raise RequestError(f"unsupported type {v}")
    raise RequestError(f"unsupported type {_go_type(v)}")


def _go_type(v: Any) -> str:
    """Go's ``%T`` of a decoded JSON value."""
    if isinstance(v, bool):
        return "bool"
    if v is None:
        return "<nil>"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "[]interface {}"
    return "map[string]interface {}"
