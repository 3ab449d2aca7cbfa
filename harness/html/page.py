"""``report.html``: one self-contained page per run (no network: CSS, script and plots inline).

It holds what ``report.md`` holds, from the same :class:`harness.report.ReportParts`
(judged once for both), and what a browser adds: the anomalies' example lines as links
into a viewer of the whole history, the plots embedded as ``data:`` URIs, and a timeline
of every operation per process with the faults shaded, drawn on a canvas from columns of
numbers (:mod:`.timeline`), so a run of 100,000 operations makes no 100,000 DOM nodes.
The history viewer renders only the lines in view.
"""

from __future__ import annotations

import base64
import gzip
import json
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from .. import divergence
from ..checker import ANOMALIES as ANOMALY_KINDS
from ..explanations import explain
from ..history import HistoryFormatError, gc_paused, read_history
from ..report import PLOTS, REPORT_EXAMPLES, ReportParts, anomaly_count, report_parts
from ..store import REPORT_HTML
from ..verdict import ANOMALIES, INCONCLUSIVE, VALID
from .markdown import inline, to_html
from .timeline import timeline_or_error

VERDICT_CLASS = {VALID: "valid", ANOMALIES: "anomalies", INCONCLUSIVE: "inconclusive"}


def asset(name: str) -> str:
    """The text of ``assets/NAME`` (shipped with the package)."""
    return resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def script_json(data: Any) -> str:
    """``data`` as JSON safe inside a ``<script>`` element (no ``</script>``, no ``<!--``):
    every ``<`` is written ``\\u003c``, which JSON reads back as the same character."""
    return json.dumps(data, separators=(",", ":"), default=str).replace("<", "\\u003c")


