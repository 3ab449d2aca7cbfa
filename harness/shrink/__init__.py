"""``python -m harness shrink RUN_DIR``: from a failing run to a minimal reproduction.

Reads the run folder (``run.json``: subject, engine, seed; ``scenario.json``: the
resolved scenario; the anomaly kinds it found), searches for the smallest scenario that
still finds one of those kinds (:mod:`harness.shrink.search`), and writes to
``RUN_DIR/shrink/``: ``<scenario>-min.toml`` (the smallest scenario), ``shrink.md``
(the command that reproduces it, how often it did out of N fresh tries, and the whole
search as a table), ``search.json`` (the same as data), ``candidates/`` and ``trials/``
(every scenario tried and every run's folder).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from harness.wording import plural

from ..cluster.backends import DEFAULT
from ..errors import EXIT_HARNESS, EXIT_NOT_REPRODUCED, EXIT_OK, HarnessError
from ..interrupts import Terminated, sigterm_unwinds
from ..store import RUN, SCENARIO, RunStore
from .search import Options, Search, table
from .steps import describe, validate
from .trials import run_argv


class ShrinkError(HarnessError, ValueError):
    """The run folder cannot be shrunk; the message says why."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "shrink",
        help="shrink a failing run to a minimal reproduction",
        description=(
            "From a run folder whose check found anomalies, search for the smallest "
            "scenario that still finds the same kind: fewer and shorter faults, a shorter "
            "run, fewer workers and groups, fewer nodes. Each reduction is kept only when "
            "it reproduces in a majority of --tries runs (the run's seed first, then seeds "
            "no earlier step used). The smallest is then run --confirm times on fresh "
            "seeds; if it reproduces in fewer than most, the reduction before it is "
            "confirmed instead, and so on. Writes "
            "RUN_DIR/shrink/ (or --out): the scenario file, shrink.md with the command and "
            "the search table, search.json, every candidate and trial run."
        ),
        epilog=(
            "Exit status: 0 the smallest scenario reproduced in at least one confirmation "
            "run, 3 it never did, 2 the shrink could not run or was interrupted (what was "
            "measured is written anyway; every trial's cluster is torn down)."
        ),
    )
    p.add_argument("run_dir", type=Path, help="a run folder whose check found anomalies")
    p.add_argument(
        "--kind",
        action="append",
        metavar="KIND",
        help="the anomaly kind to keep (repeatable; default: any kind the run found)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=900.0,
        metavar="S",
        help="seconds for the whole shrink, confirmation included (default 900)",
    )
    p.add_argument("--tries", type=int, default=3, help="runs per reduction (default 3)")
    p.add_argument(
        "--confirm", type=int, default=5, help="runs of the smallest on fresh seeds (default 5)"
    )
    p.add_argument("--out", type=Path, help="folder for the results (default RUN_DIR/shrink)")
    p.set_defaults(handler=main_shrink)


def load_run(run_dir: Path) -> dict[str, Any]:
    """The run's options, scenario and anomaly counts (``ShrinkError`` if unusable)."""
    try:
        store = RunStore(run_dir)
        run, data = store.read_json(RUN), store.read_json(SCENARIO)
    except OSError as e:
        raise ShrinkError(f"{run_dir} is not a run folder: {e}") from None
    except ValueError as e:
        raise ShrinkError(f"{run_dir}: run.json or scenario.json is not JSON: {e}") from None
    summary = run.get("summary") or {}
    anomalies = {k: v for k, v in (summary.get("anomalies") or {}).items() if v}
    opts = run.get("options") or {}
    if "workload" not in data or "faults" not in data:
        raise ShrinkError(f"{run_dir}/scenario.json has no workload or faults")
    try:
        validate(data)
    except ValueError as e:
        raise ShrinkError(f"{run_dir}/scenario.json is not a runnable scenario: {e}") from None
    return {"options": opts, "scenario": data, "anomalies": anomalies}


def engine_args(opts: dict[str, Any]) -> tuple[str, ...]:
    """The run command's engine and backend arguments the original run used (a simulated
    run's: ``--sim``, then its own, docs/simulation.md)."""
    if opts.get("backend") == "sim":
        faults = opts.get("core_faults") or 0
        return ("--sim", *(("--core-faults", f"{faults:g}") if faults else ()))
    args: list[str] = ["--engine", opts.get("engine") or "embedded"]
    if opts.get("rqlited"):
        args += ["--rqlited", str(opts["rqlited"])]
    if opts.get("backend") and opts["backend"] != DEFAULT:
        args += ["--backend", opts["backend"]]
    for option in ("image", "inventory"):  # the backend's own (docker, ssh)
        if opts.get(option):
            args += [f"--{option}", str(opts[option])]
    return tuple(args)


