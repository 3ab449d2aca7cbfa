"""The run folder: the names of its files, reading and writing them, and judging its run.

``results/<scenario>-<UTC timestamp>/`` (or the ``--out`` directory) holds:

``history.jsonl``   every operation, flushed as it goes (a crashed run stays checkable)
``replicas.json``   every node's tables at one agreed Raft index (:mod:`harness.divergence`)
``check.json``      the checker's result, with the run's ``coverage``
``scenario.json``   the resolved scenario (after ``--time`` / ``--nodes``)
``versions.json``   rqueue, the engine's version string, Python, platform
``run.json``        options, phase timings, drain result, exit status and reason
``throughput.png``, ``latency.png``, ``anomaly-timeline.png``, ``report.md``,
``report.html``     written by the plots and the reports (:mod:`harness.report`,
                    :mod:`harness.html`)
``cluster/``        the nodes' data directories and logs

Every module names these files through the constants here and reads them through
:class:`RunStore`. :func:`judge` is the one way a run is judged, from its history events
(with its replicas' record, its plan and how it ended) to the check result, its coverage
and the verdict: ``run`` (:mod:`harness.runner`), ``check`` (:mod:`harness.check_cli`),
``report.md`` (:mod:`harness.report`) and the plots (:mod:`harness.plots.run`) all call
it, the last three through :meth:`RunStore.judge` or with what they read from the folder.
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from . import divergence
from .checker import check
from .errors import EXIT_HARNESS
from .history import gc_paused, read_history
from .scenario import Scenario, ScenarioError
from .verdict import Verdict, coverage, decide, without_unprovable

DEFAULT_ROOT = Path("results")
REPO = Path(__file__).resolve().parent.parent

HISTORY = "history.jsonl"
REPLICAS = divergence.FILE  # the record's format names it: "no replicas.json beside ..."
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

#: why a run folder without a readable run.json gets no verdict
NEVER_FINISHED = "it never finished (run.json is missing or unreadable: was it killed?)"


@dataclass(frozen=True)
class Plan:
    """What a run planned to test: its resolved scenario, and what the nemesis said of
    faults that failed before they reached the history; or why the plan is unknown."""

    scenario: Scenario | None
    errors: tuple[str, ...] = ()
    unknown: str = ""

    def coverage(self, events: Sequence[dict[str, Any]], result: Mapping[str, Any]) -> dict:
        """The run's ``coverage`` (``check.json``); inconclusive when the plan is unknown."""
        if self.scenario is None:
            return {"conclusive": False, "reasons": [f"the run's plan is unknown: {self.unknown}"]}
        return coverage(events, self.scenario, result, self.errors)


@dataclass(frozen=True)
class Judgement:
    """A run judged: the check result (``check.json``'s shape; None: not checked) and
    the verdict (:func:`harness.verdict.decide`)."""

    result: dict[str, Any] | None
    verdict: Verdict


def judge(
    events: Sequence[dict[str, Any]] | None,
    replicas: Mapping[str, Any] | None = None,
    plan: Plan | None = None,
    failed: str | None = None,
    result: dict[str, Any] | None = None,
) -> Judgement:
    """Judge a run: check its history ``events`` with its ``replicas`` record unless
    ``result`` is a check made already (a stored ``check.json``), add the coverage of its
    ``plan`` when the result lacks one (a history alone has no plan), and decide the
    verdict of a run that ``failed`` (the reason) or not (``None``).

    ``events`` None: the history is not read (it cannot be, or ``result`` says all), so
    nothing is checked and the verdict is that of ``result`` (None: not checked). Raises
    what :func:`harness.checker.check` raises for a history whose operations do not pair
    up or a malformed record.
    """
    if events is not None:
        if result is None:
            result = check(events, replicas)
        if plan is not None and "coverage" not in result:
            result = {**result, "coverage": plan.coverage(events, result)}
    verdict = decide(result, failed)
    if failed is not None and result is not None:
        result = without_unprovable(result, failed)
    return Judgement(result, verdict)


def failure(run: Any) -> str | None:
    """Why a run failed, from its record (``run.json``'s content, None when there is
    none: it never finished), or None when it ended with a check."""
    if not isinstance(run, dict):
        return NEVER_FINISHED
    if run.get("exit") == EXIT_HARNESS:
        return str(run.get("reason") or "the harness failed")
    return None


class RunStore:
    """One run's folder and the files in it."""

    def __init__(self, root: Path | str, history: Path | None = None) -> None:
        self.root = Path(root)
        #: the history file: the folder's ``history.jsonl``, or another one checked here
        self.history = Path(history) if history is not None else self.root / HISTORY

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

    def events(self) -> list[dict]:
        """The history's events (:func:`harness.history.read_history`: raises
        ``HistoryFormatError`` on a defect, ``OSError`` when it cannot be read)."""
        return read_history(self.history)

    def replicas(self) -> dict[str, Any] | None:
        """The replicas' record beside the history (None when there is none; raises
        :class:`~harness.divergence.SnapshotFormatError` for one that is no JSON)."""
        return divergence.read(self.path(REPLICAS))

    def is_run(self) -> bool:
        """Whether the folder holds a run (``python -m harness run`` writes scenario.json
        first); a history alone is judged by its anomalies."""
        return self.path(SCENARIO).is_file()

    def failure(self, run: Any = None) -> str | None:
        """Why the run here failed (:func:`failure` of ``run``, else of ``run.json``), or
        None: it ended, or the folder holds no run."""
        if not self.is_run():
            return None
        return failure(self.run_info() if run is None else run)

    def plan(self, run: Any = None) -> Plan | None:
        """The run's plan: ``scenario.json`` and the nemesis errors of ``run`` (else of
        ``run.json``); None when the folder holds no run. A scenario.json that cannot be
        read makes the plan unknown."""
        if not self.is_run():
            return None
        path = self.path(SCENARIO)
        try:
            scenario = Scenario.from_json(self.read_json(SCENARIO), str(path))
        except (OSError, ValueError) as e:  # ScenarioError is a ValueError
            why = e if isinstance(e, ScenarioError) else f"{path}: cannot read: {e}"
            return Plan(None, unknown=str(why))
        run = self.run_info() if run is None else run
        errors = (run.get("nemesis_errors") if isinstance(run, dict) else None) or []
        return Plan(scenario, tuple(str(e) for e in errors))

    def judge(
        self, run: Any = None, result: dict[str, Any] | None = None, history: bool = True
    ) -> Judgement:
        """The run here judged (:func:`judge`) as its files say, with ``run`` (else
        ``run.json``). ``result`` (a stored check) is kept; the history is read when the
        result or its coverage is missing, and the replicas' record when the result is;
        ``history=False``: it cannot be read, the verdict is ``result``'s.

        Raises ``HistoryFormatError``, ``SnapshotFormatError`` or ``OSError`` for a file
        that cannot be read.
        """
        run = self.run_info() if run is None else run
        failed = self.failure(run)
        if not history or (result is not None and "coverage" in result):
            return judge(None, failed=failed, result=result)
        replicas = self.replicas() if result is None else None
        with gc_paused():
            return judge(self.events(), replicas, self.plan(run), failed, result)


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
