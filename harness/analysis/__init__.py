"""``python -m harness analysis``: the analysis report from matrix and shrink folders.

The report's prose is ``docs/analysis/template.md`` (``--template``); its
``{{placeholders}}`` are filled from the run folders: the verdict tables
(:mod:`harness.analysis.tables`), the shrinks with their commands and figures (copied,
small, into the ``analysis/`` folder beside the report), the versions the runs recorded,
and the output of ``scripts/repro_rqlite_now_subquery.py``. The report goes to
``results/analysis-<UTC timestamp>/analysis.md`` unless ``--out`` names another file
(``--out docs/analysis.md`` refreshes the committed one).

``--rerun ROOT`` first runs the whole plan (:mod:`harness.analysis.plan`) into ROOT and
the reproduction script against fresh rqlite clusters, so one command refreshes the
report for a new rqlite version. The rqlite binaries it runs come from ``--rqlited-v8``
and ``--rqlited-v6``, else from ``$RQLITED_V8`` (or ``$RQLITED``, or ``rqlited`` on
PATH) and ``$RQLITED_V6``; only the ones the chosen parts of the plan run are needed.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from ..errors import EXIT_HARNESS, EXIT_OK
from ..store import DEFAULT_ROOT, REPO
from . import plan, render

TEMPLATE = REPO / "docs" / "analysis" / "template.md"
#: where each plan engine's binary comes from when its option is not given, in order
BINARY_ENV = {"v8": ("RQLITED_V8", "RQLITED"), "v6": ("RQLITED_V6",)}
#: the rqlite major versions each plan engine stands for
MAJORS = {"v8": range(8, 1000), "v6": range(6, 8)}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "analysis",
        help="write the analysis report from matrix and shrink folders",
        description=textwrap.fill(
            "Fill the analysis template with the verdict tables of the given matrix "
            "folders (a later folder's run replaces an earlier one's of the same cell), "
            "the given shrinks (command, rate, figures copied into an analysis/ folder "
            "beside the report), the versions the runs recorded and the rqlite "
            "reproduction's output, and write the report (default "
            "results/analysis-<UTC timestamp>/analysis.md). With --rerun ROOT it first "
            "runs the whole plan into ROOT.",
            88,
        ),
        epilog=(
            "examples:\n"
            "  python -m harness analysis --matrix /tmp/a/matrix/rqueue\n"
            "  python -m harness analysis --rerun /tmp/a --rqlited-v8 /opt/rqlited-v8.36.18 \\\n"
            "      --rqlited-v6 /opt/rqlited-v6.10.2 --out docs/analysis.md\n"
            "  python -m harness analysis --rerun /tmp/a --only mutants   # needs no rqlited"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help="with --rerun: only this part of the plan (repeatable): "
        + ", ".join([*(m.name for m in plan.MATRICES), *(s.name for s in plan.SHRINKS), "repro"]),
    )
    p.add_argument(
        "--rqlited-v8",
        metavar="PATH",
        help="with --rerun: the rqlite v8 (or later) binary (default: $RQLITED_V8, else "
        "$RQLITED, else rqlited on PATH)",
    )
    p.add_argument(
        "--rqlited-v6",
        metavar="PATH",
        help="with --rerun: the rqlite v6 or v7 binary (default: $RQLITED_V6)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="the report to write; its figures go to an analysis/ folder beside it "
        "(default: results/analysis-<UTC timestamp>/analysis.md)",
    )
    p.add_argument(
        "--template", type=Path, default=TEMPLATE, help="the report's prose with placeholders"
    )
    p.set_defaults(handler=main_analysis)


def output_path(out: Path | None) -> Path:
    """The report to write: ``out``, else a new ``results/analysis-<UTC timestamp>/analysis.md``."""
    if out is not None:
        return out
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    folder = DEFAULT_ROOT / f"analysis-{stamp}"
    n = 1
    while folder.exists():
        n += 1
        folder = DEFAULT_ROOT / f"analysis-{stamp}-{n}"
    return folder / "analysis.md"


def binaries(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The v8 and v6 rqlited binaries a ``--rerun`` needs (None: that part does not run).

    Raises :class:`ValueError` naming the option and environment variable of a missing
    binary, or the version of one that is not what its option says.
    """
    from ..cluster.base import ClusterError
    from ..cluster.engines import resolve_rqlited, rqlited_version

    needed = plan.engines_needed(args.only) if args.rerun else set()
    found: dict[str, str | None] = {}
    for engine, given in (("v8", args.rqlited_v8), ("v6", args.rqlited_v6)):
        found[engine] = None
        if engine not in needed:
            continue
        names = BINARY_ENV[engine]
        path = given or next((os.environ[n] for n in names if os.environ.get(n)), None)
        if path is None and engine == "v8":
            path = shutil.which("rqlited")
        if path is None:
            env = " or ".join(f"${n}" for n in names)
            raise ValueError(
                f"--rerun runs rqlite {engine} (matrices or the reproduction): pass "
                f"--rqlited-{engine} PATH or set {env.replace('$', '')}"
                + (" or put rqlited on PATH" if engine == "v8" else "")
                + "; --only picks parts of the plan that need no rqlite "
                "(e.g. --only mutants)"
            )
        try:
            binary = resolve_rqlited(path)
            version = rqlited_version(binary)
        except ClusterError as e:
            raise ValueError(f"--rqlited-{engine}: {e}") from None
        if version[0] not in MAJORS[engine]:
            want = "rqlite v8 or later" if engine == "v8" else "rqlite v6 or v7"
            raise ValueError(
                f"--rqlited-{engine} wants {want}; {binary} is {'.'.join(map(str, version))}"
            )
        found[engine] = binary
    return found["v8"], found["v6"]


def main_analysis(args: argparse.Namespace) -> int:
    matrices, shrinks = list(args.matrix), list(args.shrink)
    out = output_path(args.out)
    assets = out.parent / "analysis"
    try:
        if not matrices and not args.rerun:
            raise ValueError("no matrix folder: give --matrix DIR (repeatable) or --rerun ROOT")
        v8, v6 = binaries(args)
        template = args.template.read_text()
        assets.mkdir(parents=True, exist_ok=True)
        if args.rerun:
            m, s = plan.rerun(args.rerun, v8, v6, args.only)
            matrices += m
            shrinks += s
            if not args.only or "repro" in args.only:
                for binary in (v8, v6):
                    assert binary is not None  # binaries() resolved what the repro runs
                    run_repro(binary, assets, args.rerun / "repro")
        if not matrices:
            raise ValueError("no matrix folder: give --matrix DIR (repeatable) or --rerun ROOT")
        command = "python -m harness " + shlex.join(sys.argv[1:])
        text = render.report(
            template=template,
            matrices=matrices,
            shrinks=shrinks,
            assets=assets,
            command=command,
        )
    except (ValueError, OSError) as e:
        print(f"harness: error: {e}", file=sys.stderr)
        return EXIT_HARNESS
    out.write_text(text)
    print(f"analysis: {out} ({len(text.splitlines())} lines), assets in {assets}")
    return EXIT_OK


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
