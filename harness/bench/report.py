"""The benchmark's results: the targets of issue 6, the printed table and the plot.

Everything here is a pure function of the ``bench.json`` document (see
:func:`harness.bench.run_bench`), so a saved run can be re-rendered later.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .breakdown import breakdown_markdown
from .series import SERIES, baseline, levels_of, rate_at, ratio_of, row_at, series


@dataclass(frozen=True)
class Target:
    """One performance target: ``value`` must be at least (or at most) ``required``."""

    name: str
    value: float | None
    required: float
    detail: str
    at_most: bool = False

    @property
    def met(self) -> bool:
        if self.value is None:
            return False
        return self.value <= self.required if self.at_most else self.value >= self.required

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["value"] = None if self.value is None else round(self.value, 3)
        out["met"] = self.met
        return out


def _dry_note(*rows: dict[str, Any] | None) -> str:
    """Why figures cannot be used: the queue ran dry during them (claims found nothing)."""
    empty = sum((r or {}).get("empty", 0) or 0 for r in rows)
    if not empty:
        return ""
    return f"; INVALID: the queue ran dry ({empty:,} claims found nothing), raise the backlog"


def _checked_ratio(value: float | None, note: str) -> float | None:
    return None if note else value


def _unfolded_note(doc: dict[str, Any], cycle_key: str, at: int) -> str:
    """With folded cycles checked, what the two-call cycle (claim, then ack) reached."""
    if cycle_key != "rqueue_cycle_folded" or not series(doc, "rqueue_cycle_shared"):
        return ""
    plain = rate_at(doc["rqueue_cycle_shared"], at)
    ratio = ratio_of(plain, baseline(doc, "rqueue_cycle_shared", at))
    shown = "n/a" if ratio is None else f"{ratio:.2f}"
    return f"; as two calls (claim, then ack): {_fmt(plain)} cycles/s, ratio {shown}"


def targets(doc: dict[str, Any], at: int = 8) -> list[Target]:
    """Issue 6's targets, each a ratio of two figures of this one run.

    Claims and cycles are checked with the workers sharing one transport (how rqueue is
    meant to be run: concurrent calls share requests); runs from before group commit
    have only the transport-per-worker figures, which are checked then.
    """
    claim_key = "rqueue_claim_shared" if series(doc, "rqueue_claim_shared") else "rqueue_claim"
    cycle_key = next(
        (k for k in ("rqueue_cycle_folded", "rqueue_cycle_shared") if series(doc, k)),
        "rqueue_cycle",
    )
    how = "shared transport" if claim_key.endswith("shared") else "a transport per worker"
    out: list[Target] = []
    # claims at the target concurrency and at every higher level measured (8 and 32);
    # a run of some parts only (``--only``) checks the targets of those parts
    levels = sorted({r["concurrency"] for r in series(doc, claim_key)})
    for c in [c for c in levels if c >= at]:
        claims, claims_base = rate_at(series(doc, claim_key), c), baseline(doc, claim_key, c)
        claims_dry = _dry_note(row_at(series(doc, claim_key), c))
        out.append(
            Target(
                f"claims/s vs INSERTs/s at concurrency {c}",
                _checked_ratio(ratio_of(claims, claims_base), claims_dry),
                0.8,
                f"{_fmt(claims)} claims/s ({how}), {_fmt(claims_base)} INSERTs/s just before"
                + claims_dry,
            )
        )
    cycles = rate_at(series(doc, cycle_key), at)
    cycles_base = baseline(doc, cycle_key, at)
    cycles_dry = _dry_note(row_at(series(doc, cycle_key), at))
    folded = cycle_key.endswith("folded")
    cycles_how = how + (", each ack folded into the next claim" if folded else "")
    cycle_target = Target(
        f"claim+ack cycles/s vs INSERTs/s at concurrency {at}",
        _checked_ratio(ratio_of(cycles, cycles_base), cycles_dry),
        0.6 if folded else 0.4,
        f"{_fmt(cycles)} cycles/s ({cycles_how}), {_fmt(cycles_base)} INSERTs/s just before"
        + cycles_dry
        + _unfolded_note(doc, cycle_key, at),
    )
    if series(doc, cycle_key):
        out.append(cycle_target)
    lat = {r["backlog"]: r for r in series(doc, "claim_latency")}
    small, big = (lat.get(k) for k in sorted(lat)) if len(lat) == 2 else (None, None)
    if small and big:
        out.append(
            Target(
                f"claim p50 with {big['backlog']:,} queued vs with {small['backlog']:,}",
                ratio_of(big["p50_ms"], small["p50_ms"]),
                1.5,
                f"p50 {big['p50_ms']:.2f} ms vs {small['p50_ms']:.2f} ms",
                at_most=True,
            )
        )
    for c in sorted({r["concurrency"] for r in series(doc, "publish")}):
        single = next(
            (r for r in series(doc, "publish") if r["concurrency"] == c and r["batch"] == 1), None
        )
        batched = next(
            (r for r in series(doc, "publish") if r["concurrency"] == c and r["batch"] > 1), None
        )
        if single and batched:
            out.append(
                Target(
                    f"batched vs single publish, messages/s at concurrency {c}",
                    ratio_of(batched["messages_per_second"], single["messages_per_second"]),
                    10.0,
                    f"{_fmt(batched['messages_per_second'])} vs "
                    f"{_fmt(single['messages_per_second'])} messages/s "
                    f"(batches of {batched['batch']})",
                )
            )
    rows = series(doc, "sync_vs_async")
    shared = any(r.get("shared") for r in rows)
    modes = {r["mode"]: r for r in rows if bool(r.get("shared")) == shared}
    if "threads" in modes and "tasks" in modes:
        n = modes["tasks"]["concurrency"]
        dry = _dry_note(modes["tasks"], modes["threads"])
        out.append(
            Target(
                f"{n} async tasks vs {n} threads, claim+ack cycles/s",
                _checked_ratio(
                    ratio_of(modes["tasks"]["per_second"], modes["threads"]["per_second"]), dry
                ),
                1.0,
                f"{_fmt(modes['tasks']['per_second'])} vs "
                f"{_fmt(modes['threads']['per_second'])} cycles/s "
                f"({'each side sharing one transport' if shared else 'a transport each'})" + dry,
            )
        )
    return out


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.0f}"


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


#: under the throughput table: which INSERT figure each ratio is taken against
RATIO_NOTE = (
    "A ratio is taken against the INSERTs/s measured again right before that figure, at "
    'the same concurrency (the number after "of"), since the machine\'s speed drifts over '
    "a run; the store INSERT row is the store part's own measurement."
)


def print_tables(renderables: list[Any], file: Any = None) -> None:
    """Print Rich tables; when the output is not a terminal (a pipe, a file) at their own
    width instead of 80 columns, which squeezes a wide table into unreadable headers."""
    from rich.console import Console

    console = Console(file=file)
    if not console.is_terminal:
        unbounded = console.options.update_width(10_000)
        widest = max(
            (console.measure(r, options=unbounded).maximum for r in renderables), default=80
        )
        console = Console(file=file, width=max(80, widest))
    for renderable in renderables:
        console.print(renderable)


# -- the printed tables ------------------------------------------------------------------
def tables(doc: dict[str, Any]) -> list[Any]:
    """Rich tables: throughput by concurrency, publish, latency, threads/tasks, targets;
    only those the run has figures for (``--only`` measures some parts)."""
    from rich.table import Table

    info = doc["cluster"]
    seconds = doc["settings"]["seconds"]
    title = f"{info['engine']} {info['nodes']}-node cluster, {seconds:g} s per figure"
    levels = levels_of(doc)
    t = Table(
        title=f"Throughput, ops/s (ratio to INSERTs/s measured just before) — {title}",
        caption=RATIO_NOTE,
    )
    lt = Table(title="Latency of those operations, p50 / p99 ms")
    for table in (t, lt):
        table.add_column("operation")
        for c in levels:
            table.add_column(f"{c} client{'s' if c > 1 else ''}", justify="right")
    for label, key in SERIES:
        rates, lats = [label], [label]
        if not series(doc, key):
            continue
        for c in levels:
            r = row_at(doc[key], c)
            base = baseline(doc, key, c)
            ratio = ratio_of(rate_at(doc[key], c), base)
            flag = " !" if r and (r.get("empty") or r.get("errors")) else ""
            rates.append(
                "-"
                if r is None
                else f"{r['per_second']:,.0f}"
                + (
                    ""
                    if key == "store_insert" or ratio is None
                    else f" ({ratio:.2f} of {base:,.0f})"
                )
                + flag
            )
            lats.append("-" if r is None else f"{_ms(r['p50_ms'])} / {_ms(r['p99_ms'])}")
        t.add_row(*rates)
        lt.add_row(*lats)

    p = Table(title="Publish (messages/s)")
    for col in ("concurrency", "mode", "messages/s", "requests/s", "p50 ms", "p99 ms"):
        p.add_column(col, justify="right")
    for r in series(doc, "publish"):
        mode = "single" if r["batch"] == 1 else f"publish_many({r['batch']})"
        p.add_row(
            str(r["concurrency"]),
            mode,
            _fmt(r["messages_per_second"]),
            _fmt(r["per_second"]),
            _ms(r["p50_ms"]),
            _ms(r["p99_ms"]),
        )

    cl = Table(title="Claim latency, one claimer (ms)")
    for col in ("queued messages", "groups", "samples", "p50", "p99"):
        cl.add_column(col, justify="right")
    for r in series(doc, "claim_latency"):
        cl.add_row(
            f"{r['backlog']:,}",
            f"{r['groups']:,}",
            str(r["samples"]),
            _ms(r["p50_ms"]),
            _ms(r["p99_ms"]),
        )

    sa = Table(title="Sync threads vs async tasks (claim+ack cycles)")
    for col in ("mode", "concurrency", "cycles/s", "p50 ms", "p99 ms"):
        sa.add_column(col, justify="right")
    for r in series(doc, "sync_vs_async"):
        sa.add_row(
            _mode(r),
            str(r["concurrency"]),
            _fmt(r["per_second"]),
            _ms(r["p50_ms"]),
            _ms(r["p99_ms"]),
        )

    tt = Table(title="Targets (ratios from this run)")
    for col in ("target", "ratio", "required", "met", "figures"):
        tt.add_column(col)
    for tg in doc["targets"]:
        value = "n/a" if tg["value"] is None else f"{tg['value']:.2f}"
        met = "[green]yes[/green]" if tg["met"] else "[red]NO[/red]"
        bound = f"{'<=' if tg['at_most'] else '>='} {tg['required']:.2f}"
        tt.add_row(tg["name"], value, bound, met, tg["detail"])
    return [table for table in (t, lt, p, cl, sa, tt) if table.row_count]


def _mode(row: dict[str, Any]) -> str:
    if "shared" not in row:
        return row["mode"]
    return f"{row['mode']}, {'shared transport' if row['shared'] else 'transport each'}"


# -- the plot ------------------------------------------------------------------------------
def _throughput_panel(ax: Any, doc: dict[str, Any]) -> None:
    for label, key in SERIES:
        rows = sorted(series(doc, key), key=lambda r: r["concurrency"])
        if rows:
            ax.plot(
                [r["concurrency"] for r in rows],
                [r["per_second"] for r in rows],
                marker="o",
                label=label,
            )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent clients")
    ax.set_ylabel("operations/s")
    ax.set_title("Throughput")
    ax.legend()


def _publish_panel(ax: Any, doc: dict[str, Any]) -> None:
    labels = [
        f"{'single' if r['batch'] == 1 else 'batch ' + str(r['batch'])}\nc={r['concurrency']}"
        for r in series(doc, "publish")
    ]
    ax.bar(labels, [r["messages_per_second"] for r in series(doc, "publish")])
    ax.set_yscale("log")
    ax.set_ylabel("messages/s")
    ax.set_title("Publish")


def _latency_panel(ax: Any, doc: dict[str, Any]) -> None:
    lat = series(doc, "claim_latency")
    xs = range(len(lat))
    ax.bar([x - 0.2 for x in xs], [r["p50_ms"] or 0 for r in lat], width=0.4, label="p50")
    ax.bar([x + 0.2 for x in xs], [r["p99_ms"] or 0 for r in lat], width=0.4, label="p99")
    ax.set_xticks(list(xs), [f"{r['backlog']:,} queued" for r in lat])
    ax.set_ylabel("claim latency (ms)")
    ax.set_title("Claim latency by backlog")
    ax.legend()


def _threads_tasks_panel(ax: Any, doc: dict[str, Any]) -> None:
    sa = series(doc, "sync_vs_async")
    labels = [f"{r['concurrency']} {_mode(r)}".replace(", ", "\n") for r in sa]
    ax.bar(labels, [r["per_second"] for r in sa])
    ax.set_ylabel("claim+ack cycles/s")
    ax.set_title("Sync threads vs async tasks")


def panels(doc: dict[str, Any]) -> list[Any]:
    """The plot's panels the run has figures for, in order (``--only`` measures some)."""
    out = []
    if any(series(doc, key) for _, key in SERIES):
        out.append(_throughput_panel)
    if series(doc, "publish"):
        out.append(_publish_panel)
    if series(doc, "claim_latency"):
        out.append(_latency_panel)
    if series(doc, "sync_vs_async"):
        out.append(_threads_tasks_panel)
    return out


