"""The pages ``serve`` makes for folders that have no report: a run that recorded no
history (it failed before its workload started: the harness's error, its options, its
files) and a shrink's result (``shrink.md`` as HTML, its files linked)."""

from __future__ import annotations

from html import escape
from pathlib import Path

from ..store import RunStore
from .index import _page, href
from .markdown import to_html

SHRINK_MD = "shrink.md"
SHRINK_HTML = "shrink.html"


def failed_page(root: Path, folder: Path) -> str:
    """The page of the run in ``folder`` that recorded no history: why, and what it wrote."""
    rel = folder.relative_to(root).as_posix()
    store = RunStore(folder)
    run = store.run_info()
    run = run if isinstance(run, dict) else {}
    summary = run.get("summary") if isinstance(run.get("summary"), dict) else {}
    options = run.get("options") if isinstance(run.get("options"), dict) else {}
    reason = run.get("reason") or summary.get("error")
    if reason:
        why = (
            "<p>This run recorded no history: the harness stopped before the workload "
            f"started, so there is nothing to judge. Its error:</p><pre>{escape(str(reason))}"
            "</pre>"
        )
    elif run:
        why = "<p>This run recorded no history, and its record names no error.</p>"
    else:
        why = (
            "<p>This folder holds no history and no <code>run.json</code>: the run was "
            "interrupted or killed before it wrote its record.</p>"
        )
    rows = "".join(
        f"<tr><td>{escape(str(k))}</td><td>{escape(str(v))}</td></tr>"
        for k, v in sorted(options.items())
        if v not in (None, [], ())
    )
    body = [f'<section id="why"><h2>Why there is no report</h2>{why}</section>']
    if rows:
        body.append(
            f'<section id="options"><h2>Options</h2><table><tbody>{rows}</tbody></table></section>'
        )
    body.append(_files(root, folder))
    return _page(f"Run without a history: {rel}", "\n".join(body))


def shrink_page(root: Path, folder: Path) -> str:
    """A shrink's result: its ``shrink.md`` as HTML, and its files."""
    rel = folder.relative_to(root).as_posix()
    text = (folder / SHRINK_MD).read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    title = lines[0].lstrip("# ").strip() if lines and lines[0].startswith("#") else rel
    body = to_html(lines[1:] if lines and lines[0].startswith("#") else lines)
    return _page(title, f'<section id="shrink">{body}</section>\n{_files(root, folder)}')


def _files(root: Path, folder: Path) -> str:
    """The folder's files and subfolders, linked."""
    rel = folder.relative_to(root).as_posix()
    items = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith("."):
            continue
        name = p.name + ("/" if p.is_dir() else "")
        items.append(f'<li><a href="{href(rel, name)}">{escape(name)}</a></li>')
    listed = "".join(items) or "<li>nothing</li>"
    return f'<section id="files"><h2>Files</h2><ul>{listed}</ul></section>'
