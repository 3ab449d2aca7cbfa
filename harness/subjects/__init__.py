"""Queue implementations the harness can drive: built in, installed, or named by path.

``rqueue`` is the product; ``seed-reference`` is the seed's literal protocol; the
``mutant-*`` subjects are rqueue with one statement builder broken on purpose, so the
harness's own tests can show that each kind of bug is caught. Modules load lazily: a
subject whose dependencies are missing does not stop the others.

Any other queue client can be a subject (the protocol is in :mod:`.base` and in
docs/example_subject/README.md):

* ``package.module:ATTRIBUTE`` names a :class:`Subject` (or an object with ``name``,
  ``open_sync`` and ``open_async``) in any importable module;
* an installed distribution can register one under the entry point group
  :data:`ENTRY_POINT_GROUP` (``name = "package.module:ATTRIBUTE"``); ``python -m harness
  list`` shows it and ``--subject name`` runs it.

A subject that cannot be imported or does not fit the protocol raises
:class:`SubjectError` with a one-line reason.
"""

from __future__ import annotations

import importlib
import inspect
from importlib import metadata
from typing import Any

from .base import (
    CLIENT_METHODS,
    DEAD_LETTERS,
    AsyncClient,
    Clock,
    LeaseLike,
    Subject,
    SubjectError,
    SyncClient,
    checked,
    note_dead_letter,
)

#: entry point group under which installed packages register their subjects
ENTRY_POINT_GROUP = "rqueue.harness.subjects"

#: subject name -> (module, attribute) holding its :class:`Subject`
_REGISTRY: dict[str, tuple[str, str]] = {
    "rqueue": ("harness.subjects.rqueue_subject", "SUBJECT"),
    "seed-reference": ("harness.subjects.seed_reference", "SUBJECT"),
    "kombu": ("harness.subjects.kombu_subject", "SUBJECT"),
    "mutant-no-exclusivity": ("harness.subjects.mutants", "NO_EXCLUSIVITY"),
    "mutant-lifo": ("harness.subjects.mutants", "LIFO"),
    "mutant-ack-wrong-row": ("harness.subjects.mutants", "ACK_WRONG_ROW"),
    "mutant-subquery-now": ("harness.subjects.mutants", "SUBQUERY_NOW"),
    "mutant-blob-text": ("harness.subjects.mutants", "BLOB_TEXT"),
    "mutant-zone-blind": ("harness.subjects.mutants", "ZONE_BLIND"),
    "mutant-no-idempotency": ("harness.subjects.mutants", "NO_IDEMPOTENCY"),
}
SUBJECT_NAMES: tuple[str, ...] = tuple(_REGISTRY)
MUTANT_NAMES: tuple[str, ...] = tuple(n for n in _REGISTRY if n.startswith("mutant-"))


def get_subject(name: str) -> Subject:
    """The subject ``name``: built in, ``package.module:ATTRIBUTE``, or an installed
    entry point. :class:`SubjectError` (a ``ValueError``) says why otherwise."""
    if name in _REGISTRY:
        module, attr = _REGISTRY[name]
        return getattr(importlib.import_module(module), attr)
    if ":" in name:
        return load_subject(name)
    installed = installed_subjects()
    if name in installed:
        return load_subject(installed[name], f"entry point {name!r} ({ENTRY_POINT_GROUP})")
    known = ", ".join([*SUBJECT_NAMES, *installed])
    raise SubjectError(
        f"unknown subject {name!r}; known subjects: {known}; "
        "or name one as package.module:ATTRIBUTE"
    )


def installed_subjects() -> dict[str, str]:
    """Subjects registered by installed distributions: name -> ``module:ATTRIBUTE``."""
    found: dict[str, str] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in _REGISTRY:
            found.setdefault(ep.name, ep.value)
    return found


def load_subject(spec: str, where: str | None = None) -> Subject:
    """Import ``package.module:ATTRIBUTE`` and check that it is a subject."""
    where = where or f"subject {spec!r}"
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr or ":" in attr:
        raise SubjectError(f"{where}: expected package.module:ATTRIBUTE")
    try:
        module = importlib.import_module(module_name)
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # a broken module may raise anything (even exit) on import
        raise SubjectError(
            f"{where}: cannot import {module_name!r}: {_one_line(e)}"
            + (" (is its folder on PYTHONPATH?)" if _is_missing(e, module_name) else "")
        ) from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SubjectError(f"{where}: module {module_name!r} has no {attr!r}") from None
    return as_subject(obj, where)


def as_subject(obj: Any, where: str) -> Subject:
    """``obj`` as a :class:`Subject` whose clients are checked when opened."""
    missing = [a for a in ("name", "open_sync", "open_async") if not hasattr(obj, a)]
    if missing:
        raise SubjectError(
            f"{where} is not a subject: {_what(obj)} lacks {', '.join(missing)} "
            "(expected harness.subjects.Subject(name, description, open_sync, open_async))"
        )
    name, open_sync, open_async = obj.name, obj.open_sync, obj.open_async
    if not isinstance(name, str) or not name:
        raise SubjectError(f"{where}: name must be a non-empty string, got {name!r}")
    if not callable(open_sync) or inspect.iscoroutinefunction(open_sync):
        raise SubjectError(f"{where}: open_sync must be a plain function (urls, clock, timeout)")
    if not callable(open_async):
        raise SubjectError(f"{where}: open_async must be an async function (urls, clock, timeout)")
    pending = getattr(obj, "pending", None)
    if pending is not None and not callable(pending):
        raise SubjectError(f"{where}: pending must be a function (urls, timeout) or None")
    return checked(
        Subject(
            name=name,
            description=str(getattr(obj, "description", "") or ""),
            open_sync=open_sync,
            open_async=open_async,
            expected_valid=bool(getattr(obj, "expected_valid", True)),
            pending=pending,
        ),
        where,
    )


def _is_missing(e: BaseException, module_name: str) -> bool:
    """Whether ``e`` says the subject's own module (or its package) is not found."""
    missing = getattr(e, "name", None) if isinstance(e, ModuleNotFoundError) else None
    return bool(missing) and (module_name + ".").startswith(f"{missing}.")


def _what(obj: Any) -> str:
    if inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj):
        return f"{type(obj).__name__} {getattr(obj, '__qualname__', obj.__name__)}"
    return f"a {type(obj).__name__}"


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


__all__ = [
    "CLIENT_METHODS",
    "DEAD_LETTERS",
    "ENTRY_POINT_GROUP",
    "MUTANT_NAMES",
    "SUBJECT_NAMES",
    "AsyncClient",
    "Clock",
    "LeaseLike",
    "Subject",
    "SubjectError",
    "SyncClient",
    "get_subject",
    "installed_subjects",
    "load_subject",
    "note_dead_letter",
]
