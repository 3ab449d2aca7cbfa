"""Where a one-shot benchmark command runs: the cluster at ``--urls``, or a fresh local one.

:func:`run_on_cluster` is the shared frame of ``bench-batch`` and ``bench-polling``: it
starts the cluster when no ``--urls`` is given (leader first in the URL list, node pids
for the CPU meters), runs the measurement, stops the cluster, and turns an interrupt or
a failure into the harness's error line and exit status.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import EXIT_HARNESS

#: a measurement: (node URLs, leader first; node pid per URL, empty for --urls) -> document
Measure = Callable[[list[str], dict[str, int]], dict[str, Any]]


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    """``--nodes``, the engine's options and ``--urls``: where a benchmark runs."""
    from ..cluster.cli import add_engine_arguments

    p.add_argument("--nodes", type=int, default=3, choices=(3, 5), help="cluster size (3)")
    add_engine_arguments(p)
    p.add_argument("--urls", metavar="URLS", help="node URLs of a running cluster instead")


def run_on_cluster(
    name: str, args: argparse.Namespace, out: Path, say: Callable[[str], None], measure: Measure
) -> dict[str, Any] | int:
    """``measure``'s document, or :data:`EXIT_HARNESS` after saying why it failed."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        if args.urls:
            return measure([u.strip() for u in args.urls.split(",")], {})
        from ..cluster.local.cluster import LocalCluster

        say(f"starting a {args.nodes}-node {args.engine} cluster in {out / 'cluster'}")
        with LocalCluster.start(
            nodes=args.nodes,
            directory=out / "cluster",
            engine=args.engine,
            rqlited=args.rqlited,
            timeout=60.0,
        ) as cluster:
            leader = cluster.wait_for_leader(60.0)
            urls = [leader.url] + [u for u in cluster.urls if u != leader.url]
            pids = {n.url: n.pid for n in cluster.nodes() if n.pid is not None}
            return measure(urls, pids)
    except KeyboardInterrupt:
        print("harness: error: interrupted", file=sys.stderr)
    except Exception as exc:
        print(f"harness: error: {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    return EXIT_HARNESS
