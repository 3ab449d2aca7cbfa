"""Words that follow a count: ``1 host``, ``3 hosts``."""

from __future__ import annotations


def plural(n: int, word: str, words: str | None = None) -> str:
    """``n`` and ``word``, or ``words`` (default ``word + "s"``) unless ``n`` is 1."""
    return f"{n} {word if n == 1 else (words or word + 's')}"
