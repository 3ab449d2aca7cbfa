"""The Markdown that :mod:`harness.report` writes, as HTML (its subset only, no library).

``report.md`` and ``report.html`` share their sections' text
(:func:`harness.report.report_parts`); this turns those lines into HTML: ``#``
headings, ``|`` tables (the second row is the alignment row), ``-`` lists, fenced code
blocks, paragraphs, and inline ``**bold**`` and `` `code` ``. Everything else is text,
escaped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape

_INLINE = re.compile(r"\*\*(.+?)\*\*|`([^`]+)`")


def inline(text: str) -> str:
    """One line's text as HTML: escaped, with ``**bold**`` and `` `code` ``."""
    out: list[str] = []
    last = 0
    for m in _INLINE.finditer(text):
        out.append(escape(text[last : m.start()]))
        if m.group(1) is not None:
            out.append(f"<strong>{inline(m.group(1))}</strong>")
        else:
            out.append(f"<code>{escape(m.group(2))}</code>")
        last = m.end()
    out.append(escape(text[last:]))
    return "".join(out)


def to_html(lines: Iterable[str]) -> str:
    """The HTML of ``lines`` of report Markdown, one block after another."""
    out: list[str] = []
    block: list[str] = []
    kind = ""  # the open block: "p", "ul", "table", "code" or ""

    def close() -> None:
        nonlocal kind
        if kind == "p":
            out.append(f"<p>{' '.join(inline(x) for x in block)}</p>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{inline(x)}</li>" for x in block) + "</ul>")
        elif kind == "table":
            out.append(_table(block))
        elif kind == "code":
            out.append(f"<pre><code>{escape(chr(10).join(block))}</code></pre>")
        block.clear()
        kind = ""

    for line in lines:
        if kind == "code":
            if line.startswith("```"):
                close()
            else:
                block.append(line)
            continue
        if line.startswith("```"):
            close()
            kind = "code"
            continue
        heading = re.match(r"(#{1,6}) (.*)", line)
        new = (
            ""
            if not line.strip() or heading
            else "ul"
            if line.startswith("- ")
            else "table"
            if line.startswith("|")
            else "p"
        )
        if new != kind or new == "":
            close()
        if heading:
            level = len(heading.group(1))
            out.append(f"<h{level}>{inline(heading.group(2))}</h{level}>")
        elif new:
            kind = new
            block.append(line[2:] if new == "ul" else line)
    close()
    return "\n".join(out)


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _table(rows: list[str]) -> str:
    head, body = _cells(rows[0]), rows[2:] if len(rows) > 1 else []
    aligns = [c.endswith(":") for c in _cells(rows[1])] if len(rows) > 1 else []

    def cell(tag: str, i: int, text: str) -> str:
        right = ' class="num"' if i < len(aligns) and aligns[i] else ""
        return f"<{tag}{right}>{inline(text)}</{tag}>"

    html = ["<table>"]
    if any(head):
        html.append("<thead><tr>" + "".join(cell("th", i, c) for i, c in enumerate(head)))
        html.append("</tr></thead>")
    html.append("<tbody>")
    for row in body:
        html.append("<tr>" + "".join(cell("td", i, c) for i, c in enumerate(_cells(row))))
        html.append("</tr>")
    html.append("</tbody></table>")
    return "".join(html)