def packed(text: str) -> str:
    """``text`` gzipped, in base64: the page's data, unpacked by its script (a run's
    history shrinks about tenfold, and the page loads that much faster)."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=5)).decode()


def write_html(
    run_dir: str | Path,
    summary: dict | None = None,
    run: dict | None = None,
    parts: ReportParts | None = None,
) -> Path:
    """Write ``run_dir/report.html`` and return its path (arguments as
    :func:`harness.report.write_report`'s)."""
    parts = parts if parts is not None else report_parts(run_dir, summary, run)
    return parts.store.write_text(REPORT_HTML, render(parts))


def render(parts: ReportParts) -> str:
    """The page of the run ``parts`` describes."""
    result = parts.judgement.result
    label = "unreadable" if parts.error else parts.judgement.verdict.label
    examples = _examples(result)
    marked = {i for shown in examples.values() for ex in shown for i in ex if isinstance(i, int)}
    events = _events(parts)
    timeline, no_timeline = timeline_or_error(events, marked)
    sections = [
        ("summary", "Verdict and summary", _summary(parts)),
        ("anomalies", "Anomalies", _anomalies(result, examples, parts.history)),
        ("plots", "Plots", _plots(parts)),
        ("timeline", "Timeline", _timeline(no_timeline)),
        ("history", "History", _history(parts)),
    ]
    if parts.tail:  # its Markdown has its own headings: Refusals, Statistics
        sections.insert(4, ("statistics", "Statistics", to_html(parts.tail)))
    nav = "".join(f'<a href="#{key}">{escape(title)}</a>' for key, title, _ in sections)
    body = "\n".join(
        f'<section id="{key}">'
        + ("" if key == "statistics" else f"<h2>{escape(title)}</h2>\n")
        + f"{html}</section>"
        for key, title, html in sections
    )
    data = {"timeline": timeline, "examples": examples}
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><title>{escape(parts.title)}</title>
<style>{asset("report.css")}</style></head>
<body><header><h1>{escape(parts.title)}</h1>
<span class="verdict {VERDICT_CLASS.get(label, "none")}" id="verdict">{escape(label)}</span>
<nav>{nav}</nav></header>
<main>{body}</main>
<script type="application/gzip" id="report-data">{packed(json.dumps(data))}</script>
<script type="application/gzip" id="history-data">{packed(chr(10).join(parts.history))}</script>
<script>{asset("report.js")}</script>
</body></html>
"""


def _summary(parts: ReportParts) -> str:
    setup = to_html(parts.setup)
    more = f"<details><summary>Scenario, options and versions</summary>{setup}</details>"
    return to_html(parts.verdict) + (more if parts.setup else "") + to_html(parts.summary)


def _events(parts: ReportParts) -> list[dict] | None:
    if parts.error is not None and not parts.history:
        return None
    try:
        with gc_paused():
            return read_history(parts.store.history)
    except (OSError, HistoryFormatError):
        return None


def _examples(result: dict | None) -> dict[str, list]:
    """Each anomaly kind found -> the examples shown (at most REPORT_EXAMPLES)."""
    anomalies = (result or {}).get("anomalies") or {}
    return {
        name: (anomalies[name].get("examples") or [])[:REPORT_EXAMPLES]
        for name in ANOMALY_KINDS
        if (anomalies.get(name) or {}).get("count")
    }


def _anomalies(result: dict | None, examples: dict[str, list], history: list[str]) -> str:
    if result is None:
        return "<p>Not checked: no anomalies to show.</p>"
    anomalies = result.get("anomalies") or {}
    unjudged = result.get("unjudged") or {}
    rows = "".join(
        f'<tr class="{"found" if name in examples else ""}"><td>'
        + (f'<a href="#anomaly-{name}">{name}</a>' if name in examples else name)
        + f'</td><td class="num">{anomaly_count(name, anomalies, unjudged)}</td></tr>'
        for name in ANOMALY_KINDS
    )
    out = [f"<table><thead><tr><th>anomaly</th><th>count</th></tr></thead>{rows}</table>"]
    out += [
        f'<p class="note">Not judged: {name}: {escape(str(body.get("why")))}.</p>'
        for name, body in unjudged.items()
    ]
    if not examples:
        out.append("<p>No anomaly found.</p>")
    for name, shown in examples.items():
        count = anomalies[name]["count"]
        out.append(f'<div class="anomaly" id="anomaly-{name}"><h3>{name}: {count}</h3>')
        out.append(
            f'<p class="why"><strong>Why it is an anomaly:</strong> {inline(explain(name))}</p>'
        )
        if name == divergence.NAME:
            out.append(_divergence(shown))
        else:
            out.append(f"<p>{len(shown)} of the examples; each line links to the history.</p>")
            out += [_example(name, k, ex, history) for k, ex in enumerate(shown, 1)]
        out.append("</div>")
    return "\n".join(out)


def _example(name: str, k: int, example: list, history: list[str]) -> str:
    indices = [i for i in example if isinstance(i, int)]
    link = f'<a class="example" href="#ex-{name}-{k}" data-lines="{",".join(map(str, indices))}">'
    lines = "".join(
        f'<li><a class="line" href="#h-{i}">{i}</a> <code>'
        + escape(history[i] if 0 <= i < len(history) else f"(no line {i})")
        + "</code></li>"
        for i in indices
    )
    head = f"{link}Example {k}</a> (all its lines in the history)"
    return f'<div class="ex">{head}<ul>{lines}</ul></div>'


def _divergence(shown: list) -> str:
    out = [f"<p>{len(shown)} of the examples, each as every node held it:</p>"]
    for k, example in enumerate(shown, 1):
        if not isinstance(example, dict):
            continue
        per_node = example.get("rows", example.get("columns")) or {}
        text = "\n".join(f"{node}: {json.dumps(row)}" for node, row in per_node.items())
        out.append(f"<p>Example {k}: {escape(divergence.describe(example))}</p>")
        out.append(f"<pre><code>{escape(text)}</code></pre>")
    return "\n".join(out)


def _plots(parts: ReportParts) -> str:
    out = []
    for name, caption in PLOTS:
        path = parts.store.path(name)
        if path.is_file():
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            out.append(
                f'<figure><img alt="{escape(caption)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{escape(caption)}</figcaption></figure>"
            )
    if out:
        return "\n".join(out)
    options = parts.run.get("options") if isinstance(parts.run, dict) else None
    redraw = f"<code>python -m harness plot {escape(str(parts.store.root))}</code>"
    why = (
        "Plots are off for this run (<code>--no-plots</code>)"
        if isinstance(options, dict) and options.get("plots") is False
        else "This folder holds no plots"
    )
    return (
        f'<p class="note" id="no-plots">{why}: {redraw} draws them and writes this page again.</p>'
    )


def _timeline(why_not: str | None) -> str:
    if why_not is not None:
        return f'<p class="note">No timeline: {escape(why_not)}.</p>'
    return """<p>Every operation per process (one row each), from its invoke to its completion,
coloured by outcome; the faults shaded across all rows, one colour per kind, and named in
the strip on top. Wheel: zoom in time around the pointer; drag: pan; click an operation:
its lines in the history.</p>
<div class="tl-controls"><button type="button" id="tl-reset">Whole run</button>
<span id="tl-range"></span></div>
<div id="tl-legend" class="legend"></div>
<div id="tl-wrap"><canvas id="tl-canvas"></canvas><div id="tl-tip" hidden></div></div>"""


def _history(parts: ReportParts) -> str:
    n = len(parts.history)
    if not n:
        return (
            f'<p class="note">No history lines: {escape(parts.error or "the file is empty")}.</p>'
        )
    return f"""<p>{n} lines of <code>history.jsonl</code>; a link to a line scrolls here and
highlights it. <label>Go to line <input id="hv-goto" type="number" min="0" max="{n - 1}"></label>
<label>Filter <input id="hv-filter" type="search" placeholder="text in the line"></label>
<span id="hv-count"></span></p>
<div id="hv"><div id="hv-spacer"></div></div>"""
