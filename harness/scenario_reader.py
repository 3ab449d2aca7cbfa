"""Typed access to one table of a scenario file, and the error every malformed file
raises (:class:`ScenarioError`, naming the file, the key and what was expected)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .errors import HarnessError


class ScenarioError(HarnessError, ValueError):
    """A scenario file (or a value given for it) is malformed; the message says where."""


class Reader:
    """Typed access to one TOML table that reports errors as ``file: key: expected``."""

    def __init__(self, where: str, prefix: str, table: Mapping[str, Any]) -> None:
        self.where, self.prefix, self.table = where, prefix, table
        self.used: set[str] = set()

    def fail(self, key: str, expected: str, got: Any = dataclasses.MISSING) -> ScenarioError:
        shown = "" if got is dataclasses.MISSING else f", got {got!r}"
        return ScenarioError(f"{self.where}: key '{self.prefix}{key}': expected {expected}{shown}")

    def _get(self, key: str) -> Any:
        self.used.add(key)
        return self.table.get(key, dataclasses.MISSING)

    def raw(self, key: str) -> Any:
        """The key's value as the file gives it (None when absent), unchecked."""
        self.used.add(key)
        return self.table.get(key)

    def number(self, key: str, default: float, *, minimum: float = 0.0, strict=False) -> float:
        v = self._get(key)
        if v is dataclasses.MISSING:
            return default
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise self.fail(key, f"a number {bound}", v)
        if v < minimum or (strict and v == minimum):
            raise self.fail(key, f"a number {bound}", v)
        return float(v)

    def integer(self, key: str, default: int, *, minimum: int = 0) -> int:
        v = self._get(key)
        if v is dataclasses.MISSING:
            return default
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise self.fail(key, f"an integer >= {minimum}", v)
        return v

    def flag(self, key: str, default: bool) -> bool:
        v = self._get(key)
        if v is dataclasses.MISSING:
            return default
        if not isinstance(v, bool):
            raise self.fail(key, "true or false", v)
        return v

    def probability(self, key: str, default: float) -> float:
        v = self._get(key)
        if v is dataclasses.MISSING:
            return default
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1:
            raise self.fail(key, "a probability between 0 and 1", v)
        return float(v)

    def text(self, key: str, default: str | None = None, *, choices=None) -> str:
        v = self._get(key)
        if v is dataclasses.MISSING:
            if default is None:
                raise self.fail(key, "a string (this key is required)")
            return default
        if not isinstance(v, str) or (choices and v not in choices):
            want = f"one of {', '.join(map(repr, choices))}" if choices else "a string"
            raise self.fail(key, want, v)
        return v

    def span(self, key: str, default: tuple[float, float]) -> tuple[float, float]:
        v = self._get(key)
        if v is dataclasses.MISSING:
            return default
        ok = (
            isinstance(v, list)
            and len(v) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
            and 0 <= v[0] <= v[1]
        )
        if not ok:
            raise self.fail(key, "[low, high] seconds with 0 <= low <= high", v)
        return (float(v[0]), float(v[1]))

    def int_list(self, key: str, default: tuple[int, ...], lo: int, hi: int) -> tuple[int, ...]:
        v = self._get(key)
        if v is dataclasses.MISSING:
            return default
        ok = (
            isinstance(v, list)
            and v
            and all(isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi for x in v)
        )
        if not ok:
            raise self.fail(key, f"a non-empty list of integers {lo}..{hi}", v)
        return tuple(v)

    def done(self) -> None:
        extra = sorted(set(self.table) - self.used)
        if extra:
            known = ", ".join(sorted(self.used))
            raise ScenarioError(
                f"{self.where}: unknown key '{self.prefix}{extra[0]}' (known keys: {known})"
            )
