"""Fill the analysis template: tables, shrinks (files and figures copied), versions."""

from __future__ import annotations

import re
import shlex
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..store import ANOMALY_TIMELINE, REPO, SCENARIO, THROUGHPUT, RunStore
from . import tables

#: the figure copied for each shrink: the first of these the reproducing run has
FIGURES = (ANOMALY_TIMELINE, THROUGHPUT)


def report(
    template: str,
    matrices: Sequence[Path],
    shrinks: Sequence[Path],
    assets: Path,
    command: str,
) -> str:
    """The report's text: ``template`` with every ``{{name}}`` replaced."""
    cells = tables.load_cells(matrices)
    subjects = sorted({c["subject"] for c in cells} - {"rqueue"})
    found = [tables.shrink_summary(s) for s in shrinks]
    values = {
        "generated": (
            f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `{command}`."
        ),
        "versions": tables.versions_table(cells),
        "plan": plan_table(cells, matrices),
        "rqueue_grid": tables.grid(cells, "rqueue"),
        "rqueue_totals": tables.totals_line(cells, "rqueue"),
        "subjects_table": tables.runs_table(cells, subjects),
        "subjects_totals": "\n".join(f"- {s}: {tables.totals_line(cells, s)}" for s in subjects),
        "shrinks_table": tables.shrinks_table(found),
        "shrink_sections": "\n".join(shrink_section(s, assets) for s in found),
        "repro_outputs": repro_outputs(assets),
        "cost": (
            f"{len(cells)} matrix runs took {sum(c.get('seconds') or 0 for c in cells) / 60:.0f} "
            f"min and {len(found)} shrinks {sum(s['elapsed'] for s in found) / 60:.0f} min"
        ),
    }
    missing = sorted(set(re.findall(r"\{\{(\w+)\}\}", template)) - set(values))
    if missing:
        raise ValueError(f"the template names unknown placeholders: {', '.join(missing)}")
    return re.sub(r"\{\{(\w+)\}\}", lambda m: values[m.group(1)].rstrip("\n"), template)


def plan_table(cells: Sequence[dict[str, Any]], matrices: Sequence[Path]) -> str:
    """What each matrix folder holds: subjects, scenarios, engines, seeds, run length."""
    lines = [
        "| matrix folder | subjects | scenarios | engines | seeds | s per run | runs |",
        "|---|---|---|---|---|---:|---:|",
    ]
    for m in matrices:
        mine = [c for c in cells if c["matrix"] == str(m)]
        if not mine:
            continue
        scen = sorted({c["scenario"] for c in mine})
        lines.append(
            f"| `{m}` | {', '.join(sorted({c['subject'] for c in mine}))} "
            f"| {len(scen) if len(scen) > 3 else ', '.join(scen)} "
            f"| {', '.join(sorted({c['engine'] for c in mine}))} "
            f"| {' '.join(str(s) for s in sorted({c['seed'] for c in mine}))} "
            f"| {_duration(mine)} | {len(mine)} |"
        )
    return "\n".join(lines) + "\n"


def _duration(cells: Sequence[dict[str, Any]]) -> str:
    for c in cells:
        try:
            data = RunStore(c["run_dir"]).read_json(SCENARIO)
            return f"{data['duration']:g}"
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return "?"


def shrink_name(s: dict[str, Any]) -> str:
    """``subject-scenario`` (plus the rqlited binary's name when not embedded)."""
    scenario = s.get("scenario")
    if not scenario:
        found = sorted(Path(s["folder"]).glob("*-min.toml"))
        scenario = found[0].name.removesuffix("-min.toml") if found else "scenario"
    name = f"{s['subject']}-{scenario}"
    args = s.get("engine_args") or []
    if "--rqlited" in args:
        name += "-" + Path(args[args.index("--rqlited") + 1]).name
    return name


def _seed(s: dict[str, Any]) -> int:
    for step in reversed(s["steps"]):
        for t in step["tries"]:
            if t["reproduced"]:
                return int(t["seed"])
    return int(s["seed"])


def shrink_section(s: dict[str, Any], assets: Path) -> str:
    """One finding's section: what was shrunk to what, the command, the figures."""
    name = shrink_name(s)
    folder = Path(s["folder"])
    mins = sorted(folder.glob("*-min.toml"))
    if not mins:
        return f"### {name}\n\nThe shrink in `{folder}` wrote no scenario file.\n"
    scenario = assets / f"{name}-min.toml"
    shutil.copyfile(mins[0], scenario)
    shutil.copyfile(folder / "shrink.md", assets / f"{name}-shrink.md")
    rel = scenario.relative_to(REPO) if scenario.is_relative_to(REPO) else scenario
    argv = ["python", "-m", "harness", "run", str(rel), "--seed", str(_seed(s))]
    argv += ["--subject", s["subject"], *(s.get("engine_args") or [])]
    conf = s.get("confirmed")
    rate = f"{conf[0]} of {conf[1]}" if conf else "not confirmed"
    lines = [
        f"### {name}",
        "",
        f"- seeks: {', '.join(s['kinds'])}",
        f"- from: {s['original']} (run `{s.get('source') or '?'}`)",
        f"- to: {s['minimal']}",
        f"- the smallest run found it in {rate} runs on fresh seeds",
        f"- search: {sum(len(x['tries']) for x in s['steps'])} runs in {s['elapsed']:.0f} s "
        f"(budget {s['budget']:g} s); stopped: {s['stopped']}; every step: "
        f"[{name}-shrink.md](analysis/{name}-shrink.md)",
        "",
        "```sh",
        shlex.join(argv),
        "```",
        "",
    ]
    trial = tables.reproducing_trial(s)
    for fig in _figures(trial, assets, name):
        lines += [f"![{name}: {fig.stem}](analysis/{fig.name})", ""]
    return "\n".join(lines)


def _figures(trial: Path | None, assets: Path, name: str) -> list[Path]:
    """Plot the reproducing run (trials run without plots) and copy one figure: the
    anomaly timeline when the run drew one, else the throughput against the faults."""
    if trial is None or not RunStore(trial).history.is_file():
        return []
    if not (trial / FIGURES[1]).is_file():
        from ..plots import plot_run

        plot_run(trial)
    for f in FIGURES:
        if (trial / f).is_file():
            dest = assets / f"{name}-{f}"
            shutil.copyfile(trial / f, dest)
            return [dest]
    return []


def repro_outputs(assets: Path) -> str:
    """The reproduction script's output on each rqlite version it was run against."""
    parts = []
    for path in sorted(assets.glob("repro-*.txt"), reverse=True):
        version = path.stem.removeprefix("repro-")
        parts += [f"On `{version}` ([{path.name}](analysis/{path.name})):", "", "```"]
        parts += [path.read_text().rstrip("\n"), "```", ""]
    return "\n".join(parts) or (
        f"(no output of the reproduction script in {assets}: `--rerun` runs it)"
    )
