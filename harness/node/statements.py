"""Parsing rqlite's JSON request bodies and query parameters.

A body is a JSON array; each element is a SQL string, or ``[sql, *positional]``, or
``[sql, {named}]`` (rqlite's ``http/request_parser.go``). Errors carry rqlite's messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

Param = int | float | str | None


class RequestError(ValueError):
    """A request rqlite answers with HTTP 400; ``str()`` is rqlite's message."""


@dataclass
class Statement:
    """One SQL statement with its parameters, as it travels through the Raft log."""

    sql: str
    positional: list[Param] = field(default_factory=list)
    named: dict[str, Param] = field(default_factory=dict)
    returning: bool = False  # has RETURNING: a write whose rows are returned (ForceQuery)
    explain: bool = False  # rqlite's parser read an EXPLAIN (SqlExplain, v9+)

    def to_wire(self) -> tuple:
        return (self.sql, self.positional, self.named, self.returning, self.explain)

    @classmethod
    def from_wire(cls, wire: tuple) -> Statement:
        sql, positional, named, returning = wire[:4]
        explain = bool(wire[4]) if len(wire) > 4 else False  # older journals: 4 fields
        return cls(sql, list(positional), dict(named), bool(returning), explain)

    def bindings(self) -> tuple | dict | None:
        if self.named:
            return self.named
        if self.positional:
            return tuple(self.positional)
        return None


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_UNIT = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # Go takes both micro signs
    "\u03bcs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_duration(text: str) -> float:
    """A Go duration string (``"1.5s"``, ``"100ms"``, ``"1m30s"``) in seconds."""
    s = text.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return 0.0
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(f"invalid duration {text!r}")
    return sign * total


LEVELS = ("none", "weak", "strong", "linearizable", "auto")
_INT64 = 1 << 63
_ATOI = re.compile(r"[+-]?[0-9]+")
_ESCAPE = re.compile(r"%(?![0-9a-fA-F]{2})")


def _go_unescape(text: str) -> str:
    """Go's ``url.QueryUnescape``: ``+`` is a space, ``%XX`` a byte; a bad escape raises
    :class:`RequestError` with Go's message. Bytes that are not UTF-8 become U+FFFD (Go
    keeps them: see docs/embedded-node.md)."""
    bad = _ESCAPE.search(text)
    if bad is not None:
        raise RequestError(f'invalid URL escape "{text[bad.start() : bad.start() + 3]}"')
    raw = unquote_to_bytes(text.replace("+", " "))
    return raw.decode("utf-8", errors="replace")


def go_parse_query(query: str) -> dict[str, str]:
    """A URL query string as Go's ``url.ParseQuery`` reads it, first value per key (rqlite's
    ``NewQueryParams``). Its first error (a ``;`` in a pair, a bad ``%`` escape) raises
    :class:`RequestError` with Go's message, as rqlite answers it (400)."""
    out: dict[str, str] = {}
    error: str | None = None
    for pair in query.split("&"):
        if ";" in pair:
            error = error or "invalid semicolon separator in query"
            continue
        if not pair:
            continue
        key, _, value = pair.partition("=")
        try:
            key, value = _go_unescape(key), _go_unescape(value)
        except RequestError as exc:
            error = error or str(exc)
            continue
        out.setdefault(key, value)
    if error is not None:
        raise RequestError(error)
    return out


def _go_atoi(text: str) -> bool:
    """Whether Go's ``strconv.Atoi`` takes ``text`` (decimal, a sign, within int64)."""
    return _ATOI.fullmatch(text) is not None and -_INT64 <= int(text) < _INT64


@dataclass
class QueryParams:
    """The URL query parameters rqlite understands (flags count when present)."""

    raw: dict[str, str]

    @classmethod
    def parse(cls, query: str) -> QueryParams:
        """rqlite's ``NewQueryParams`` (``http/query_params.go``, the same in v8.36.18,
        v9.4.5 and v10.2.7): every error is its 400."""
        raw = go_parse_query(query)
        if "freshness_strict" in raw and "freshness" not in raw:
            raise RequestError("freshness_strict requires freshness")
        for key in ("timeout", "freshness", "db_timeout", "linearizable_timeout"):
            if key in raw:
                try:
                    parse_duration(raw[key])
                except ValueError:
                    raise RequestError(f"{key} is not a valid duration") from None
        for key in ("retries", "trailing_logs"):
            if key in raw and not _go_atoi(raw[key]):
                raise RequestError(f"{key} is not a valid integer")
        if "q" in raw and raw["q"] == "":
            raise RequestError("query parameter not set")
        return cls(raw)

    def flag(self, name: str) -> bool:
        return name in self.raw

    def duration(self, name: str, default: float) -> float:
        return parse_duration(self.raw[name]) if name in self.raw else default

    @property
    def level(self) -> str:
        level = self.raw.get("level", "weak").lower()
        return level if level in LEVELS else "weak"
