"""``python -m harness sim SCENARIO --seeds A-B``: many seeds over the cores, one table.

Each seed is one simulated run (:func:`harness.sim.run.simulate`) in a worker process;
the folders of failing seeds are kept under the sweep's folder (a valid seed's is
removed: its command replays it exactly). The table lists failing seeds first, each with
the command that replays it, then a count of the rest; ``sweep.json`` keeps every row.
Exit status: 0 every seed valid, 1 some seed found anomalies, 2 the harness failed on
some seed, 3 some seed inconclusive and none failed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import EXIT_HARNESS, EXIT_INCONCLUSIVE, EXIT_OK
from .run import SimOptions, simulate


@dataclass(frozen=True)
class Row:
    """One seed's outcome."""

    seed: int
    exit: int
    anomalies: dict[str, int]
    seconds: float
    folder: str | None
    error: str | None = None


def parse_seeds(text: str) -> range:
    """``A-B`` (inclusive) or one seed ``N``; :class:`ValueError` naming the form."""
    lo, sep, hi = text.partition("-")
    try:
        a, b = int(lo), int(hi) if sep else int(lo)
    except ValueError:
        raise ValueError(f"--seeds: expected A-B (e.g. 1-100), got {text!r}") from None
    if b < a:
        raise ValueError(f"--seeds: {text!r} is empty (B is below A)")
    return range(a, b + 1)


def _one(job: tuple[str, int, str, float | None, str, float]) -> Row:
    scenario, seed, subject, scaled, parent, core_faults = job
    folder = Path(parent) / f"seed-{seed}"
    try:
        opts = SimOptions(scenario, seed, subject, scaled, folder, False, core_faults)
        r = simulate(opts)
    except Exception as e:  # the harness failed on this seed: say so, go on
        return Row(seed, EXIT_HARNESS, {}, 0.0, str(folder), f"{type(e).__name__}: {e}")
    found = {k: v for k, v in r.anomalies.items() if v}
    if r.reason:
        return Row(seed, r.exit_code, found, round(r.seconds, 3), str(folder), r.reason)
    if r.exit_code == EXIT_OK:
        shutil.rmtree(folder, ignore_errors=True)
        return Row(seed, r.exit_code, found, round(r.seconds, 3), None)
    return Row(seed, r.exit_code, found, round(r.seconds, 3), str(folder))


def _noted(row: Row, done: int, total: int) -> Row:
    """Say on stderr, as it comes, a seed that did not end valid, and every hundredth."""
    if row.exit != EXIT_OK:
        what = ", ".join(f"{k} {v}" for k, v in sorted(row.anomalies.items())) or row.error
        print(f"seed {row.seed}: exit {row.exit}: {what}", file=sys.stderr, flush=True)
    if (done + 1) % 100 == 0:
        print(f"{done + 1} of {total} seeds done", file=sys.stderr, flush=True)
    return row


def replay(args: argparse.Namespace, seed: int) -> str:
    """The command that replays ``seed`` of this sweep."""
    cmd = f"python -m harness sim {args.scenario} --seed {seed}"
    if args.subject != "rqueue":
        cmd += f" --subject {args.subject}"
    if args.time is not None:
        cmd += f" --time {args.time:g}"
    if getattr(args, "core_faults", 0.0):
        cmd += f" --core-faults {args.core_faults:g}"
    return cmd


def sweep(args: argparse.Namespace, seeds: range) -> int:
    """Run ``seeds`` and print the table; the sweep's exit status."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    parent = Path(args.out or f"results/sim-{args.scenario}-{args.subject}-{stamp}")
    parent.mkdir(parents=True, exist_ok=True)
    faults = getattr(args, "core_faults", 0.0)
    jobs = [(args.scenario, s, args.subject, args.time, str(parent), faults) for s in seeds]
    workers = max(1, min(args.jobs or os.cpu_count() or 1, len(jobs)))
    started = time.perf_counter()
    rows: list[Row] = []
    if workers == 1:
        for job in jobs:
            rows.append(_noted(_one(job), len(rows), len(jobs)))
    else:
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            for row in pool.imap_unordered(_one, jobs, chunksize=1):
                rows.append(_noted(row, len(rows), len(jobs)))
    wall = time.perf_counter() - started
    rows.sort(key=lambda r: (r.exit == EXIT_OK, r.seed))
    print(table(rows, args))
    cpu = sum(r.seconds for r in rows)
    print(
        f"{len(rows)} seeds in {wall:.1f} s on {workers} processes "
        f"({cpu / max(1, len(rows)):.2f} s per seed); folder: {parent}"
    )
    (parent / "sweep.json").write_text(
        json.dumps({"args": _args(args), "rows": [asdict(r) for r in rows]}, indent=1) + "\n"
    )
    exits = {r.exit for r in rows}
    for code in (1, EXIT_HARNESS, EXIT_INCONCLUSIVE):
        if code in exits:
            return code
    return EXIT_OK


def table(rows: list[Row], args: argparse.Namespace) -> str:
    """Failing seeds first, each with its replay command; then how many were valid."""
    names = {0: "valid", 1: "ANOMALIES", EXIT_HARNESS: "HARNESS FAILED", 3: "inconclusive"}
    lines = [f"{'seed':>6}  {'verdict':<15} {'anomalies':<40} replay"]
    valid = 0
    for r in rows:
        if r.exit == EXIT_OK:
            valid += 1
            continue
        what = ", ".join(f"{k} {v}" for k, v in sorted(r.anomalies.items())) or (r.error or "")
        verdict = names.get(r.exit, str(r.exit))
        lines.append(f"{r.seed:>6}  {verdict:<15} {what[:40]:<40} {replay(args, r.seed)}")
    lines.append(f"{valid} of {len(rows)} seeds valid")
    return "\n".join(lines)


def _args(args: argparse.Namespace) -> dict[str, Any]:
    keep = ("scenario", "seeds", "subject", "time", "jobs", "core_faults")
    return {k: getattr(args, k, None) for k in keep}
