"""What ``python -m harness serve`` lists: the runs and matrices under a folder, and their pages.

A run is a folder holding ``history.jsonl``, ``run.json`` or ``scenario.json`` (its
scenario, subject, backend, seed, verdict and date come from those and ``check.json``);
a matrix is a folder holding ``matrix.json`` (:mod:`harness.matrix`), whose runs lie
under its ``runs/``. The index page filters its rows in the browser (``assets/index.js``).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from html import escape
from pathlib import Path, PurePosixPath
from typing import Any

from ..store import HISTORY, RUN, SCENARIO, RunStore
from .page import REPORT_HTML, VERDICT_CLASS, asset, script_json

MATRIX_JSON = "matrix.json"
MATRIX_HTML = "matrix.html"
#: how deep under the served folder runs are looked for (a matrix's are two levels down)
DEPTH = 5
COLUMNS = ("scenario", "subject", "backend", "seed", "verdict", "date")


@dataclass(frozen=True)
class RunRow:
    """One run as the index lists it; ``path`` is its folder under the served one."""

    path: str
    scenario: str
    subject: str
    backend: str
    seed: str
    verdict: str
    date: str
    #: whether the folder holds report.html (else serve makes the page when asked)
    written: bool
    #: whether ``harness shrink`` left its result in the run's ``shrink/``
    shrunk: bool = False


@dataclass(frozen=True)
class MatrixRow:
    path: str
    cells: int
    verdicts: str
    date: str


def scan(root: Path) -> tuple[list[RunRow], list[MatrixRow]]:
    """The runs (newest first) and matrices under ``root``, at most :data:`DEPTH` deep,
    following no symbolic link; a run's own subfolders (its ``cluster/``) are skipped."""
    runs: list[RunRow] = []
    matrices: list[MatrixRow] = []
    base = len(root.parts)
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        names = set(files)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if len(here.parts) - base >= DEPTH:
            dirs.clear()
        rel = here.relative_to(root).as_posix()
        if MATRIX_JSON in names:
            matrices.append(matrix_row(here, rel))
        if names & {HISTORY, RUN, SCENARIO}:
            runs.append(run_row(here, rel))
            dirs.clear()
    runs.sort(key=lambda r: (r.date, r.path), reverse=True)
    return runs, matrices


def _mtime(path: Path) -> str:
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(path.stat().st_mtime))
    except OSError:
        return ""


def run_row(folder: Path, rel: str) -> RunRow:
    """The index's row of the run in ``folder``, from whatever of its files it holds."""
    store = RunStore(folder)
    run = store.run_info()
    run = run if isinstance(run, dict) else {}
    options = run.get("options") if isinstance(run.get("options"), dict) else {}
    summary = run.get("summary") if isinstance(run.get("summary"), dict) else {}
    scenario = store.json_or_none(SCENARIO)
    name = scenario.get("name") if isinstance(scenario, dict) else None
    verdict = summary.get("verdict")
    if not verdict:
        check = store.stored_check()
        verdict = "not checked" if check is None else "valid" if check.get("valid") else "ANOMALIES"
    started = run.get("started") or _mtime(store.history if store.history.exists() else folder)
    seed = options.get("seed")
    return RunRow(
        path=rel,
        scenario=str(name or options.get("scenario") or folder.name),
        subject=str(options.get("subject") or "-"),
        backend=str(options.get("backend") or "-"),
        seed="-" if seed is None else str(seed),
        verdict=str(verdict),
        date=str(started),
        written=(folder / REPORT_HTML).is_file(),
        shrunk=(folder / "shrink" / "shrink.md").is_file(),
    )


def matrix_row(folder: Path, rel: str) -> MatrixRow:
    cells = _cells(folder)
    counts: dict[str, int] = {}
    for c in cells:
        counts[str(c.get("verdict"))] = counts.get(str(c.get("verdict")), 0) + 1
    text = ", ".join(f"{v} {n}" for v, n in sorted(counts.items()))
    return MatrixRow(rel, len(cells), text or "no cells", _mtime(folder / MATRIX_JSON))


