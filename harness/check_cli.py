"""``python -m harness check FILE``: judge a history, write check.json, print a summary.

It stands above the judgement (:mod:`harness.judgement`), whose
:func:`~harness.judgement.judge_run` it calls on the run folder (:mod:`harness.store`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from . import divergence
from .errors import EXIT_HARNESS
from .history import HistoryFormatError
from .judgement import judge_run
from .store import CHECK, REPLICAS, RunStore
from .verdict import ANOMALIES, VALID


def main_check(path: str | Path) -> int:
    """``python -m harness check FILE``: check, write check.json beside it, print a summary.

    ``FILE`` is a history file or a run folder holding ``history.jsonl``. The replicas'
    tables are compared too when ``replicas.json`` (a run's record) is beside the
    history, and in a run folder the run's coverage is recomputed. Returns the verdict's
    exit status (:mod:`harness.verdict`): 0 valid, 1 anomalies, 3 a run that did not test
    what it planned, 2 a run that failed or a file that cannot be read (the message names
    the line and what is wrong).
    """
    store = RunStore.holding(path)
    source = store.history
    try:
        judged = judge_run(store)
    except HistoryFormatError as e:
        print(f"harness: error: {source}:{e.line}: {e.reason}", file=sys.stderr)
        return EXIT_HARNESS
    except divergence.SnapshotFormatError as e:
        print(f"harness: error: {store.path(REPLICAS)}: {e}", file=sys.stderr)
        return EXIT_HARNESS
    except OSError as e:
        print(
            f"harness: error: {getattr(e, 'filename', None) or source}: cannot read: "
            f"{e.strerror or e}",
            file=sys.stderr,
        )
        return EXIT_HARNESS
    assert judged.result is not None  # judged from the history
    out = store.write_json(CHECK, judged.result, sort_keys=False)
    verdict = judged.verdict
    history_says = verdict.label in (VALID, ANOMALIES)  # else the run's own verdict
    print_check(judged.result, source, out, None if history_says else verdict.line())
    return verdict.exit_code


def print_check(
    result: dict[str, Any], source: Path, out: Path | None = None, verdict: str | None = None
) -> None:
    """Print a readable summary of a check result (rich tables); ``verdict``: the run's,
    when it is not simply the history's (:func:`harness.verdict.decide`)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    stats = result["stats"]
    table = Table(title=f"check: {source}", title_justify="left")
    table.add_column("anomaly")
    table.add_column("count", justify="right")
    table.add_column("examples (event indices)")
    for name, a in result["anomalies"].items():
        style = "bold red" if a["count"] else "green"
        shown = "; ".join(_example_text(ex) for ex in a["examples"][:3])
        table.add_row(name, f"[{style}]{a['count']}[/]", shown)
    console.print(table)
    ops = Table(title="operations", title_justify="left")
    for col in ("f", "ok", "fail", "info", "open", "p50 s", "p99 s"):
        ops.add_column(col, justify="left" if col == "f" else "right")
    for f, counts in stats["ops"].items():
        lat = stats["latency"].get(f, {})
        ops.add_row(
            f,
            *(str(counts[k]) for k in ("ok", "fail", "info", "open")),
            *(f"{lat[k]:.4f}" if k in lat else "-" for k in ("p50", "p99")),
        )
    console.print(ops)
    console.print(
        f"published {stats['published']}, acked {stats['acked']}, leases {stats['leases']}, "
        f"redeliveries {stats['redeliveries']}, events {stats['events']}, "
        f"duration {stats['duration']:.1f} s"
    )
    refused = stats.get("refusals") or {}
    if refused.get("count"):  # refused on purpose: the queue's own lines, not a bare count
        console.print(f"refused on purpose: {refused['count']} calls", markup=False)
        for line, seen in (refused.get("lines") or {}).items():
            console.print(f"  {seen['count']} calls: {line}", markup=False)
    faults = stats["availability"]
    for a in faults[:20]:
        rec = "never" if a["recovery"] is None else f"{a['recovery']:.2f} s"
        console.print(f"  fault {a['label']} at {a['start']:.2f} s: next lease after {rec}")
    if len(faults) > 20:
        console.print(f"  … and {len(faults) - 20} more faults (check.json has them all)")
    if stats.get("replicas"):
        console.print(divergence.summary(stats["replicas"]), markup=False)
    text = "[green]history is valid[/]" if result["valid"] else "[bold red]anomalies found[/]"
    if verdict is not None:  # the run's: inconclusive, or it failed
        text = f"[yellow]{escape(verdict)}[/]"
    console.print(f"{text}" + (f"; wrote {out}" if out else ""))


def _example_text(example: Any) -> str:
    """An example as a short text: event indices, or a replica divergence's row."""
    if isinstance(example, dict):
        from rich.markup import escape

        return escape(divergence.describe(example))
    return " ".join(map(str, example))
