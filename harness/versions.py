"""What ran (``versions.json``): rqueue and its commit, the engine and the version its
nodes report, Python, the platform and PySyncObj; and telling the engine that answered
from that version."""

from __future__ import annotations

import platform
import subprocess
import sys
import tomllib
from importlib import metadata
from typing import Any

from .store import REPO


def versions(engine: str, engine_version: str | None) -> dict[str, Any]:
    """What ran: rqueue's version, the engine and its version, Python, the platform."""

    def dist(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    try:
        import rqueue

        rq = getattr(rqueue, "__version__", None) or dist("rqueue") or _source_version()
    except ImportError:
        rq = None
    return {
        "rqueue": rq,
        "git": git_commit(),
        "engine": engine,
        "engine_version": engine_version,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "pysyncobj": dist("pysyncobj"),
    }


def _source_version() -> str | None:
    """The version in the source tree's pyproject.toml (rqueue run from a checkout)."""
    path = REPO / "pyproject.toml"
    try:
        return tomllib.loads(path.read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None


def git_commit() -> str | None:
    """The checkout's commit (with ``+dirty`` when it has local changes), if any."""
    try:
        head = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head


def _git(*args: str) -> str:
    """What ``git ARGS`` prints in the checkout (raises when it fails)."""
    done = subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=5, check=True
    )
    return done.stdout.strip()


#: the mark the project's node puts in the version it reports (harness.node.versions)
EMBEDDED_MARK = "-rqueue-embedded"


def engine_of(backend_engine: str, version: str | None) -> str:
    """The engine that answered (``embedded``: the project's node; ``rqlited``), told by
    the version its nodes report, whatever the backend ran them on (a local cluster
    knows its engine already; Docker and SSH clusters name their backend instead)."""
    if backend_engine in ("embedded", "rqlited"):
        return backend_engine
    if version is None:
        return backend_engine
    return "embedded" if EMBEDDED_MARK in version else "rqlited"


def engine_version(urls: list[str], timeout: float = 3.0) -> str | None:
    """``build.version`` from the first node whose ``/status`` answers."""
    import requests

    for url in urls:
        try:
            r = requests.get(f"{url.rstrip('/')}/status", timeout=timeout)
            v = r.json().get("build", {}).get("version")
            return v or r.headers.get("X-RQLITE-VERSION")
        except (requests.RequestException, ValueError, AttributeError):
            continue
    return None
