"""The analysis's tables, from matrix and shrink folders (pure functions of their JSON)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..store import VERSIONS, RunStore

Cell = dict[str, Any]


def load_cells(folders: Iterable[Path]) -> list[Cell]:
    """Every run of the matrices, a later folder's run replacing an earlier one's with the
    same scenario, engine, subject and seed (a re-run of that cell)."""
    merged: dict[tuple, Cell] = {}
    for folder in folders:
        path = Path(folder) / "matrix.json"
        try:
            cells = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: not a matrix result: {e}") from None
        for c in cells:
            c = {**c, "matrix": str(folder)}
            merged[(c["scenario"], c["engine"], c["subject"], c["seed"])] = c
    return list(merged.values())


def engines(cells: Sequence[Cell]) -> list[str]:
    """The engines in the table's order: embedded first, then rqlite newest first."""
    names = {c["engine"] for c in cells}
    return sorted(names, key=lambda e: (e != "embedded", _version_key(e)), reverse=False)


def _version_key(engine: str) -> tuple:
    digits = engine.rsplit("-v", 1)[-1].split(".")
    try:
        return tuple(-int(d) for d in digits)
    except ValueError:
        return (0,)


def _verdict(c: Cell) -> str:
    v = c.get("verdict") or "not run"
    return "ANOMALIES" if v == "ANOMALIES" else v


def _counts(c: Cell) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted((c.get("anomalies") or {}).items()))


def grid(cells: Sequence[Cell], subject: str) -> str:
    """Scenario rows x engine columns for one subject; each cell the seeds' verdicts."""
    mine = [c for c in cells if c["subject"] == subject]
    cols = engines(mine)
    lines = ["| scenario | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for scenario in sorted({c["scenario"] for c in mine}):
        row = []
        for e in cols:
            runs = sorted(
                (c for c in mine if (c["scenario"], c["engine"]) == (scenario, e)),
                key=lambda c: c["seed"],
            )
            row.append(_cell_text(runs))
        lines.append(f"| {scenario} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _cell_text(runs: Sequence[Cell]) -> str:
    if not runs:
        return "-"
    verdicts = [_verdict(c) for c in runs]
    seeds = "/".join(str(c["seed"]) for c in runs)
    if len(set(verdicts)) == 1 and verdicts[0] == "valid":
        return f"valid x{len(runs)} (seeds {seeds})"
    parts = []
    for c in runs:
        found = _counts(c)
        parts.append(f"{c['seed']}: {_verdict(c)}" + (f" ({found})" if found else ""))
    return "; ".join(parts)


def runs_table(cells: Sequence[Cell], subjects: Sequence[str]) -> str:
    """One row per run of the given subjects: what it found, and its replicas."""
    lines = [
        "| subject | scenario | engine | seed | verdict | anomalies | replicas |",
        "|---|---|---|---:|---|---|---|",
    ]
    chosen = [c for c in cells if c["subject"] in subjects]
    for c in sorted(chosen, key=lambda c: (c["subject"], c["scenario"], c["engine"], c["seed"])):
        lines.append(
            f"| {c['subject']} | {c['scenario']} | {c['engine']} | {c['seed']} | {_verdict(c)} "
            f"| {_counts(c) or 'none'} | {(c.get('replicas') or '-').split(' (')[0]} |"
        )
    return "\n".join(lines) + "\n"


def totals(cells: Sequence[Cell], subject: str) -> dict[str, Any]:
    """How many runs of ``subject``, by verdict, and the anomaly counts summed."""
    mine = [c for c in cells if c["subject"] == subject]
    verdicts: dict[str, int] = {}
    anomalies: dict[str, int] = {}
    for c in mine:
        verdicts[_verdict(c)] = verdicts.get(_verdict(c), 0) + 1
        for k, v in (c.get("anomalies") or {}).items():
            anomalies[k] = anomalies.get(k, 0) + v
    identical = sum(1 for c in mine if "identical" in (c.get("replicas") or ""))
    return {"runs": len(mine), "verdicts": verdicts, "anomalies": anomalies, "identical": identical}


def totals_line(cells: Sequence[Cell], subject: str) -> str:
    """``108 runs: 108 valid; replicas identical in 108``, for the report's prose."""
    t = totals(cells, subject)
    by = ", ".join(f"{n} {v}" for v, n in sorted(t["verdicts"].items()))
    found = ", ".join(f"{k} {v}" for k, v in sorted(t["anomalies"].items())) or "no anomaly"
    return (
        f"{t['runs']} runs: {by}; {found}; replicas identical after the drain in {t['identical']}"
    )


def versions(cells: Sequence[Cell]) -> dict[str, dict[str, str]]:
    """Per engine, the versions its runs recorded (engine, rqueue, Python, the harness's
    git commits: every distinct one, as matrices may come from different commits)."""
    out: dict[str, dict[str, str]] = {}
    commits: dict[str, list[str]] = {}
    for c in cells:
        if not c.get("run_dir"):
            continue
        try:
            v = RunStore(c["run_dir"]).read_json(VERSIONS)
        except (OSError, ValueError):
            continue
        e = c["engine"]
        out.setdefault(e, {k: str(v.get(k)) for k in ("engine_version", "rqueue", "python")})
        if str(v.get("git")) not in commits.setdefault(e, []):
            commits[e].append(str(v.get("git")))
    for e, found in commits.items():
        out[e]["git"] = ", ".join(found)
    return out


def versions_table(cells: Sequence[Cell]) -> str:
    lines = [
        "| engine | version reported | rqueue | Python | harness commits |",
        "|---|---|---|---|---|",
    ]
    for e, v in sorted(versions(cells).items()):
        lines.append(
            f"| {e} | {v['engine_version']} | {v['rqueue']} | {v['python']} | {v['git']} |"
        )
    return "\n".join(lines) + "\n"


def shrink_summary(folder: Path) -> dict[str, Any]:
    """A shrink folder's result (search.json) with its folder."""
    path = Path(folder) / "search.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a shrink result: {e}") from None
    data["folder"] = str(folder)
    return data


def reproducing_trial(shrink: dict[str, Any]) -> Path | None:
    """A run folder in which the smallest scenario reproduced (confirmation first)."""
    steps = shrink.get("steps") or []
    for step in reversed(steps):
        if step["change"].startswith("confirmation") or step.get("kept"):
            for t in step["tries"]:
                if t["reproduced"]:
                    return Path(t["run_dir"])
    return None


def shrinks_table(shrinks: Sequence[dict[str, Any]]) -> str:
    """One row per shrink: from what, to what, and how often the smallest reproduces."""
    lines = [
        "| subject | scenario | seeks | from | to | reproduces | search |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in shrinks:
        conf = s.get("confirmed")
        rate = f"{conf[0]} of {conf[1]}" if conf else "not confirmed"
        lines.append(
            f"| {s['subject']} | {s.get('scenario') or '-'} | {', '.join(s['kinds'])} "
            f"| {s['original']} | {s['minimal']} "
            f"| {rate} | {sum(len(x['tries']) for x in s['steps'])} runs, {s['elapsed']:.0f} s |"
        )
    return "\n".join(lines) + "\n"
