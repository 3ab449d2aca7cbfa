"""The ``python -m harness bench`` command: options, the cluster, the files it writes."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..errors import EXIT_HARNESS, EXIT_MISSED, EXIT_OK
from ..interrupts import Terminated, sigterm_unwinds
from .run import (
    PARTS,
    BenchSettings,
    Doc,
    Progress,
    Say,
    run_bench,
)

#: the ledger's file name: beside the run's folder unless --ledger says otherwise (so
#: runs in results/ share results/bench-ledger.jsonl; harness.bench.ledger)
LEDGER_NAME = "bench-ledger.jsonl"


def register(sub: argparse._SubParsersAction) -> None:
    from ..cluster.cli import add_engine_arguments

    p = sub.add_parser(
        "bench",
        help="measure claim throughput and latency against the store's own limit",
        description=(
            "Start a cluster (or use --urls), measure on it in one run: the store's "
            "single-INSERT rate, publish (single and batched), rqueue claims and claim+ack "
            "cycles (with the workers sharing one transport, then with a transport each), "
            "the seed-reference design's cycles, claim latency with a small and a "
            "1,000,000-message backlog, and 64 threads vs 64 asyncio tasks. Prints a "
            "table, writes bench.json, bench.md and bench.png to the output folder, and checks the "
            "targets of issue 6 as ratios of figures from this run."
        ),
        epilog=(
            "The queue's tables are emptied and dropped between measurements: never point "
            "--urls at a cluster whose queue you want to keep. Exit status: 0 every target "
            "met, 1 a target missed, 2 the benchmark failed (the reason on stderr)."
        ),
    )
    p.add_argument("--nodes", type=int, default=3, choices=(3, 5), help="cluster size (3)")
    add_engine_arguments(p)
    p.add_argument(
        "--engines",
        type=_engines,
        metavar="E,E",
        help=(
            "run the whole benchmark on each engine in turn (e.g. embedded,rqlited), each "
            "on a fresh cluster in its own subfolder, and write one table with the engines "
            "side by side (compare.md); replaces --engine"
        ),
    )
    p.add_argument(
        "--only",
        type=_parts,
        default=PARTS,
        metavar="PART,PART",
        help=f"measure only these parts, in the usual order ({','.join(PARTS)}: all)",
    )
    p.add_argument(
        "--urls",
        metavar="URLS",
        help="comma-separated node URLs of a running cluster to use instead",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="output folder (new or empty); default results/bench-<timestamp>",
    )
    d = BenchSettings()
    for name, (kind, metavar, text) in _SIZE_OPTIONS.items():
        default = getattr(d, name)
        if isinstance(default, tuple):
            shown = ",".join(map(str, default))
        else:
            shown = f"{default:,}" if isinstance(default, int) else f"{default:g}"
        p.add_argument(
            f"--{name.replace('_', '-')}",
            type=kind,
            default=default,
            metavar=metavar,
            help=text.format(default=shown),
        )
    p.add_argument(
        "--ledger",
        type=Path,
        metavar="FILE",
        help=(
            "append this run's figures with the commit and machine to FILE, and name each "
            "figure more than 10%% below the median of the last 3 runs there on this machine "
            f"with the same settings (default: {LEDGER_NAME} beside the output folder, "
            f"results/{LEDGER_NAME} for the default one)"
        ),
    )
    p.add_argument("--no-ledger", action="store_true", help="neither compare nor record")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(handler=main_bench)


def _engines(text: str) -> tuple[str, ...]:
    from ..cluster.cli import ENGINES

    engines = tuple(e.strip() for e in text.split(",") if e.strip())
    bad = [e for e in engines if e not in ENGINES]
    if not engines or bad or len(set(engines)) != len(engines):
        raise argparse.ArgumentTypeError(
            f"expected distinct engines from {', '.join(ENGINES)}, comma-separated; got {text!r}"
        )
    return engines


def _parts(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    bad = [p for p in parts if p not in PARTS]
    if not parts or bad:
        raise argparse.ArgumentTypeError(
            f"unknown part(s) {', '.join(bad) or repr(text)}; choose from {', '.join(PARTS)}"
        )
    return parts


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not levels or any(n < 1 for n in levels):
        raise argparse.ArgumentTypeError(f"concurrency levels must be >= 1, got {text!r}")
    return levels


#: the size options of ``bench``, one per field of :class:`BenchSettings`:
#: name -> (type, metavar, help with ``{default}``)
_SIZE_OPTIONS: dict[str, tuple[Callable[[str], Any], str | None, str]] = {
    "seconds": (float, None, "measured seconds per throughput figure ({default})"),
    "warmup": (float, None, "unmeasured seconds before each ({default})"),
    "concurrency": (
        _levels,
        "N,N,...",
        "concurrency levels ({default}); must include 8, where targets are checked",
    ),
    "async_concurrency": (int, "N", "threads and tasks compared ({default})"),
    "samples": (int, None, "claim latency samples per backlog ({default})"),
    "small_backlog": (int, "N", "messages queued for the small latency figure ({default})"),
    "big_backlog": (int, "N", "messages queued for the big latency figure ({default})"),
    "big_groups": (int, "N", "groups of the big backlog ({default})"),
    "claim_backlog": (int, "N", "groups queued before each claims-alone run ({default})"),
    "cycle_backlog": (int, "N", "messages queued before each claim+ack run ({default})"),
    "cycle_groups": (int, "N", "groups of that backlog ({default})"),
    "publish_batch": (int, "N", "messages per publish_many ({default})"),
}


def settings_from_args(args: argparse.Namespace) -> BenchSettings:
    return BenchSettings(**{name: getattr(args, name) for name in _SIZE_OPTIONS})


def command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this run (options that differ from the defaults)."""
    parts = ["python -m harness bench"]
    defaults = {"nodes": 3, "engine": "embedded", "only": PARTS, **asdict(BenchSettings())}
    engines = getattr(args, "engines", None)
    for name in ("nodes", "engines", "engine", "rqlited", "urls", "out", "only", *_SIZE_OPTIONS):
        value = getattr(args, name, None)
        if value is None or value == defaults.get(name) or (name == "engine" and engines):
            continue
        if isinstance(value, tuple):
            value = ",".join(map(str, value))
        parts.append(f"--{name.replace('_', '-')} {value}")
    return " ".join(parts)


