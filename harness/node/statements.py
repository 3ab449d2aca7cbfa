"""Parsing rqlite's JSON request bodies and query parameters.

A body is a JSON array; each element is a SQL string, or ``[sql, *positional]``, or
``[sql, {named}]`` (rqlite's ``http/request_parser.go``). Errors carry rqlite's messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qs

Param = int | float | str | None


class RequestError(ValueError):
    """A request rqlite answers with HTTP 400; ``str()`` is rqlite's message."""


@dataclass
class Statement:
    """One SQL statement with its parameters, as it travels through the Raft log."""

    sql: str
    positional: list[Param] = field(default_factory=list)
    named: dict[str, Param] = field(default_factory=dict)
    returning: bool = False  # has RETURNING: a write whose rows are returned

    def to_wire(self) -> tuple:
        return (self.sql, self.positional, self.named, self.returning)

    @classmethod
    def from_wire(cls, wire: tuple) -> Statement:
        sql, positional, named, returning = wire
        return cls(sql, list(positional), dict(named), bool(returning))

    def bindings(self) -> tuple | dict | None:
        if self.named:
            return self.named
        if self.positional:
            return tuple(self.positional)
        return None


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


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


@dataclass
class QueryParams:
    """The URL query parameters rqlite understands (flags count when present)."""

    raw: dict[str, str]

    @classmethod
    def parse(cls, query: str) -> QueryParams:
        raw = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
        if "freshness_strict" in raw and "freshness" not in raw:
            raise RequestError("freshness_strict requires freshness")
        for key in ("timeout", "freshness", "db_timeout", "linearizable_timeout"):
            if key in raw:
                try:
                    parse_duration(raw[key])
                except ValueError:
                    raise RequestError(f"{key} is not a valid duration") from None
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
