"""The run folder: the names of its files, and reading and writing them.

``results/<scenario>-<UTC timestamp>/`` (or the ``--out`` directory) holds:

``history.jsonl``   every operation, flushed as it goes (a crashed run stays checkable)
``replicas.json``   every node's tables at one agreed Raft index (:mod:`harness.divergence`)
``check.json``      the checker's result, with the run's ``coverage``
``scenario.json``   the resolved scenario (after ``--time`` / ``--nodes``)
``versions.json``   rqueue, the engine's version string, Python, platform
                    (:mod:`harness.versions`)
``run.json``        options, phase timings, drain result, exit status and reason
``throughput.png``, ``latency.png``, ``anomaly-timeline.png``, ``report.md``,
``report.html``     written by the plots and the reports (:mod:`harness.report`,
                    :mod:`harness.html`)
``cluster/``        the nodes' data directories and logs

Every module names these files through the constants here and reads them through
:class:`RunStore`. The store knows paths and formats only, and imports nothing of the
harness: the modules of a file's content read it from the path given here (the history:
:mod:`harness.history`; the replicas' record: :mod:`harness.divergence`), and a run is
judged by :mod:`harness.judgement`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

DEFAULT_ROOT = Path("results")
REPO = Path(__file__).resolve().parent.parent

HISTORY = "history.jsonl"
REPLICAS = "replicas.json"
CHECK = "check.json"
SCENARIO = "scenario.json"
VERSIONS = "versions.json"
RUN = "run.json"
REPORT = "report.md"
REPORT_HTML = "report.html"
THROUGHPUT = "throughput.png"
LATENCY = "latency.png"
ANOMALY_TIMELINE = "anomaly-timeline.png"
CLUSTER = "cluster"
#: ``results/latest``: a link to the newest run folder made in ``results/`` (not ``--out``)
LATEST = "latest"


class RunStore:
    """One run's folder and the files in it."""

    def __init__(self, root: Path | str, history: Path | None = None) -> None:
        self.root = Path(root)
        #: the history file: the folder's ``history.jsonl``, or another one checked here
        self.history = Path(history) if history is not None else self.root / HISTORY

    @classmethod
    def create(cls, scenario: str, out: Path | str | None = None) -> RunStore:
        """Make a fresh folder: ``out`` if given (must be empty or absent), else a new
        ``results/<scenario>-<timestamp>``, which ``results/latest`` then links to."""
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
        if out is None:
            _link_latest(root)
        return cls(root)

    @classmethod
    def holding(cls, path: Path | str) -> RunStore:
        """The folder of a history: ``path`` is a history file (of any name, its folder
        is the one beside it) or a folder holding ``history.jsonl``."""
        p = Path(path)
        return cls(p) if p.is_dir() else cls(p.parent, history=p)

    def remove(self, folder: bool) -> None:
        """Remove what the run wrote (a run refused before it started): its files, its
        empty cluster folder, and the folder itself when ``folder`` (this run made it)."""
        for name in (RUN, SCENARIO):
            self.path(name).unlink(missing_ok=True)
        if self.cluster_dir.exists():
            shutil.rmtree(self.cluster_dir)
        if folder and not any(self.root.iterdir()):
            self.root.rmdir()
            latest = self.root.parent / LATEST
            if latest.is_symlink() and latest.readlink() == Path(self.root.name):
                latest.unlink()  # it named this folder

    def path(self, name: str) -> Path:
        """The file ``name`` (one of this module's constants) in the folder."""
        return self.root / name

    @property
    def cluster_dir(self) -> Path:
        return self.path(CLUSTER)

    # -- writing ---------------------------------------------------------------------------
    def write_json(self, name: str, data: Any, sort_keys: bool = True) -> Path:
        """Write ``data`` as indented JSON to ``name`` in the run folder (atomically)."""
        text = json.dumps(data, indent=2, sort_keys=sort_keys, default=str) + "\n"
        return self.write_text(name, text)

    def write_text(self, name: str, text: str) -> Path:
        """Write ``text`` to ``name`` in the run folder (atomically)."""
        path = self.path(name)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        return path

    # -- reading ---------------------------------------------------------------------------
    def read_json(self, name: str) -> Any:
        """The JSON in ``name``; ``OSError`` when it cannot be read, ``ValueError`` when
        it is no JSON."""
        return json.loads(self.path(name).read_text(encoding="utf-8"))

    def json_or_none(self, name: str) -> Any:
        """The JSON in ``name``, or None when it is missing, unreadable or no JSON."""
        try:
            return self.read_json(name)
        except (OSError, ValueError):
            return None

    def run_info(self) -> Any:
        """``run.json``'s content (None when there is none)."""
        return self.json_or_none(RUN)

    def summary(self) -> dict[str, Any]:
        """The run's summary as ``run.json`` holds it (empty when there is none)."""
        run = self.run_info()
        return (run.get("summary") if isinstance(run, dict) else None) or {}

    def stored_check(self) -> dict[str, Any] | None:
        """``check.json``'s check result, or None when there is none."""
        result = self.json_or_none(CHECK)
        return result if isinstance(result, dict) and "anomalies" in result else None

    def is_run(self) -> bool:
        """Whether the folder holds a run (``python -m harness run`` writes scenario.json
        first); a history alone is judged by its anomalies."""
        return self.path(SCENARIO).is_file()


def _link_latest(root: Path) -> None:
    """Point ``latest`` beside ``root`` at it (a relative link, replaced atomically, so a
    concurrent run's newer link may win). Anything else named ``latest`` is left alone,
    and a filesystem without links goes without."""
    link = root.parent / LATEST
    if link.exists() and not link.is_symlink():
        return
    tmp = root.parent / f".{LATEST}.{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(root.name, target_is_directory=True)
        os.replace(tmp, link)
    except OSError:
        tmp.unlink(missing_ok=True)