def figure(doc: dict[str, Any]) -> Any:
    """Up to four panels: throughput by concurrency, publish, claim latency, threads vs
    tasks; a panel without figures is left out, not drawn empty."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    draw = panels(doc)
    rows, cols = (1, max(1, len(draw))) if len(draw) <= 2 else (2, 2)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    cells = [ax for row in axes for ax in row]
    for panel, ax in zip(draw, cells, strict=False):
        panel(ax, doc)
    for ax in cells[len(draw) :]:
        fig.delaxes(ax)
    if not draw:
        fig.text(0.5, 0.5, "no figures in this run", ha="center", va="center")
    fig.suptitle(
        f"python -m harness bench — {doc['cluster']['engine']} {doc['cluster']['nodes']} nodes"
    )
    fig.tight_layout()
    return fig


def plot(doc: dict[str, Any], path: Path) -> Path:
    """Draw :func:`figure` into ``path``."""
    import matplotlib.pyplot as plt

    fig = figure(doc)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# -- markdown (for docs/performance.md) ----------------------------------------------------
def markdown(doc: dict[str, Any]) -> str:
    """The run's figures as Markdown tables: what docs/performance.md's first section quotes
    (only the sections the run has figures for)."""
    lines = [
        f"Command: `{doc.get('command', 'python -m harness bench')}`  ",
        f"Cluster: {doc['cluster']['engine']}, {doc['cluster']['nodes']} nodes; "
        f"{doc['machine']['cpus']} CPUs; load average before/after "
        f"{doc['machine']['load_before'][0]:.1f} / {doc['machine']['load_after'][0]:.1f}; "
        f"{doc['settings']['seconds']:g} s per figure; run {doc['started']}.",
    ]
    lines += _throughput_markdown(doc)
    if series(doc, "publish"):
        lines += [
            "",
            "| publish | concurrency | messages/s | p50 / p99 ms |",
            "|---|---:|---:|---:|",
        ]
    for r in series(doc, "publish"):
        mode = "single `publish`" if r["batch"] == 1 else f"`publish_many` of {r['batch']}"
        lines.append(
            f"| {mode} | {r['concurrency']} | {r['messages_per_second']:,.0f} | "
            f"{_ms(r['p50_ms'])} / {_ms(r['p99_ms'])} |"
        )
    if series(doc, "claim_latency"):
        lines += [
            "",
            "| claim latency, one claimer | groups | p50 ms | p99 ms |",
            "|---|---:|---:|---:|",
        ]
    for r in series(doc, "claim_latency"):
        lines.append(
            f"| {r['backlog']:,} queued | {r['groups']:,} | {_ms(r['p50_ms'])} | "
            f"{_ms(r['p99_ms'])} |"
        )
    if series(doc, "sync_vs_async"):
        lines += [
            "",
            "| claim+ack cycles (windows: threads, tasks, tasks, threads) | concurrency "
            "| cycles/s | p50 / p99 ms |",
            "|---|---:|---:|---:|",
        ]
    for r in series(doc, "sync_vs_async"):
        lines.append(
            f"| {_mode(r)} | {r['concurrency']} | {r['per_second']:,.0f} | "
            f"{_ms(r['p50_ms'])} / {_ms(r['p99_ms'])} |"
        )
    if doc["targets"]:
        lines += ["", "| target | ratio | required | met |", "|---|---:|---:|:---:|"]
    for t in doc["targets"]:
        value = "n/a" if t["value"] is None else f"{t['value']:.2f}"
        bound = f"{'≤' if t['at_most'] else '≥'} {t['required']:.2f}"
        lines.append(
            f"| {t['name']} ({t['detail']}) | {value} | {bound} | "
            f"{'yes' if t['met'] else '**no**'} |"
        )
    kept = doc.get("ledger")
    if kept:
        lines += ["", f"Against earlier runs on this machine ({kept['file']}):", ""]
        lines += [f"- {line}" for line in kept["lines"]]
    cost = breakdown_markdown(doc)
    return "\n".join(lines) + "\n" + ("\n" + cost if cost else "")


def _throughput_markdown(doc: dict[str, Any]) -> list[str]:
    """The throughput table with each ratio's INSERT figure, or nothing without figures."""
    levels = levels_of(doc)
    if not levels:
        return []
    head = "| operation | " + " | ".join(f"{c} client{'s' if c > 1 else ''}" for c in levels)
    lines = [
        "",
        "Throughput in operations/s (ratio to the INSERTs/s measured just before it, at the "
        "same concurrency), then p50 / p99 latency in ms:",
        "",
        head + " |",
        "|---|" + "---:|" * len(levels),
    ]
    for label, key in SERIES:
        if not series(doc, key):
            continue
        cells = []
        for c in levels:
            r = row_at(doc[key], c)
            base = baseline(doc, key, c)
            ratio = ratio_of(rate_at(doc[key], c), base)
            if r is None:
                cells.append("-")
                continue
            text = f"{r['per_second']:,.0f}"
            if key != "store_insert" and ratio is not None:
                text += f" ({ratio:.2f} of {base:,.0f})"
            if r.get("empty"):
                text += " (queue ran dry: capped)"
            cells.append(f"{text}<br>{_ms(r['p50_ms'])} / {_ms(r['p99_ms'])} ms")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return [*lines, "", RATIO_NOTE]
