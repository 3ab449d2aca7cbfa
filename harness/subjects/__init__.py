"""Queue implementations the harness can drive, by name.

``rqueue`` is the product; ``seed-reference`` is the seed's literal protocol; the
``mutant-*`` subjects are rqueue with one statement builder broken on purpose, so the
harness's own tests can show that each kind of bug is caught. Modules load lazily: a
subject whose dependencies are missing does not stop the others.
"""

from __future__ import annotations

import importlib

from .base import AsyncClient, Clock, LeaseLike, Subject, SyncClient

#: subject name -> (module, attribute) holding its :class:`Subject`
_REGISTRY: dict[str, tuple[str, str]] = {
    "rqueue": ("harness.subjects.rqueue_subject", "SUBJECT"),
    "seed-reference": ("harness.subjects.seed_reference", "SUBJECT"),
    "mutant-no-exclusivity": ("harness.subjects.mutants", "NO_EXCLUSIVITY"),
    "mutant-lifo": ("harness.subjects.mutants", "LIFO"),
    "mutant-ack-wrong-row": ("harness.subjects.mutants", "ACK_WRONG_ROW"),
    "mutant-subquery-now": ("harness.subjects.mutants", "SUBQUERY_NOW"),
}
SUBJECT_NAMES: tuple[str, ...] = tuple(_REGISTRY)
MUTANT_NAMES: tuple[str, ...] = tuple(n for n in _REGISTRY if n.startswith("mutant-"))


def get_subject(name: str) -> Subject:
    """The subject called ``name``; ``ValueError`` lists the known names otherwise."""
    try:
        module, attr = _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown subject {name!r}; known subjects: {', '.join(SUBJECT_NAMES)}"
        ) from None
    return getattr(importlib.import_module(module), attr)


__all__ = [
    "MUTANT_NAMES",
    "SUBJECT_NAMES",
    "AsyncClient",
    "Clock",
    "LeaseLike",
    "Subject",
    "SyncClient",
    "get_subject",
]
