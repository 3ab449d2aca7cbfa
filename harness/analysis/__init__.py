"""``python -m harness analysis``: write docs/analysis.md from matrix and shrink folders.

The report's prose is ``docs/analysis/template.md``; its ``{{placeholders}}`` are filled
from the run folders: the verdict tables (:mod:`harness.analysis.tables`), the shrinks
with their commands and figures (copied, small, into ``docs/analysis/``), the versions
the runs recorded, and the output of ``scripts/repro_rqlite_now_subquery.py``.

``--rerun ROOT`` first runs the whole plan (:mod:`harness.analysis.plan`) into ROOT and
the reproduction script against fresh rqlite clusters, so one command refreshes the
report for a new rqlite version.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

from ..store import REPO
from . import plan, render

DOCS = REPO / "docs"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "analysis",
        help="write docs/analysis.md from matrix and shrink folders",
        description=(
            "Fill docs/analysis/template.md with the verdict tables of the given matrix "
            "folders (a later folder's run replaces an earlier one's of the same cell), "
            "the given shrinks (command, rate, figures copied into docs/analysis/), the "
            "versions the runs recorded and the rqlite reproduction's output, and write "
            "docs/analysis.md. With --rerun ROOT it first runs the whole plan into ROOT."
        ),
    )
    p.add_argument("--matrix", type=Path, action="append", default=[], help="a matrix folder")
    p.add_argument("--shrink", type=Path, action="append", default=[], help="a shrink folder")
    p.add_argument(
        "--rerun",
        type=Path,
        metavar="ROOT",
        help="run the plan's matrices, shrinks and the rqlite reproduction into ROOT first",
    )
    p.add_argument(
        "--only", action="append", default=[], help="with --rerun: only this matrix/shrink"
    )
    p.add_argument("--rqlited-v8", default=plan.V8, help=f"rqlite v8 binary (default {plan.V8})")
    p.add_argument("--rqlited-v6", default=plan.V6, help=f"rqlite v6 binary (default {plan.V6})")
    p.add_argument("--out", type=Path, default=DOCS / "analysis.md", help="the report to write")
    p.set_defaults(handler=main_analysis)


def main_analysis(args: argparse.Namespace) -> int:
    matrices, shrinks = list(args.matrix), list(args.shrink)
    assets = args.out.parent / "analysis"
    try:
        if args.rerun:
            m, s = plan.rerun(args.rerun, args.rqlited_v8, args.rqlited_v6, args.only)
            matrices += m
            shrinks += s
            for binary in (args.rqlited_v8, args.rqlited_v6):
                if not args.only or "repro" in args.only:
                    run_repro(binary, assets, args.rerun / "repro")
        if not matrices:
            raise ValueError("no matrix folder: give --matrix DIR (repeatable) or --rerun ROOT")
        command = "python -m harness " + shlex.join(sys.argv[1:])
        text = render.report(
            template=(assets / "template.md").read_text(),
            matrices=matrices,
            shrinks=shrinks,
            assets=assets,
            command=command,
        )
    except (ValueError, OSError) as e:
        print(f"harness: error: {e}", file=sys.stderr)
        return 2
    args.out.write_text(text)
    print(f"analysis: {args.out} ({len(text.splitlines())} lines), assets in {assets}")
    return 0


def run_repro(binary: str, assets: Path, root: Path) -> Path:
    """Start a 3-node cluster of ``binary`` on loopback, run the reproduction script on it,
    keep its output as ``assets/repro-<binary name>.txt``, and stop the cluster."""
    from ..cluster.factory import make_cluster

    name = Path(binary).name
    directory = root / f"{name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    cluster = make_cluster("local", engine="rqlited", nodes=3, directory=directory, rqlited=binary)
    try:
        script = REPO / "scripts" / "repro_rqlite_now_subquery.py"
        proc = subprocess.run(
            [sys.executable, str(script), *cluster.urls],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        cluster.stop()
    if proc.returncode == 2:
        raise ValueError(f"the reproduction failed on {name}: {proc.stderr.strip()}")
    out = assets / f"repro-{name}.txt"
    out.write_text(proc.stdout)
    return out
