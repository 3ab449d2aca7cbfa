"""What the analysis runs: the matrices and the shrinks behind docs/analysis.md.

:data:`MATRICES` and :data:`SHRINKS` are the plan; :func:`rerun` runs it into a folder
(each matrix a ``python -m harness matrix`` child, each shrink a ``python -m harness
shrink`` child on the first run of its matrix that found the kind it seeks), so the
report can be refreshed for a new rqlite version by pointing ``--rqlited-v8`` (or
``--rqlited-v6``) at the new binary. :func:`engines_needed` says which binaries a
(partial) plan runs, so that only those are asked for.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class MatrixSpec:
    """One ``python -m harness matrix`` of the plan (engines as ``embedded``/``v8``/``v6``)."""

    name: str
    subjects: tuple[str, ...]
    engines: tuple[str, ...]
    seeds: tuple[int, ...]
    time: float
    scenarios: tuple[str, ...] = ()  # empty: every scenario
    expect_anomalies: bool = False


@dataclass(frozen=True)
class ShrinkSpec:
    """One shrink: from the first run of ``matrix`` on ``scenario`` that found ``kind``."""

    name: str
    matrix: str
    scenario: str
    subject: str
    engine: str
    kind: str
    budget: float
    extra: tuple[str, ...] = field(default=())


MATRICES: tuple[MatrixSpec, ...] = (
    MatrixSpec("rqueue", ("rqueue",), ("embedded", "v8", "v6"), (1, 2, 3), 30.0),
    MatrixSpec(
        "seed-reference",
        ("seed-reference",),
        ("embedded",),
        (1, 2, 3),
        30.0,  # --time keeps fault lengths: lease-expiry's 24 s window needs a 26 s run
        ("lease-expiry", "clock-skew", "steady"),
        True,
    ),
    MatrixSpec(
        "mutants",
        ("mutant-no-exclusivity", "mutant-lifo", "mutant-ack-wrong-row", "mutant-subquery-now"),
        ("embedded",),
        (1, 2),
        20.0,
        ("steady",),
        True,
    ),
    MatrixSpec(
        "subquery-now", ("mutant-subquery-now",), ("v8", "v6"), (1, 2), 20.0, ("steady",), True
    ),
)

SHRINKS: tuple[ShrinkSpec, ...] = (
    ShrinkSpec(
        "seed-reference-lease-expiry",
        "seed-reference",
        "lease-expiry",
        "seed-reference",
        "embedded",
        "duplicate-group-lease",
        900,
        ("--confirm", "10"),
    ),
    ShrinkSpec(
        "seed-reference-clock-skew",
        "seed-reference",
        "clock-skew",
        "seed-reference",
        "embedded",
        "duplicate-group-lease",
        900,
        ("--confirm", "10"),
    ),
    ShrinkSpec(
        "mutant-no-exclusivity",
        "mutants",
        "steady",
        "mutant-no-exclusivity",
        "embedded",
        "duplicate-group-lease",
        300,
    ),
    ShrinkSpec(
        "mutant-lifo", "mutants", "steady", "mutant-lifo", "embedded", "fifo-violation", 300
    ),
    ShrinkSpec(
        "mutant-ack-wrong-row", "mutants", "steady", "mutant-ack-wrong-row", "embedded", "lost", 300
    ),
    ShrinkSpec(
        "mutant-subquery-now-v8",
        "subquery-now",
        "steady",
        "mutant-subquery-now",
        "v8",
        "replica-divergence",
        400,
    ),
)


def engines_needed(only: Sequence[str] = ()) -> set[str]:
    """The rqlite engines (``v8``, ``v6``) the plan, or only its named parts, runs (a
    shrink needs its engine's binary to find its matrix's run); the reproduction
    (``repro``) runs on both."""
    needed: set[str] = set()
    for spec in MATRICES:
        if not only or spec.name in only:
            needed.update(e for e in spec.engines if e != "embedded")
    for shrink in SHRINKS:
        if (not only or shrink.name in only) and shrink.engine != "embedded":
            needed.add(shrink.engine)
    if not only or "repro" in only:
        needed.update(("v8", "v6"))
    return needed


def engine_spec(engine: str, v8: str | None, v6: str | None) -> str:
    """A plan engine (``embedded``, ``v8``, ``v6``) as ``harness matrix --engine`` takes it."""
    return {"embedded": "embedded", "v8": f"rqlited:{v8}", "v6": f"rqlited:{v6}"}[engine]


def matrix_argv(spec: MatrixSpec, out: Path, v8: str | None, v6: str | None) -> list[str]:
    """The ``python -m harness matrix`` command line of ``spec``."""
    argv = [sys.executable, "-m", "harness", "matrix", "--out", str(out)]
    argv += ["--time", f"{spec.time:g}", "--seeds", *map(str, spec.seeds)]
    for s in spec.subjects:
        argv += ["--subject", s]
    for e in spec.engines:
        argv += ["--engine", engine_spec(e, v8, v6)]
    for s in spec.scenarios:
        argv += ["--scenario", s]
    if spec.expect_anomalies:
        argv.append("--expect-anomalies")
    return argv


def engine_label(engine: str, v8: str | None, v6: str | None) -> str:
    """The matrix's label for a plan engine (the binary's file name for rqlited)."""
    return {"embedded": "embedded", "v8": Path(v8 or "v8").name, "v6": Path(v6 or "v6").name}[
        engine
    ]


def first_failing(matrix_json: Path, spec: ShrinkSpec, label: str) -> Path | None:
    """The folder of the first run of ``spec``'s cell (by seed) that found its kind;
    ``label`` is the engine's label in the matrix."""
    cells = json.loads(matrix_json.read_text())
    for c in sorted(cells, key=lambda c: c["seed"]):
        if (c["scenario"], c["subject"]) != (spec.scenario, spec.subject):
            continue
        if c["engine"] == label and (c.get("anomalies") or {}).get(spec.kind):
            return Path(c["run_dir"])
    return None


def shrink_argv(run_dir: Path, spec: ShrinkSpec, out: Path) -> list[str]:
    """The ``python -m harness shrink`` command line of ``spec``."""
    return [
        sys.executable, "-m", "harness", "shrink", str(run_dir), "--kind", spec.kind,
        "--budget", f"{spec.budget:g}", "--out", str(out), *spec.extra,
    ]  # fmt: skip


def rerun(
    root: Path, v8: str | None, v6: str | None, only: Sequence[str] = ()
) -> tuple[list[Path], list[Path]]:
    """Run the plan (or only the named matrices and shrinks) into ``root``.

    Returns the matrix folders and the shrink folders, for the report.
    """
    matrices, shrinks = [], []
    for spec in MATRICES:
        if only and spec.name not in only:
            continue
        out = root / "matrix" / spec.name
        print(f"analysis: matrix {spec.name} -> {out}", flush=True)
        subprocess.run(matrix_argv(spec, out, v8, v6), check=False)
        matrices.append(out)
    for spec in SHRINKS:
        if only and spec.name not in only:
            continue
        source = root / "matrix" / spec.matrix / "matrix.json"
        label = engine_label(spec.engine, v8, v6)
        run_dir = first_failing(source, spec, label) if source.is_file() else None
        if run_dir is None:
            print(f"analysis: shrink {spec.name}: no run of {source} found {spec.kind}")
            continue
        out = root / "shrink" / spec.name
        print(f"analysis: shrink {spec.name} from {run_dir} -> {out}", flush=True)
        subprocess.run(shrink_argv(run_dir, spec, out), check=False)
        shrinks.append(out)
    return matrices, shrinks
