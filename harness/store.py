"""The run folder: where a run keeps its history, verdict, versions and plots.

``results/<scenario>-<UTC timestamp>/`` (or the ``--out`` directory) holds:

``history.jsonl``   every operation, flushed as it goes (a crashed run stays checkable)
``check.json``      the checker's verdict
``scenario.json``   the resolved scenario (after ``--time`` / ``--nodes``)
``versions.json``   rqueue, the engine's version string, Python, platform
``run.json``        options, phase timings, drain result, exit status and reason
``throughput.png``, ``latency.png``, ``report.md``   written by the plots and report
``cluster/``        the nodes' data directories and logs
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

DEFAULT_ROOT = Path("results")
REPO = Path(__file__).resolve().parent.parent


class RunStore:
    """One run's folder and the files in it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @classmethod
    def create(cls, scenario: str, out: Path | str | None = None) -> RunStore:
        """Make a fresh folder: ``out`` if given (must be empty or absent), else a new
        ``results/<scenario>-<timestamp>``."""
        if out is not None:
            root = Path(out)
            if root.exists() and any(root.iterdir()):
                raise FileExistsError(f"--out {root} is not empty; give a new or empty folder")
        else:
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            root = DEFAULT_ROOT / f"{scenario}-{stamp}"
            n = 1
            while root.exists():
                n += 1
                root = DEFAULT_ROOT / f"{scenario}-{stamp}-{n}"
        root.mkdir(parents=True, exist_ok=True)
        return cls(root)

    @property
    def history(self) -> Path:
        return self.root / "history.jsonl"

    @property
    def check(self) -> Path:
        return self.root / "check.json"

    @property
    def cluster_dir(self) -> Path:
        return self.root / "cluster"

    def write_json(self, name: str, data: Any) -> Path:
        """Write ``data`` as indented JSON to ``name`` in the run folder (atomically)."""
        path = self.root / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
        tmp.replace(path)
        return path

    def read_json(self, name: str) -> Any:
        return json.loads((self.root / name).read_text())


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
        "git": _git_commit(),
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


def _git_commit() -> str | None:
    """The checkout's commit (with ``+dirty`` when it has local changes), if any."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head


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