def main_shrink(args: argparse.Namespace) -> int:
    try:
        run = load_run(args.run_dir)
        kinds = tuple(args.kind or sorted(run["anomalies"]))
        if not run["anomalies"]:
            raise ShrinkError(f"{args.run_dir}: the run found no anomalies, nothing to shrink")
        missing = [k for k in kinds if k not in run["anomalies"]]
        if missing:
            found = ", ".join(sorted(run["anomalies"]))
            raise ShrinkError(f"--kind {missing[0]}: the run did not find it (found: {found})")
        if args.tries < 1 or args.confirm < 1 or args.budget <= 0:
            raise ShrinkError("--tries and --confirm must be >= 1 and --budget > 0")
        out = args.out or args.run_dir / "shrink"
        if out.exists() and any(out.iterdir()):
            raise ShrinkError(f"{out} is not empty; give --out a new or empty folder")
    except ShrinkError as e:
        print(f"harness: error: {e}", file=sys.stderr)
        return EXIT_HARNESS
    o = run["options"]
    exact = o.get("backend") == "sim"  # a seed replays exactly: one try, no confirmation
    search = Search(
        Options(
            data=run["scenario"],
            subject=o.get("subject") or "rqueue",
            engine_args=engine_args(o),
            kinds=kinds,
            seed=int(o.get("seed") or 1),
            out=out,
            budget=args.budget,
            tries=1 if exact else args.tries,
            confirm=1 if exact else args.confirm,
            source=str(args.run_dir),
        ),
        say=lambda text: print(text, end="", flush=True),
    )
    interrupted = False
    try:
        with sigterm_unwinds():
            search.run()
            if exact:
                search.replayed()
            else:
                search.confirm()
    except (KeyboardInterrupt, Terminated):
        interrupted = True
        search.stopped = "interrupted (Ctrl-C or SIGTERM); the trial in progress was torn down"
        print(f"\nshrink: {search.stopped}", file=sys.stderr)
    text = write_results(search)
    print(text.split("\n## The search")[0])
    if interrupted:
        return EXIT_HARNESS
    conf = search.confirmation
    return EXIT_OK if conf and conf.reproduced else EXIT_NOT_REPRODUCED


def command(search: Search) -> str:
    """The shell command that runs the smallest scenario with a seed that reproduced."""
    o = search.opts
    argv = run_argv(search.final_file(), search.reproducing_seed(), o.subject, o.engine_args)
    return shlex.join(argv)


def write_results(search: Search) -> str:
    """Write search.json, shrink.md and the final scenario file; returns shrink.md's text."""
    o = search.opts
    (o.out / "search.json").write_text(json.dumps(search.to_json(), indent=1) + "\n")
    conf = search.confirmation
    exact = o.engine_args[:1] == ("--sim",)
    rate = (
        f"{conf.reproduced} of {plural(len(conf.tries), 'run')} on fresh seeds "
        f"({', '.join(str(t.seed) for t in conf.tries)}) found {' or '.join(o.kinds)}"
        if conf and conf.tries
        else "not confirmed (the shrink stopped before the confirmation runs)"
    )
    rule = (
        f"a reduction is kept when it reproduces in a majority of {o.tries} runs "
        f"(seed {o.seed} first, then seeds no earlier step used; stopping once decided); "
        f"the smallest kept scenario that reproduces in most of {o.confirm} runs on fresh "
        "seeds is the result"
    )
    if exact:
        found = bool(conf and conf.reproduced)
        rate = f"{'yes' if found else 'no'}, on seed {o.seed}: a simulated seed replays exactly"
        rule = (
            f"a simulated run: each reduction is run once, on seed {o.seed}, and kept when "
            "it finds the kind sought; the smallest kept is the result (no confirmation runs)"
        )
    text = (
        f"# Shrink of {search.base_name} ({o.subject})\n\n"
        f"- run shrunk: `{o.source}`\n"
        f"- seeks: {', '.join(o.kinds)}\n"
        f"- from: {describe(o.data)}\n"
        f"- to: {describe(search.best)}\n"
        f"- scenario file: `{search.final_file()}`\n"
        f"- reproduces: {rate}\n"
        f"- command: `{command(search)}`\n"
        f"- search: {plural(len(search.steps), 'step')}, {plural(search.trial_count, 'run')}, "
        f"{search.elapsed():.0f} s of a {o.budget:g} s budget; stopped: {search.stopped}\n"
        f"- rule: {rule}\n"
        f"\n## The search\n\n" + table(search.steps, o.tries)
    )
    (o.out / "shrink.md").write_text(text)
    return text
