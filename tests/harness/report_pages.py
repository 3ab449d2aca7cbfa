"""Run folders for the report.html and serve tests, and reading a page's packed data back."""

from __future__ import annotations

import base64
import gzip
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

HISTORIES = Path(__file__).parent / "histories"
_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "checker_bench.py"
#: a fault kind no module of the harness knows: the page must shade it all the same
NEW_KIND = "disk-stall"


def simulate(seed: int, events: int) -> list[dict]:
    """A valid history of about ``events`` events (kills, pauses, partitions among them)."""
    spec = importlib.util.spec_from_file_location("checker_bench", _BENCH)
    assert spec is not None and spec.loader is not None
    bench = sys.modules.setdefault("checker_bench", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(bench)
    return bench.simulate(seed, events, fault_every=4.0)


def with_new_fault(events: list[dict], start: float, end: float) -> list[dict]:
    """``events`` with a fault of :data:`NEW_KIND` from ``start`` to ``end``, renumbered."""
    value = {"fault": NEW_KIND, "nodes": ["n2"]}
    extra = [
        {"time": start, "process": "nemesis", "type": "invoke", "f": "stall",
         "value": {**value, "phase": "start"}},
        {"time": end, "process": "nemesis", "type": "invoke", "f": "unstall",
         "value": {**value, "phase": "end"}},
    ]  # fmt: skip
    merged = sorted([*events, *extra], key=lambda e: e["time"])
    return [{**e, "index": i} for i, e in enumerate(merged)]


def write_run(
    root: Path, events: list[dict], run: dict[str, Any] | None = None, **options: Any
) -> Path:
    """A run folder holding ``events`` as its history and, unless ``run`` is None and no
    ``options`` are given, a run.json with those options."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / "history.jsonl").open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(e) + "\n" for e in events)
    if run is not None or options:
        record = {"options": options, "started": "2026-12-05T01:00:00Z", **(run or {})}
        (root / "run.json").write_text(json.dumps(record))
    return root


def fifo_events() -> list[dict]:
    """tests/harness/histories/fifo-violation.jsonl, with a fault of a new kind."""
    lines = (HISTORIES / "fifo-violation.jsonl").read_text().splitlines()
    return with_new_fault([json.loads(x) for x in lines], 0.05, 1.25)


def unpack(page: str, element: str) -> str:
    """The text packed into the page's ``<script id=element>`` (gzip, base64)."""
    m = re.search(rf'<script type="application/gzip" id="{element}">([^<]*)</script>', page)
    assert m, f"no packed {element} in the page"
    return gzip.decompress(base64.b64decode(m.group(1))).decode("utf-8")


SECRET = "the content of a file outside the served folder"


def _valid_events() -> list[dict]:
    return [json.loads(x) for x in (HISTORIES / "valid-basic.jsonl").read_text().splitlines()]


def make_results(tmp_path: Path) -> Path:
    """tmp_path/results: two runs, a matrix of one run, and links pointing out of it."""
    (tmp_path / "secret.txt").write_text(SECRET)
    results = tmp_path / "results"
    write_run(
        results / "fifo-1", fifo_events(), scenario="steady", subject="mutant-lifo",
        backend="local", seed=11, run={"summary": {"verdict": "ANOMALIES"}},
    )  # fmt: skip
    write_run(
        results / "valid-2", _valid_events(), scenario="leader-failover", subject="rqueue",
        backend="docker", seed=22, run={"summary": {"verdict": "valid"}},
    )  # fmt: skip
    matrix = results / "m"
    write_run(matrix / "runs" / "steady-embedded-rqueue-3", _valid_events(), seed=3)
    cells = [{"scenario": "steady", "engine": "embedded", "subject": "rqueue", "seed": 3,
              "exit": 0, "verdict": "valid", "anomalies": {}, "seconds": 9.5,
              "run_dir": "/elsewhere/runs/steady-embedded-rqueue-3"}]  # fmt: skip
    (matrix / "matrix.json").write_text(json.dumps(cells))
    (results / "out").symlink_to(tmp_path)
    (results / "secret-link.txt").symlink_to(tmp_path / "secret.txt")
    return results
