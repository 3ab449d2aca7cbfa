"""``python -m harness``: run scenarios, list them, check histories, plot runs, manage clusters.

``run``, ``list``, ``check`` and ``plot`` add their parsers here; every other command
lives in its own module (:data:`COMMANDS` names it), which adds its parser with
``register(subparsers)``. Only the command asked for is built and imported, so a missing
optional piece (say, the Docker SDK or matplotlib) breaks only the commands that need it:
they answer with one line saying why. Each parser sets ``handler``, a function of the
parsed arguments returning the exit status.

Exit status of ``run`` and ``check``: 0 valid, 1 anomalies found, 2 the harness itself
failed (one line on stderr says why), 3 inconclusive (a run: no anomaly, but the run did
not test what it planned; the verdict says why); :mod:`harness.verdict` decides them. The
other commands give 1 and 3 their own meanings (:mod:`harness.errors` names them all).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rqueue._stdout import quiet_when_stdout_closes

from .errors import EXIT_HARNESS, EXIT_OK

DESCRIPTION = """\
A Jepsen-style harness for rqueue, a FIFO queue on rqlite: start a cluster, drive
publishers and claimers against it while faults hit it (leader kills, partitions,
pauses, clock skew, stalled workers), record every operation in a history, check the
history for lost messages, duplicate group leases, FIFO violations and stale acks, and
plot throughput and latency against the faults.

examples:
  python -m harness list
  python -m harness run leader-failover --time 30
  python -m harness run lease-expiry --subject seed-reference
  python -m harness run steady --subject mymodule:SUBJECT
  python -m harness check results/leader-failover-20260101T120000Z/history.jsonl
  python -m harness plot results/leader-failover-20260101T120000Z
  python -m harness cluster up --nodes 3 --dir /tmp/c1

exit status: 0 valid, 1 anomalies found, 2 the harness failed (the reason on stderr),
  3 inconclusive (a run, or check of a run's history: planned faults did not happen, the
  cluster was unavailable too long, or a fault window saw almost no work; the verdict
  names which)
