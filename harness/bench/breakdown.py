"""Where the time goes: the cost breakdown of a bench run, and engines side by side.

Pure functions of ``bench.json`` documents (see :mod:`harness.bench.cost` for how each
``cost`` figure is measured), rendered as Rich tables and as Markdown.
"""

from __future__ import annotations

from typing import Any

from .series import SERIES, baseline, rate_at, ratio_of, row_at, series

Doc = dict[str, Any]

#: cost columns: (heading, key in a row's ``cost``, format)
COLUMNS = (
    ("client CPU ms", "client_cpu_ms", "{:.3f}"),
    ("nodes CPU ms", "nodes_cpu_ms", "{:.3f}"),
    ("leader CPU ms", "leader_cpu_ms", "{:.3f}"),
    ("requests", "requests_per_op", "{:.2f}"),
    ("statements", "statements_per_op", "{:.2f}"),
    ("SQLite opcodes", "opcodes_per_op", "{:,.0f}"),
    ("bytes out", "bytes_out_per_op", "{:,.0f}"),
    ("bytes in", "bytes_in_per_op", "{:,.0f}"),
    ("busy cores", "busy_cores", "{:.2f}"),
)
#: the series with a cost breakdown (the seed's is shown too: it is the slow reference)
COSTED = tuple((label, key) for label, key in SERIES)


def cost_rows(doc: Doc) -> list[tuple[str, int, dict[str, Any]]]:
    """(series label, concurrency, cost) for every row that has a cost figure."""
    out = []
    for label, key in COSTED:
        for row in sorted(series(doc, key), key=lambda r: r["concurrency"]):
            if row.get("cost"):
                out.append((label, row["concurrency"], row["cost"]))
    return out


def _cell(cost: dict[str, Any], key: str, fmt: str) -> str:
    value = cost.get(key)
    return "n/a" if value is None else fmt.format(value)


def breakdown_table(doc: Doc) -> Any:
    """A Rich table: per operation, where its CPU, requests and bytes go."""
    from rich.table import Table

    t = Table(
        title="Where the time goes: per operation, CPU of this process (client) and of the "
        "nodes, requests, statements and body bytes; busy cores: all of them together"
    )
    t.add_column("operation")
    t.add_column("clients", justify="right")
    for heading, _, _ in COLUMNS:
        t.add_column(heading, justify="right")
    for label, c, cost in cost_rows(doc):
        t.add_row(label, str(c), *(_cell(cost, k, f) for _, k, f in COLUMNS))
    return t


def breakdown_markdown(doc: Doc) -> str:
    rows = cost_rows(doc)
    if not rows:
        return ""
    lines = [
        "Where the time goes, per operation: CPU of the benchmark process (client) and of "
        "the nodes over each measured window, requests, statements and their SQLite opcodes "
        "(program size, as each replica prepares it afresh), request/reply body "
        "bytes; busy cores is the client's and the nodes' CPU together per second:",
        "",
        "| operation | clients | " + " | ".join(h for h, _, _ in COLUMNS) + " |",
        "|---|---:|" + "---:|" * len(COLUMNS),
    ]
    for label, c, cost in rows:
        cells = " | ".join(_cell(cost, k, f) for _, k, f in COLUMNS)
        lines.append(f"| {label} | {c} | {cells} |")
    return "\n".join(lines) + "\n"


# -- engines side by side ----------------------------------------------------------------
def _engine_label(doc: Doc) -> str:
    info = doc.get("cluster", {})
    version = info.get("version")
    return f"{info.get('engine', '?')}{' ' + version if version else ''}"


def levels_of_all(docs: list[Doc]) -> list[int]:
    return sorted({r["concurrency"] for d in docs for r in d.get("store_insert", [])})


def comparison_cells(docs: list[Doc]) -> list[tuple[str, list[str]]]:
    """Rows of the side-by-side table: (label, one cell per engine x concurrency).

    The store's INSERT rate in operations/s; every other series as its ratio to the
    INSERT rate measured just before it on the same engine (ratios travel between
    machines and engines, absolute rates do not).
    """
    levels = levels_of_all(docs)
    rows: list[tuple[str, list[str]]] = []
    for label, key in SERIES:
        if not any(series(d, key) for d in docs):
            continue
        cells = []
        for d in docs:
            for c in levels:
                rate = rate_at(series(d, key), c)
                if key == "store_insert":
                    cells.append("-" if rate is None else f"{rate:,.0f}/s")
                    continue
                ratio = ratio_of(rate, baseline(d, key, c))
                row = row_at(series(d, key), c)
                dry = " (dry)" if row and row.get("empty") else ""
                cells.append("-" if ratio is None else f"{ratio:.2f}{dry}")
        rows.append((label, cells))
    lat = []
    for d in docs:
        by = {r["backlog"]: r for r in d.get("claim_latency", [])}
        if len(by) == 2:
            small, big = (by[k] for k in sorted(by))
            ratio = ratio_of(big["p50_ms"], small["p50_ms"])
            lat.append(
                f"{ratio:.2f} ({big['p50_ms']:.1f} / {small['p50_ms']:.1f} ms)" if ratio else "-"
            )
        else:
            lat.append("-")
    if any(x != "-" for x in lat):
        rows.append(("claim p50, 1M queued / 1k queued", _spread(lat, len(levels))))
    pub = []
    for d in docs:
        ratios = []
        for c in levels:
            single = next(
                (r for r in d.get("publish", []) if r["concurrency"] == c and r["batch"] == 1),
                None,
            )
            batched = next(
                (r for r in d.get("publish", []) if r["concurrency"] == c and r["batch"] > 1),
                None,
            )
            ratio = (
                ratio_of(batched["messages_per_second"], single["messages_per_second"])
                if single and batched
                else None
            )
            ratios.append("-" if ratio is None else f"{ratio:.1f}x")
        pub.extend(ratios)
    if any(x != "-" for x in pub):
        rows.append(("batched / single publish, messages/s", pub))
    return rows


def _spread(per_engine: list[str], width: int) -> list[str]:
    """One value per engine placed in the engine's first column, the rest blank."""
    out = []
    for value in per_engine:
        out += [value] + [""] * (width - 1)
    return out


def comparison_table(docs: list[Doc]) -> Any:
    from rich.table import Table

    levels = levels_of_all(docs)
    t = Table(title="Engines side by side (INSERTs/s; every other figure a ratio to them)")
    t.add_column("operation")
    for d in docs:
        for c in levels:
            t.add_column(f"{_engine_label(d)}\n{c} client{'s' if c > 1 else ''}", justify="right")
    for label, cells in comparison_cells(docs):
        t.add_row(label, *cells)
    return t


def comparison_markdown(docs: list[Doc]) -> str:
    levels = levels_of_all(docs)
    head = ["operation"] + [
        f"{_engine_label(d)}, {c} client{'s' if c > 1 else ''}" for d in docs for c in levels
    ]
    lines = [
        "Engines side by side: the store's single-statement INSERTs/s, and every other "
        "figure as its ratio to the INSERTs/s measured just before it on the same engine "
        "at the same concurrency.",
        "",
        "Commands: " + "; ".join(f"`{d.get('command', '')}`" for d in docs[:1]),
        "",
        "| " + " | ".join(head) + " |",
        "|---|" + "---:|" * (len(head) - 1),
    ]
    for label, cells in comparison_cells(docs):
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    for d in docs:
        text = breakdown_markdown(d)
        if text:
            lines += [f"### {_engine_label(d)}", "", text]
    return "\n".join(lines) + "\n"
