"""Every cluster backend by name, in the order ``harness list`` names them. A new backend
is its own modules and one entry, a :class:`~harness.cluster.backend.Backend`, listed
here; every command reads this (``run``, ``cluster``, ``matrix``, ``list``)."""

from __future__ import annotations

from pathlib import Path

from .backend import Backend
from .base import ClusterError
from .docker.backend import Docker
from .external.backend import External
from .local.backend import Local
from .ssh.backend import Ssh

BACKENDS: dict[str, type[Backend]] = {b.name: b for b in (Local, Docker, External, Ssh)}
#: the backends a command can start (``--backend``'s choices), the first the default
STARTABLE: tuple[str, ...] = tuple(n for n, b in BACKENDS.items() if b.startable)
DEFAULT = STARTABLE[0]


def backend_of(name: str) -> type[Backend]:
    """The backend called ``name`` that a command can start; :class:`ClusterError` naming
    the choices when there is none."""
    backend = BACKENDS.get(name)
    if backend is None or not backend.startable:
        raise ClusterError(f"unknown backend {name!r}; choose one of {', '.join(STARTABLE)}")
    return backend


def held_in(directory: Path) -> tuple[type[Backend], bool] | None:
    """The backend whose cluster's state ``directory`` holds, and whether that cluster
    was removed (``down --purge``: only its marker is left); None: no cluster's."""
    for backend in BACKENDS.values():
        if backend.holds(directory):
            return backend, False
    for backend in BACKENDS.values():
        if backend.purged_file is not None and (directory / backend.purged_file).exists():
            return backend, True
    return None


def capabilities() -> dict[str, frozenset[str]]:
    """What each backend's clusters can do at best, by name."""
    return {n: b.capabilities() for n, b in BACKENDS.items()}


def busy() -> set[str]:
    """The cluster directories live processes of this machine use now, every backend's."""
    return set().union(*(b.busy() for b in BACKENDS.values()))


def matrix_forms() -> str:
    """The engine forms ``matrix`` takes, in words: "'embedded', ... or 'ssh:INVENTORY'"."""
    forms = [f"'{f}'" for b in BACKENDS.values() for f in b.matrix_forms]
    return ", ".join(forms[:-1]) + " or " + forms[-1]


def matrix_engine(spec: str) -> tuple[str, tuple[str, ...]]:
    """``matrix --engine spec``: (the table's label, the run command's arguments);
    :class:`ValueError` when no backend takes that form."""
    for backend in BACKENDS.values():
        found = backend.matrix_engine(spec)
        if found is not None:
            return found
    raise ValueError(f"engine {spec!r}: expected {matrix_forms()}")
