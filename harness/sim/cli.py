"""``python -m harness sim``: a scenario in deterministic simulation (docs/simulation.md).

One seed (``--seed N``) writes a run folder as ``harness run`` does and exits with its
verdict's status; a range (``--seeds A-B``) runs the seeds over the cores and prints a
table of verdicts, failing seeds first, each with the command that replays it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import EXIT_HARNESS, HarnessError
from ..scenario import ScenarioError
from ..subjects import SubjectError
from .run import SimOptions, simulate


def register(sub: argparse._SubParsersAction) -> None:
    from .subjects import SIMULATED

    p = sub.add_parser(
        "sim",
        help="simulate a scenario deterministically in virtual time",
        description=(
            "Run SCENARIO in one process, in virtual time, every choice drawn from the seed: "
            "rqueue's own core against simulated rqlite nodes (Raft, forwarding, rewriting, "
            "SQLite), faults as the scenario or [chaos] draws them. The same seed gives the "
            "same history, byte for byte. Simulated subjects: " + ", ".join(SIMULATED) + "."
        ),
    )
    p.add_argument("scenario", help="a scenario name or a .toml file")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, default=1, help="the seed of one run (default 1)")
    seeds.add_argument("--seeds", metavar="A-B", help="run every seed from A to B (a table)")
    p.add_argument("--subject", default="rqueue", help="the queue under test (default rqueue)")
    p.add_argument("--time", type=float, help="scale the scenario to this many seconds")
    p.add_argument("--out", type=Path, help="the run folder (one seed) or parent folder (seeds)")
    p.add_argument("--no-plots", action="store_true", help="write no report.md")
    p.add_argument("--no-progress", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--jobs", type=int, help="processes for --seeds (default: the cores)")
    p.add_argument(
        "--core-faults",
        type=float,
        default=0.0,
        metavar="P",
        help="fault points inside rqueue's core: between two steps of an operation, a "
        "pause with probability P, the client dying with P/5 (default 0: none)",
    )
    p.set_defaults(handler=_sim)


def _sim(args: argparse.Namespace) -> int:
    try:
        if args.seeds:
            from .sweep import parse_seeds, sweep

            return sweep(args, parse_seeds(args.seeds))
        opts = SimOptions(
            args.scenario,
            args.seed,
            args.subject,
            args.time,
            args.out,
            not args.no_plots,
            args.core_faults,
        )
        result = simulate(opts)
    except (ScenarioError, SubjectError, HarnessError, FileExistsError, ValueError) as e:
        print(f"harness sim: error: {e}", file=sys.stderr)
        return EXIT_HARNESS
    found = {k: v for k, v in result.anomalies.items() if v}
    print(f"run folder: {result.run_dir}")
    if result.reason:
        print(f"harness sim: error: {result.reason}", file=sys.stderr)
    print(
        f"verdict: exit {result.exit_code}; anomalies: {found or 'none'}; "
        f"{result.virtual:.1f} virtual s in {result.seconds:.2f} s ({result.events} events)"
    )
    return result.exit_code
