"""The bench's ledger: each run's figures with its commit and machine, and the figures
that fell against earlier runs on the same machine.

A bench run appends one JSON line to the ledger (``results/bench-ledger.jsonl`` by
default): the commit, the machine (host name, CPU model and count), the settings and
parts measured, and every figure of the run by name (rates, and each rqueue rate as a
ratio to the INSERTs/s measured just before it). A later run on the same machine with
the same settings and parts is compared, figure by figure, with the median of up to
:data:`EARLIER` earlier runs; a figure more than :data:`REGRESSION` below it is named in
the report. Rates drift with a shared machine's load, so the ratios are the figures to
trust (docs/performance.md); the rates are named too, marked as such.

Everything but :func:`machine` and :func:`append` is a pure function of documents.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
from pathlib import Path
from typing import Any

from .series import SERIES, baseline, ratio_of, series

#: a figure this far below the earlier runs' median is a regression
REGRESSION = 0.10
#: how many of the latest comparable runs the median is taken over
EARLIER = 3
#: the ratio figures' suffix (the ones that cancel the machine's drift)
RATIO = "ratio to INSERT/s"


def figures(doc: dict[str, Any]) -> dict[str, float]:
    """Every figure of a ``bench.json`` document by a stable name."""
    out: dict[str, float] = {}
    for label, key in SERIES:
        for row in series(doc, key):
            at = row["concurrency"]
            out[f"{label} at {at}, per second"] = row["per_second"]
            if key == "store_insert":
                continue
            ratio = ratio_of(row["per_second"], baseline(doc, key, at))
            if ratio is not None:
                out[f"{label} at {at}, {RATIO}"] = round(ratio, 4)
    for row in doc.get("publish") or []:
        kind = "publish" if row.get("batch", 1) == 1 else f"publish_many({row['batch']})"
        out[f"{kind} at {row['concurrency']}, messages per second"] = row["messages_per_second"]
    return out


def machine() -> dict[str, Any]:
    """This machine, as runs are matched by: host name, CPU model and count."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"host": socket.gethostname(), "cpu": model, "cpus": os.cpu_count()}


def entry(doc: dict[str, Any], commit: str | None, where: dict[str, Any]) -> dict[str, Any]:
    """The ledger's line for one run."""
    return {
        "commit": commit,
        "machine": where,
        "started": doc.get("started"),
        "engine": (doc.get("cluster") or {}).get("engine"),
        "settings": doc.get("settings"),
        "parts": doc.get("parts"),
        "figures": figures(doc),
    }


def comparable(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two runs measured alike: same machine, engine, settings and parts."""
    keys = ("machine", "engine", "settings", "parts")
    return all(a.get(k) == b.get(k) for k in keys)


def regressions(run: dict[str, Any], earlier: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures of ``run`` more than :data:`REGRESSION` below the median of the same
    figure over the latest :data:`EARLIER` comparable runs in ``earlier`` (oldest
    first); each with the median, the ratio and the commits it was taken over."""
    before = [e for e in earlier if comparable(run, e)][-EARLIER:]
    out = []
    for name, value in run["figures"].items():
        seen = [(e["figures"][name], e.get("commit")) for e in before if name in e["figures"]]
        if not seen:
            continue
        median = statistics.median(v for v, _ in seen)
        if median > 0 and value < (1 - REGRESSION) * median:
            out.append(
                {
                    "figure": name,
                    "value": value,
                    "median_before": median,
                    "ratio": round(value / median, 3),
                    "commits": [c for _, c in seen],
                    "kind": "ratio" if name.endswith(RATIO) else "rate",
                }
            )
    return out


def read(path: Path) -> list[dict[str, Any]]:
    """The ledger's runs, oldest first (none when it does not exist yet)."""
    if not path.exists():
        return []
    runs = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            runs.append(json.loads(line))
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: not a JSON line of the bench ledger: {exc}") from exc
    return runs


def append(path: Path, run: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(run, sort_keys=True) + "\n")


def describe(found: list[dict[str, Any]], compared: int) -> list[str]:
    """Lines for the report: what fell, or that nothing did."""
    if compared == 0:
        return ["no earlier run on this machine with these settings to compare with"]
    if not found:
        return [f"no figure fell more than {REGRESSION:.0%} against {compared} earlier run(s)"]
    return [
        f"{r['figure']}: {_shown(r['value'])} vs a median of {_shown(r['median_before'])} "
        f"({r['ratio']:.2f}x; {r['kind']}; commits {', '.join(str(c) for c in r['commits'])})"
        for r in found
    ]


def _shown(value: float) -> str:
    """A rate in whole units (12,160, not 1.216e+04), a ratio to three digits."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
