"""SQLite values as rqlite v8 renders them in JSON (facts from its SQLite driver and encoder).

- Columns declared ``DATE``, ``DATETIME`` or ``TIMESTAMP`` (exactly, any case): an INTEGER
  is Unix seconds (milliseconds when its magnitude exceeds 1e12), a TEXT is parsed with
  the driver's nine layouts (one trailing ``Z`` dropped first), and both are written as
  RFC 3339 with nanoseconds and trailing zeros trimmed; unparsable text becomes the zero
  time ``0001-01-01T00:00:00Z``; a year outside 0..9999 fails the statement. REAL, NULL
  and BLOB values pass unchanged.
- A ``BOOLEAN`` column's INTEGER is ``true`` when above zero.
- A BLOB in a text-typed or untyped column is text (invalid UTF-8 replaced by U+FFFD);
  elsewhere it stays ``bytes`` until JSON encoding (base64, or an array of byte values
  with ``?blob_array``: :func:`json_default`).

- A REAL that is a whole number below 1e21 is written as Go writes it: without a fraction
  (``1``, not ``1.0``), so JSON readers see the integer rqlite's answer gives them.

Each column gets one converter, chosen once per statement from its declared type.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import apsw

Converter = Callable[[Any], Any]

_TIME_TYPES = ("date", "datetime", "timestamp")
_TEXT_PREFIXES = ("varchar", "varying character", "nchar", "native character", "nvarchar", "clob")
ZERO_TIME = "0001-01-01T00:00:00Z"
_TIME_TEXT = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?(?:([+-])(\d{2}):(\d{2}))?)?)?"
)
_INT64 = 1 << 64
_INF = float("inf")
_EXACT = float(1 << 53)


class UnrenderableValue(apsw.Error):
    """A value rqlite cannot render: the statement's result is this error."""


def is_text_type(decl: str) -> bool:
    """rqlite's text affinity test on a lower-cased declared type (untyped counts)."""
    return decl in ("text", "json", "") or decl.startswith(_TEXT_PREFIXES)


def converter(decl: str) -> Converter:
    """The converter for a column of lower-cased declared type ``decl``."""
    if decl in _TIME_TYPES:
        return _time_value
    if decl == "boolean":
        return _bool_value
    if is_text_type(decl):
        return _text_value
    return _number_value


def go_float(v: float) -> float | int:
    """A REAL as Go's JSON encoder writes it, read back: an integral value below 1e21 is
    written without a fraction (``1``, ``9223372036854776000``: Go's shortest digits),
    which a JSON reader takes for an integer."""
    if v.is_integer() and -1e21 < v < 1e21:
        return int(v) if -_EXACT <= v <= _EXACT else int(Decimal(repr(v)))
    return v


def _number_value(v: Any) -> Any:
    return go_float(v) if type(v) is float else v


def _text_value(v: Any) -> Any:
    t = type(v)
    if t is bytes:
        return v.decode("utf-8", errors="replace")
    if t is float:
        return go_float(v)
    return v


def _bool_value(v: Any) -> Any:
    t = type(v)
    if t is int:
        return v > 0
    if t is float:
        return go_float(v)
    return v


def _time_value(v: Any) -> Any:
    t = type(v)
    if t is int:
        return _from_unix(v)
    if t is str:
        return _from_text(v)
    if t is float:
        return go_float(v)
    return v


# -- calendar arithmetic (proleptic Gregorian, any year) ------------------------------------
def _civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a count of days since 1970-01-01."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d


def _days_in(month: int, year: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _format(y: int, mo: int, d: int, h: int, mi: int, s: int, nanos: int, offset: int) -> str:
    if not 0 <= y <= 9999:
        raise UnrenderableValue("Time.MarshalText: year outside of range [0,9999]")
    frac = f".{nanos:09d}".rstrip("0") if nanos else ""
    if offset == 0:
        zone = "Z"
    else:
        sign = "-" if offset < 0 else "+"
        zone = f"{sign}{abs(offset) // 3600:02d}:{abs(offset) // 60 % 60:02d}"
    return f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}{frac}{zone}"


def _from_unix(v: int) -> str:
    if v > 10**12 or v < -(10**12):  # milliseconds; Go multiplies in int64 (and wraps)
        ns = (v * 1_000_000 + (1 << 63)) % _INT64 - (1 << 63)
        secs, nanos = divmod(ns, 1_000_000_000)
    else:
        secs, nanos = v, 0
    days, rem = divmod(secs, 86400)
    y, mo, d = _civil(days)
    return _format(y, mo, d, rem // 3600, rem // 60 % 60, rem % 60, nanos, 0)


def _from_text(text: str) -> str:
    m = _TIME_TEXT.fullmatch(text[:-1] if text.endswith("Z") else text)
    if m is None:
        return ZERO_TIME
    y, mo, d = int(m[1]), int(m[2]), int(m[3])
    h = int(m[4] or 0)
    mi = int(m[5] or 0)
    s = int(m[6] or 0)
    nanos = int((m[7] or "0")[:9].ljust(9, "0"))
    offset = 0
    if m[8]:
        oh, om = int(m[9]), int(m[10])
        if oh > 24 or om > 60:
            return ZERO_TIME
        offset = (oh * 3600 + om * 60) * (-1 if m[8] == "-" else 1)
    if not (1 <= mo <= 12 and 1 <= d <= _days_in(mo, y) and h < 24 and mi < 60 and s < 60):
        return ZERO_TIME
    return _format(y, mo, d, h, mi, s, nanos, offset)


# -- JSON -----------------------------------------------------------------------------------
def json_default(blob_array: bool) -> Callable[[Any], Any]:
    """``json.dumps``'s ``default``: BLOBs as base64 (Go's []byte), or as arrays of bytes."""

    def default(obj: Any) -> Any:
        if isinstance(obj, bytes):
            return list(obj) if blob_array else base64.b64encode(obj).decode("ascii")
        raise TypeError(f"{type(obj).__name__} is not JSON serialisable")

    return default


def infinity_sign(obj: Any) -> str | None:
    """``"+Inf"``/``"-Inf"`` for the first infinite float found in ``obj``, else None."""
    if isinstance(obj, float):
        if obj in (_INF, -_INF):
            return "+Inf" if obj > 0 else "-Inf"
        return None
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list | tuple) else ()
    for item in items:
        found = infinity_sign(item)
        if found:
            return found
    return None


def rows_result(description: tuple, rows: list) -> dict[str, Any]:
    """A rows result (columns, lower-cased declared types, rendered values, and each
    column's table where SQLite knows it) from a cursor's description (apsw's
    ``description_full``, or ``(name, decltype)`` pairs) and its rows; untyped columns are
    named after the first row's values."""
    columns = [d[0] for d in description]
    types = [(d[1] or "").lower() for d in description]
    convs = [converter(t) for t in types]
    values = [[c(v) for v, c in zip(row, convs, strict=False)] for row in rows]
    if rows and "" in types:
        first = rows[0]  # as SQLite gave it: 1.0 is a REAL even though it is written 1
        types = [t or _value_type(first[i]) for i, t in enumerate(types)]
    out = {"kind": "rows", "columns": columns, "types": types, "values": values}
    if description and len(description[0]) > 3:
        out["tables"] = [d[3] or "" for d in description]
    return out


def _value_type(v: Any) -> str:
    """rqlite's type for an expression column, named after a value of the first row."""
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "real"
    if isinstance(v, str | bytes):  # a BLOB in an untyped column reads as text
        return "text"
    return ""
