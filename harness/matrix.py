"""``python -m harness matrix``: every scenario x engine x subject x seed, one table.

Each cell is one ``python -m harness run`` in a child process (its own run folder under
``OUT/runs/``), so a run that crashes or hangs costs that cell only; the matrix goes on
and says so. Progress goes to the terminal one line per run; the results go to
``OUT/matrix.json`` (every run: exit status, verdict, anomaly counts, replica
comparison, folder) and ``OUT/matrix.md`` (the table). Ctrl-C stops after tearing down
the run in progress (the child's own clean-up), keeping what was measured.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from .cluster.backends import matrix_engine, matrix_forms
from .errors import (
    EXIT_ANOMALIES,
    EXIT_HARNESS,
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_SOME_FAILED,
    EXIT_VALID,
)
from .interrupts import Terminated, sigterm_unwinds
from .store import SCENARIO, RunStore

#: how long an interrupted run gets to tear down its cluster before it is killed
TEARDOWN_SECONDS = 60.0

VERDICTS = {
    EXIT_VALID: "valid",
    EXIT_ANOMALIES: "ANOMALIES",
    EXIT_HARNESS: "harness failed",
    EXIT_INCONCLUSIVE: "inconclusive",
}


ENGINE_FORMS = matrix_forms()


@dataclass(frozen=True)
class Engine:
    """An engine as the run command takes it, with a label for the table."""

    label: str
    args: tuple[str, ...]

    @classmethod
    def parse(cls, spec: str) -> Engine:
        """``embedded``, ``rqlited:PATH`` (the label is the binary's file name),
        ``docker:IMAGE`` (the Docker backend with that image) or ``ssh:INVENTORY`` (the
        SSH backend on that inventory's hosts; the label is ``ssh``): each backend reads
        its own forms (:func:`harness.cluster.backends.matrix_engine`)."""
        label, args = matrix_engine(spec)
        return cls(label, args)


@dataclass
class Cell:
    """One run of the matrix and what came of it."""

    scenario: str
    engine: str
    subject: str
    seed: int
    exit: int | None = None
    verdict: str = "not run"
    anomalies: dict[str, int] | None = None
    replicas: str | None = None
    reason: str | None = None
    seconds: float = 0.0
    run_dir: str | None = None
    windows: int = 0  # fault windows the run planned, before --time dropped any
    dropped: int = 0  # of those, the ones --time dropped (no room left in the run)

    @property
    def shown_verdict(self) -> str:
        """The verdict as the table shows it: with the reason, and with how much of the
        fault schedule ran when ``--time`` dropped some (a "valid" run tested only that)."""
        text = self.verdict if not self.reason else f"{self.verdict}: {self.reason}"
        if self.dropped:
            text += (
                f" (only {self.windows - self.dropped} of {self.windows} fault windows ran: "
                f"{self.dropped} dropped by --time)"
            )
        return text


def run_cell(cell: Cell, engine: Engine, seconds: float, out: Path, timeout: float) -> Cell:
    """Run one cell in a child process and read its run folder."""
    run_dir = out / "runs" / f"{cell.scenario}-{cell.engine}-{cell.subject}-{cell.seed}"
    argv = [
        sys.executable, "-m", "harness", "run", cell.scenario,
        "--time", f"{seconds:g}", "--seed", str(cell.seed), "--subject", cell.subject,
        *engine.args, "--out", str(run_dir), "--no-progress",
    ]  # fmt: skip
    t = time.monotonic()
    try:
        code, stderr = run_child(argv, timeout)
        cell.exit = code
        tail = stderr.strip().splitlines()
        cell.reason = tail[-1] if code == EXIT_HARNESS and tail else None
    except subprocess.TimeoutExpired:
        cell.exit, cell.reason = EXIT_HARNESS, f"no result within {timeout:g} s"
    cell.seconds = round(time.monotonic() - t, 1)
    cell.run_dir = str(run_dir)
    cell.verdict = VERDICTS.get(cell.exit, f"exit {cell.exit}")
    summary = RunStore(run_dir).summary()
    cell.anomalies = {k: v for k, v in (summary.get("anomalies") or {}).items() if v}
    replicas = summary.get("replicas")
    cell.replicas = replicas.split(" (")[0] if isinstance(replicas, str) else None
    cell.windows, cell.dropped = _schedule(run_dir)
    if cell.exit == EXIT_INCONCLUSIVE:
        cell.reason = summary.get("inconclusive") or cell.reason
    return cell


def run_child(argv: Sequence[str], timeout: float) -> tuple[int, str]:
    """Run ``argv`` to its end; return its exit status and standard error.

    On Ctrl-C (or SIGTERM, which :func:`~harness.interrupts.sigterm_unwinds` turns into
    an exception) the child is asked to stop with SIGINT and given
    :data:`TEARDOWN_SECONDS` to tear down what it started (a Docker cell's containers
    outlive a killed child) before it is killed; then the interruption goes on. On
    ``timeout`` the child gets the same treatment and ``TimeoutExpired`` is raised.
    """
    # a session of its own: a terminal's Ctrl-C reaches the matrix alone, which passes
    # exactly one SIGINT on (a second one would cut the child's clean-up short)
    with subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except (KeyboardInterrupt, Terminated, subprocess.TimeoutExpired):
            _stop(proc)
            raise
        return proc.returncode, stderr or ""


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGINT, then wait up to TEARDOWN_SECONDS for the child's own clean-up, then kill."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.communicate(timeout=TEARDOWN_SECONDS)
    except subprocess.TimeoutExpired:
        print(
            f"matrix: the run did not stop within {TEARDOWN_SECONDS:g} s of SIGINT; killed"
            " (its cluster is abandoned now: `python -m harness cluster down --all` reaps"
            " clusters whose run is gone, never a live one)",
            file=sys.stderr,
        )
        proc.kill()
        proc.communicate()


def _schedule(run_dir: Path) -> tuple[int, int]:
    """(fault windows planned, dropped by --time) from the run's resolved scenario."""
    try:
        resolved = RunStore(run_dir).read_json(SCENARIO)
    except (OSError, ValueError):
        return 0, 0
    kept, dropped = len(resolved.get("faults") or []), len(resolved.get("dropped") or [])
    return kept + dropped, dropped


def table(cells: Iterable[Cell]) -> str:
    """The Markdown table of the matrix: one row per run."""
    lines = [
        "| scenario | engine | subject | seed | verdict | anomalies | replicas | s |",
        "|---|---|---|---:|---|---|---|---:|",
    ]
    for c in cells:
        found = ", ".join(f"{k} {v}" for k, v in sorted((c.anomalies or {}).items())) or "none"
        lines.append(
            f"| {c.scenario} | {c.engine} | {c.subject} | {c.seed} | {c.shown_verdict} "
            f"| {found} | {c.replicas or '-'} | {c.seconds:g} |"
        )
    return "\n".join(lines) + "\n"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "matrix",
        help="run every scenario on each engine and seed, one table",
        description=(
            "Run each scenario (default: all of `python -m harness list`) on each engine "
            "with each seed, one child `python -m harness run` per cell, and write "
            "OUT/matrix.json and OUT/matrix.md. Exit status: 0 every run as expected "
            "(valid, or anomalies for a subject given with --expect-anomalies), 1 some "
            "run was not, 2 the matrix could not run."
        ),
    )
    p.add_argument("--scenario", action="append", help="a scenario (repeatable; default all)")
    p.add_argument(
        "--engine",
        action="append",
        metavar="SPEC",
        help=f"{ENGINE_FORMS} (repeatable; default embedded)",
    )
    p.add_argument("--subject", action="append", help="subject (repeatable; default rqueue)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="seeds (default 1 2 3)")
    p.add_argument("--time", type=float, default=30.0, help="seconds per run (default 30)")
    p.add_argument("--out", type=Path, required=True, help="folder for the table and runs")
    p.add_argument(
        "--expect-anomalies",
        action="store_true",
        help="the subjects are broken on purpose: a run is as expected when it finds anomalies",
    )
    p.set_defaults(handler=main_matrix)


def main_matrix(args: argparse.Namespace) -> int:
    from .scenario import ScenarioError, list_scenarios

    try:
        engines = [Engine.parse(s) for s in (args.engine or ["embedded"])]
        names = args.scenario or [s.name for s in list_scenarios()]
    except (ValueError, ScenarioError) as e:
        print(f"harness: error: {e}", file=sys.stderr)
        return EXIT_HARNESS
    args.out.mkdir(parents=True, exist_ok=True)
    subjects = args.subject or ["rqueue"]
    plan = [
        (Cell(n, e.label, subj, seed), e)
        for n in names
        for e in engines
        for subj in subjects
        for seed in args.seeds
    ]
    timeout = args.time * 4 + 180
    done: list[Cell] = []
    try:
        with sigterm_unwinds():
            for i, (cell, engine) in enumerate(plan, 1):
                print(
                    f"[{i}/{len(plan)}] {cell.scenario} on {cell.engine}, {cell.subject}, "
                    f"seed {cell.seed} ...",
                    end=" ",
                    flush=True,
                )
                done.append(run_cell(cell, engine, args.time, args.out, timeout))
                print(f"{cell.shown_verdict} ({cell.seconds:g} s)", flush=True)
                _write(args.out, done)
    except (KeyboardInterrupt, Terminated):
        print("\ninterrupted: the table keeps the runs that finished", file=sys.stderr)
    _write(args.out, done)
    print(f"matrix: {args.out / 'matrix.md'}")
    wanted = EXIT_ANOMALIES if args.expect_anomalies else EXIT_VALID
    return EXIT_OK if done and all(c.exit == wanted for c in done) else EXIT_SOME_FAILED


def _write(out: Path, cells: Sequence[Cell]) -> None:
    (out / "matrix.json").write_text(json.dumps([asdict(c) for c in cells], indent=1) + "\n")
    (out / "matrix.md").write_text(table(cells))