def _cells(folder: Path) -> list[dict[str, Any]]:
    try:
        cells = json.loads((folder / MATRIX_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []


def href(rel: str, name: str) -> str:
    """The URL path of ``name`` in the folder ``rel`` (under the served one)."""
    path = PurePosixPath(rel) / name if rel not in ("", ".") else PurePosixPath(name)
    return "/" + "/".join(_quote(p) for p in path.parts)


def _quote(part: str) -> str:
    from urllib.parse import quote

    return quote(part, safe="")


def _verdict(label: str) -> str:
    return f'<span class="verdict {VERDICT_CLASS.get(label, "none")}">{escape(label)}</span>'


def _page(title: str, body: str, script: str = "") -> str:
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><title>{escape(title)}</title>
<style>{asset("report.css")}</style></head>
<body><header><h1>{escape(title)}</h1><nav><a href="/">All runs</a></nav></header>
<main>{body}</main>{script}</body></html>
"""


def index_page(root: Path) -> str:
    """The index: every run under ``root`` (filtered in the browser) and every matrix."""
    runs, matrices = scan(root)
    rows = []
    for r in runs:
        cells = "".join(
            f"<td>{_verdict(r.verdict) if c == 'verdict' else escape(getattr(r, c))}</td>"
            for c in COLUMNS
        )
        made = "" if r.written else ' <span class="note">(made when opened)</span>'
        link = f'<a href="{href(r.path, REPORT_HTML)}">{escape(r.path or ".")}</a>{made}'
        if r.shrunk:
            link += f' · <a href="{href(r.path, "shrink/shrink.html")}">shrink</a>'
        rows.append(f"<tr><td>{link}</td>{cells}</tr>")
    head = "".join(f"<th>{c}</th>" for c in ("run", *COLUMNS))
    verdicts = sorted({r.verdict for r in runs})
    options = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in verdicts)
    body = [
        f"<p>Runs under <code>{escape(str(root))}</code>: {len(runs)}.</p>",
        '<div class="filters"><label>Filter <input id="q" type="search" '
        'placeholder="scenario, subject, seed, date…"></label>'
        f'<label>Verdict <select id="verdict"><option value="">any</option>{options}'
        '</select></label><span id="shown"></span></div>',
        f'<table id="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>',
    ]
    if not runs:
        body.append('<p class="note">No run folders here (a run folder holds history.jsonl).</p>')
    if matrices:
        mrows = "".join(
            f'<tr><td><a href="{href(m.path, MATRIX_HTML)}">{escape(m.path or ".")}</a></td>'
            f'<td class="num">{m.cells}</td><td>{escape(m.verdicts)}</td>'
            f"<td>{escape(m.date)}</td></tr>"
            for m in matrices
        )
        body.append(
            '<h2>Matrices</h2><table id="matrices"><thead><tr><th>matrix</th><th>runs</th>'
            f"<th>verdicts</th><th>date</th></tr></thead><tbody>{mrows}</tbody></table>"
        )
    data = [asdict(r) for r in runs]
    script = (
        f'<script type="application/json" id="runs-data">{script_json(data)}</script>'
        f"<script>{asset('index.js')}</script>"
    )
    return _page("rqueue harness runs", "\n".join(body), script)


def matrix_page(root: Path, folder: Path) -> str:
    """A matrix's table (``matrix.json``), each cell linked to its run's report."""
    rel = folder.relative_to(root).as_posix()
    rows = []
    for c in _cells(folder):
        run = _cell_run(root, folder, c.get("run_dir"))
        found = ", ".join(f"{k} {v}" for k, v in sorted((c.get("anomalies") or {}).items()))
        verdict = str(c.get("verdict"))
        reason = f" {escape(str(c['reason']))}" if c.get("reason") else ""
        report = f'<a href="{href(run, REPORT_HTML)}">report</a>' if run is not None else "-"
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{escape(str(c.get(k, '-')))}</td>"
                for k in ("scenario", "engine", "subject", "seed")
            )
            + f"<td>{_verdict(verdict)}{reason}</td><td>{escape(found or 'none')}</td>"
            f"<td>{escape(str(c.get('replicas') or '-'))}</td>"
            f'<td class="num">{escape(str(c.get("seconds", "")))}</td><td>{report}</td></tr>'
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("scenario", "engine", "subject", "seed", "verdict", "anomalies", "replicas")
    )
    body = (
        f"<p>The matrix in <code>{escape(rel)}</code> (<a "
        f'href="{href(rel, MATRIX_JSON)}">matrix.json</a>).</p><table id="matrix"><thead><tr>'
        f'{head}<th class="num">s</th><th>run</th></tr></thead><tbody>{"".join(rows)}'
        "</tbody></table>"
    )
    return _page(f"Matrix: {rel}", body)


def _cell_run(root: Path, folder: Path, run_dir: Any) -> str | None:
    """The folder (under ``root``) of a matrix cell's run: where the matrix wrote it,
    ``runs/<name>`` beside matrix.json (the matrix may have been moved since)."""
    if not isinstance(run_dir, str) or not run_dir:
        return None
    for candidate in (folder / "runs" / Path(run_dir).name, Path(run_dir)):
        try:
            resolved = candidate.resolve()
        except OSError:
            continue
        if resolved.is_dir() and resolved.is_relative_to(root.resolve()):
            return resolved.relative_to(root.resolve()).as_posix()
    return None