"""


def _register_run(sub: argparse._SubParsersAction) -> None:
    from .cluster.backends import BACKENDS, DEFAULT, STARTABLE
    from .cluster.cli import add_engine_arguments, add_image_argument, add_inventory_argument
    from .subjects import SUBJECT_NAMES

    p = sub.add_parser(
        "run",
        help="run one scenario end to end and check it",
        description=(
            "Start a cluster, run the scenario's workload and fault schedule, heal every "
            "fault, drain the queue, check the history and plot it. Everything goes to a "
            "run folder (history.jsonl, check.json, scenario.json, versions.json, "
            "run.json, throughput.png, latency.png, report.md). The cluster is torn down "
            "at the end, also on Ctrl-C."
        ),
        epilog=(
            "partition scenarios need root on the local backend (network namespaces and "
            "iptables) or --backend docker. Exit status: 0 valid, 1 anomalies, 2 the "
            "harness failed, 3 inconclusive (no anomaly, but the run did not test what it "
            "planned: a fault that could not start, the cluster unavailable for more than "
            "15 s, a fault window with almost no work, or replicas not compared)."
        ),
    )
    p.add_argument(
        "scenario", help="a scenario name (see `python -m harness list`) or a .toml path"
    )
    p.add_argument(
        "--time",
        type=_positive,
        metavar="S",
        help="run the workload S seconds; the fault windows move to match but keep their "
        "lengths, and a shortened run drops (and names, up front) the windows with no room "
        "left to recover and be judged (default: the scenario's duration, 60 s for the "
        "shipped ones)",
    )
    p.add_argument(
        "--skip-fault",
        action="append",
        default=[],
        metavar="KIND",
        help="leave the scenario's faults of this kind out (repeatable), e.g. "
        "clock-skew-node with an image whose nodes share the host's clock; the run says "
        "which windows it left out, up front and in its summary",
    )
    p.add_argument(
        "--nodes", type=int, choices=(3, 5, 7), help="cluster size (default: the scenario's)"
    )
    p.add_argument("--seed", type=int, help="random seed for the workload and the nemesis")
    p.add_argument(
        "--subject",
        default="rqueue",
        metavar="SUBJECT",
        help="what to test: rqueue (default); seed-reference, the seed design's literal "
        "protocol; mutant-*, rqueue broken on purpose (the harness must catch them); "
        "a subject an installed package registers (see `python -m harness list`); or your "
        "own queue client as package.module:ATTRIBUTE, importable from PYTHONPATH "
        "(docs/example_subject/README.md). Built in: " + ", ".join(SUBJECT_NAMES),
    )
    add_engine_arguments(p)
    p.add_argument(
        "--backend",
        default=DEFAULT,
        choices=STARTABLE,
        help="; ".join(f"{n}: {BACKENDS[n].summary}" for n in STARTABLE),
    )
    add_image_argument(p)
    add_inventory_argument(p)
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="run folder (new or empty); default results/<scenario>-<timestamp>",
    )
    p.add_argument("--no-progress", action="store_true", help="no live progress line")
    p.add_argument(
        "--no-plots",
        action="store_true",
        help="skip the plots and report.md (report.html says so; draw them later with "
        "`python -m harness plot`)",
    )
    p.set_defaults(handler=_run)


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return v


def _run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .cluster.backend import ClusterOptions
    from .cluster.backends import backend_of
    from .cluster.base import ClusterError
    from .progress import summary_table
    from .runner import RunOptions, run

    asked = ClusterOptions(image=args.image, inventory=args.inventory, rqlited=args.rqlited)
    try:
        backend_of(args.backend).check(asked)
    except ClusterError as e:
        print(f"harness: error: {e}", file=sys.stderr)
        return EXIT_HARNESS
    opts = RunOptions(
        scenario=args.scenario,
        time=args.time,
        nodes=args.nodes,
        seed=args.seed,
        subject=args.subject,
        engine=args.engine,
        rqlited=args.rqlited,
        backend=args.backend,
        image=args.image,
        inventory=args.inventory,
        out=args.out,
        progress=not args.no_progress,
        plots=not args.no_plots,
        skip_faults=tuple(args.skip_fault),
    )
    result = run(opts)
    if result.run_dir is not None and (result.summary.get("ops") or result.check):
        Console().print(summary_table(result.summary))
    if result.exit_code == EXIT_HARNESS:
        print(f"harness: error: {result.reason}", file=sys.stderr)
    elif result.summary.get("inconclusive"):
        print(f"harness: inconclusive: {result.summary['inconclusive']}", file=sys.stderr)
    return result.exit_code


def _register_list(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list",
        help="list the scenarios and subjects with a one-line description each",
        description=(
            "List the scenarios in harness/scenarios/*.toml (name, nodes, duration, what it does), "
            "the fault kinds (what each needs of the cluster, the backends that can run it) "
            "and the subjects: built in, and those installed packages register under the "
            "entry point group rqueue.harness.subjects."
        ),
    )
    p.set_defaults(handler=_list)


def _list(args: argparse.Namespace) -> int:
    from .cluster.base import DISK
    from .scenario import ScenarioError, list_scenarios

    try:
        scenarios = list_scenarios()
    except ScenarioError as e:
        print(f"harness: error: {e}", file=sys.stderr)
        return EXIT_HARNESS
    width = max((len(s.name) for s in scenarios), default=0)
    for s in scenarios:
        root = "  [root/docker]" if s.needs_netns else "  [root]" if DISK in s.needs else ""
        print(f"{s.name:<{width}}  {s.nodes} nodes {s.duration:>4g}s  {s.description}{root}")
    print("\nfault kinds (what each needs of the cluster; the backends that have it):")
    for kind, needs, backends in _fault_kind_rows():
        print(f"  {kind}  {needs}  {', '.join(backends) or 'none'}")
    print(
        "  (at best: partitions, links and disks need root; docker skews clocks with the "
        "project's image only)"
    )
    print("\nsubjects (--subject NAME, or --subject package.module:ATTRIBUTE):")
    for name, text in _subject_lines():
        print(f"  {name}  {text}")
    return EXIT_OK


def _fault_kind_rows() -> list[tuple[str, str, list[str]]]:
    """(kind, what it needs, the backends that can run it), kinds and needs padded."""
    from .cluster.backends import capabilities
    from .faults.capabilities import kinds_table

    rows = kinds_table(capabilities())
    kw = max(len(k) for k, _, _ in rows)
    nw = max(len(n) for _, n, _ in rows)
    return [(k.ljust(kw), n.ljust(nw), b) for k, n, b in rows]


def _subject_lines() -> list[tuple[str, str]]:
    """(name, description) of every built-in and installed subject, names padded."""
    from .subjects import ENTRY_POINT_GROUP, SUBJECT_NAMES, get_subject, installed_subjects

    rows: list[tuple[str, str]] = []
    for name in SUBJECT_NAMES:
        try:
            rows.append((name, get_subject(name).description))
        except ImportError as e:
            rows.append((name, f"(unavailable: {e})"))
    for name, spec in installed_subjects().items():
        try:
            text = get_subject(name).description or spec
        except ValueError as e:  # SubjectError: say why, list the others anyway
            text = f"(cannot load: {e})"
        rows.append((name, f"{text}  [installed: {spec}, {ENTRY_POINT_GROUP}]"))
    width = max((len(n) for n, _ in rows), default=0)
    return [(n.ljust(width), t) for n, t in rows]


def _register_check(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="check a history file for anomalies",
        description=(
            "Read a history.jsonl (the format in docs/history-format.md; hand-written files are "
            "fine), print a summary and write check.json beside it. In a run folder the run "
            "is judged again as the run judged it: its coverage is recomputed from "
            "scenario.json. Exit status: 0 valid, 1 anomalies, 2 the file cannot be read "
            "(the line and what is wrong) or the run failed, 3 the run is inconclusive."
        ),
    )
    p.add_argument("file", type=Path, help="a history.jsonl")
    p.set_defaults(
        handler=lambda a: importlib.import_module("harness.check_cli").main_check(a.file)
    )


def _register_plot(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plot",
        help="(re)draw a run folder's plots and report",
        description=(
            "Draw throughput.png and latency.png (and lease timelines around anomalies) "
            "from RUN_DIR/history.jsonl and write RUN_DIR/report.md."
        ),
    )
    p.add_argument("run_dir", type=Path, help="a run folder holding history.jsonl")
    p.set_defaults(handler=_plot)


def _plot(args: argparse.Namespace) -> int:
    from .plots import main_plot

    return main_plot(args.run_dir)


def _external(module: str) -> Callable[[argparse._SubParsersAction], None]:
    def register(sub: argparse._SubParsersAction) -> None:
        importlib.import_module(module).register(sub)

    return register


#: name -> (one-line help, how to add its parser)
COMMANDS: dict[str, tuple[str, Callable[[argparse._SubParsersAction], None]]] = {
    "run": ("run one scenario end to end and check it", _register_run),
    "list": ("list the scenarios and subjects", _register_list),
    "check": ("check a history file for anomalies", _register_check),
    "plot": ("(re)draw a run folder's plots and report", _register_plot),
    "cluster": (
        "start, inspect and stop local or Docker clusters",
        _external("harness.cluster.cli"),
    ),
    # the benchmarks: harness/bench/, one register() per command
    "bench": ("measure claim throughput and latency", _external("harness.bench")),
    "bench-polling": ("long polling vs a sleep loop", _external("harness.bench.polling")),
    "bench-batch": ("claim_many vs single claims", _external("harness.bench.batch")),
    "matrix": ("run every scenario on each engine and seed", _external("harness.matrix")),
    "sim": ("simulate a scenario deterministically in virtual time", _external("harness.sim.cli")),
    "shrink": ("shrink a failing run to a minimal reproduction", _external("harness.shrink")),
    "analysis": (
        "write docs/analysis.md from matrix and shrink folders",
        _external("harness.analysis"),
    ),
    "serve": ("list the runs in a browser, with their reports", _external("harness.html.serve")),
    "image": ("build the node image for Docker (nothing pulled)", _external("harness.image")),
    "hosts": ("local SSH test hosts for --backend ssh", _external("harness.cluster.ssh.hosts_cli")),
}


def build_parser(command: str | None) -> argparse.ArgumentParser:
    """The parser, with the full parser only for ``command`` (the others are stubs, for
    ``--help``); a command whose module cannot be imported gets a stub that says why."""
    parser = argparse.ArgumentParser(
        prog="python -m harness",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the harness does")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (help_text, register) in COMMANDS.items():
        if name == command:
            try:
                register(sub)
                continue
            except ImportError as e:
                reason = f"the {name!r} command is unavailable: {e}"
                stub = sub.add_parser(name, help=help_text, add_help=False)
                stub.set_defaults(handler=lambda _a, r=reason: _unavailable(r))
                stub.add_argument("rest", nargs=argparse.REMAINDER)
                continue
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _unavailable(reason: str) -> int:
    print(f"harness: error: {reason}", file=sys.stderr)
    return EXIT_HARNESS


def _command_of(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command; returns its exit status (141, quietly,
    when standard output's reader goes away: ``python -m harness list | head -2``)."""
    return quiet_when_stdout_closes(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(_command_of(argv)).parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    handler = getattr(args, "handler", None) or getattr(args, "func", None)
    if handler is None:
        return _unavailable(f"the {args.command!r} command is not available yet")
    return int(handler(args))