def main_bench(args: argparse.Namespace) -> int:
    """The ``bench`` command: returns 0 (targets met), 1 (a target missed) or 2."""
    try:
        settings = settings_from_args(args)
        out = _out_dir(args.out)
        args.ledger = args.ledger or out.parent / LEDGER_NAME
    except (ValueError, FileExistsError) as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return EXIT_HARNESS
    engines = args.engines or (args.engine,)
    if args.engines and args.urls:
        print("harness: error: --engines starts its own clusters; drop --urls", file=sys.stderr)
        return EXIT_HARNESS
    progress = Progress(args.quiet)
    docs: list[Doc] = []
    try:
        with sigterm_unwinds():
            for engine in engines:
                where = out / engine if args.engines else out
                where.mkdir(exist_ok=True)
                if args.engines:
                    progress(f"== engine {engine} ({engines.index(engine) + 1} of {len(engines)})")
                docs.append(_bench_on_cluster(args, engine, settings, where, progress))
            if args.engines:
                _write_comparison(docs, out)
    except (KeyboardInterrupt, Terminated) as exc:
        print(f"harness: error: interrupted ({exc or 'Ctrl-C'}); cluster stopped", file=sys.stderr)
        return EXIT_HARNESS
    except Exception as exc:
        print(f"harness: error: bench failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_HARNESS
    met = all(t["met"] for doc in docs for t in doc["targets"])
    return EXIT_OK if met else EXIT_MISSED


def _write_comparison(docs: list[Doc], out: Path) -> None:
    from .breakdown import comparison_markdown, comparison_table
    from .report import print_tables

    (out / "compare.md").write_text(comparison_markdown(docs))
    print_tables([comparison_table(docs)])
    print(f"wrote compare.md in {out}")


def _bench_on_cluster(
    args: argparse.Namespace, engine: str, settings: BenchSettings, out: Path, progress: Say
) -> Doc:
    from ..cluster.base import Cluster
    from .breakdown import breakdown_table, cost_rows
    from .report import markdown, plot, print_tables, tables

    cluster: Cluster
    if args.urls:
        from ..cluster.external.cluster import ExternalCluster

        cluster = ExternalCluster([u.strip() for u in args.urls.split(",")])
        engine = "external"
    else:
        from ..cluster.local.cluster import LocalCluster

        progress(f"starting a {args.nodes}-node {engine} cluster in {out / 'cluster'}")
        cluster = LocalCluster.start(
            nodes=args.nodes,
            directory=out / "cluster",
            engine=engine,
            rqlited=args.rqlited,
            timeout=60.0,
        )
    with cluster:
        leader = cluster.wait_for_leader(60.0)
        urls = [leader.url] + [u for u in cluster.urls if u != leader.url]
        pids = {n.url: n.pid for n in cluster.nodes() if n.pid is not None}
        doc = run_bench(urls, settings, progress, pids=pids, parts=args.only)
        doc["cluster"] = {"engine": engine, "nodes": len(cluster.urls), "leader": leader.url}
        if engine == "rqlited":
            doc["cluster"]["version"] = _rqlited_version(args.rqlited)
    doc["command"] = command_line(args)
    if not args.no_ledger:
        doc["ledger"] = _keep_in_ledger(doc, args.ledger)
    (out / "bench.json").write_text(json.dumps(doc, indent=2) + "\n")
    plot(doc, out / "bench.png")
    (out / "bench.md").write_text(markdown(doc))
    print_tables(tables(doc) + ([breakdown_table(doc)] if cost_rows(doc) else []))
    print(f"wrote bench.json, bench.md and bench.png in {out}")
    for line in (doc.get("ledger") or {}).get("lines", []):
        print(f"ledger: {line}")
    return doc


def _keep_in_ledger(doc: Doc, path: Path) -> dict[str, Any]:
    """Compare the run with the ledger's earlier runs on this machine, then record it."""
    from ..versions import git_commit
    from . import ledger

    earlier = ledger.read(path)
    run = ledger.entry(doc, git_commit(), ledger.machine())
    compared = [e for e in earlier if ledger.comparable(run, e)][-ledger.EARLIER :]
    found = ledger.regressions(run, earlier)
    ledger.append(path, run)
    return {
        "file": str(path),
        "commit": run["commit"],
        "compared_with": [e.get("commit") for e in compared],
        "regressions": found,
        "lines": ledger.describe(found, len(compared)),
    }


def _rqlited_version(path: str | None) -> str | None:
    from ..cluster.engines import resolve_rqlited, rqlited_version

    try:
        return "v" + ".".join(map(str, rqlited_version(resolve_rqlited(path))))
    except Exception:  # the version is a label: the run stands without it
        return None


def _out_dir(out: Path | None) -> Path:
    if out is None:
        out = Path("results") / f"bench-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"--out {out}: exists and is not an empty folder")
    out.mkdir(parents=True, exist_ok=True)
    return out
