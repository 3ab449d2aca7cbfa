"""The documents hold together: every relative link in README.md and docs/ resolves (the
file, and the heading its anchor names), and docs/architecture.md names every module of
the harness (issue 42)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import harness

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGE = Path(harness.__file__).resolve().parent
#: the documents whose links are held: the front door, docs/*.md and the folders' READMEs
DOCUMENTS = [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted(DOCS.glob("*/README.md"))]
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def _prose(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with their numbers, code spans blanked."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, CODE_SPAN.sub("``", line)))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _raw_headings(path: Path) -> list[str]:
    """The heading lines as written (code spans kept): their anchors keep the code's text."""
    text = path.read_text(encoding="utf-8")
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,6}\s", line):
            out.append(line)
    return out


def _anchor_set(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in _raw_headings(path):
        base = slug(re.sub(r"^#+\s+", "", line).replace("`", ""))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def broken_links(path: Path) -> list[str]:
    """Each relative link of ``path`` that names no file, or no heading of its file."""
    broken = []
    for number, line in _prose(path.read_text(encoding="utf-8")):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            name, _, anchor = target.partition("#")
            file = (path.parent / name).resolve() if name else path
            where = f"{path.relative_to(ROOT)}:{number}: {target}"
            if not file.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in _anchor_set(file):
                broken.append(f"{where} (no heading #{anchor} in {file.relative_to(ROOT)})")
    return broken


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_the_link_check_sees_a_broken_link_and_a_missing_heading(tmp_path: Path) -> None:
    global ROOT
    doc = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# B\n\n## Its `part` (one)\n")
    doc.write_text(
        "# A\n[ok](b.md#its-part-one) [self](#a) [web](https://example.org/x)\n"
        "`[code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n"
        "[gone](nowhere.md) [no heading](b.md#its-part)\n"
    )
    saved, ROOT = ROOT, tmp_path
    try:
        assert broken_links(doc) == [
            "a.md:7: nowhere.md (no such file)",
            "a.md:7: b.md#its-part (no heading #its-part in b.md)",
        ]
    finally:
        ROOT = saved


def harness_modules() -> list[str]:
    """Every module of the harness as a path from the repository (``harness/x/y.py``),
    package faces (``__init__.py``) and ``__main__.py`` aside."""
    return sorted(
        p.relative_to(ROOT).as_posix()
        for p in PACKAGE.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py") and "__pycache__" not in p.parts
    )


FOLDER = re.compile(r"`((?:harness|rqueue)/(?:[\w]+/)*)`")
ITEM = re.compile(r"^(\s*)- ")


def list_items(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """Each list item's own text (its sub-items apart) and the folders it is about: the
    ones it names in backticks (``harness/cluster/docker/``), else its parent's."""
    items: list[tuple[str, tuple[str, ...]]] = []
    stack: list[tuple[int, int]] = []  # (indent, index in items) of the open items
    for line in text.splitlines():
        m = ITEM.match(line)
        if m:
            indent = len(m.group(1))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            named = tuple(FOLDER.findall(line))
            context = named or (items[stack[-1][1]][1] if stack else ())
            items.append((line, context))
            stack.append((indent, len(items) - 1))
        elif stack and line.startswith(" ") and line.strip():
            own, context = items[stack[-1][1]]
            named = tuple(FOLDER.findall(line))
            items[stack[-1][1]] = (f"{own}\n{line}", context + named)
        elif not line.strip() or not line.startswith(" "):
            stack.clear()
    return items


def named_in_architecture(module: str, text: str) -> bool:
    """Whether docs/architecture.md names ``module``: its path, or its name in backticks
    in a list item or table row about its folder (`harness/faults/`'s item naming
    `disk`; `harness/node/`'s naming `sql/` and `tree` for ``harness/node/sql/tree.py``)."""
    if module in text:
        return True
    folder, _, name = module.rpartition("/")
    folder += "/"
    stem = f"`{name.removesuffix('.py')}`"
    rows = [
        (line, tuple(FOLDER.findall(line))) for line in text.splitlines() if line.startswith("|")
    ]
    for own, context in [*list_items(text), *rows]:
        for about in context:
            if folder.startswith(about) and stem in own:
                rest = folder[len(about) :]
                if not rest or f"`{rest}`" in own:
                    return True
    return False


def test_architecture_names_every_harness_module() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    missing = [m for m in harness_modules() if not named_in_architecture(m, text)]
    assert missing == [], "docs/architecture.md does not name: " + ", ".join(missing)


def floors(text: str) -> dict[str, int]:
    """The rooms of docs/architecture.md's floor table and their floors."""
    table = text.split("## Floors, from the top down", 1)[1].split("\n## ", 1)[0]
    rooms: dict[str, int] = {}
    for line in table.splitlines():
        m = re.match(r"^\|\s*(\d+)\s*\|(.*)\|\s*$", line)
        if m:
            for room in re.findall(r"`([^`]+)`", m.group(2)):
                rooms[room] = int(m.group(1))
    return rooms


def room_of(path: str, rooms: dict[str, int]) -> str | None:
    """The room a file is in: its own row, or the deepest folder row holding it."""
    if path in rooms:
        return path
    folders = [r for r in rooms if r.endswith("/") and path.startswith(r)]
    return max(folders, key=len) if folders else None


def _file_of(dotted: str) -> str | None:
    """The repository path of module ``dotted`` (a package: its ``__init__.py``)."""
    base = ROOT / dotted.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path.relative_to(ROOT).as_posix()
    return None


def imports_of(path: Path) -> set[str]:
    """The project's files that ``path`` imports, at its top or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    found: set[str | None] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_file_of(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join([*parts, *(node.module.split(".") if node.module else [])])
            found.add(_file_of(module))
            found.update(_file_of(f"{module}.{a.name}") for a in node.names)
    return {f for f in found if f is not None and f.startswith(("harness/", "rqueue/"))}


def test_no_import_runs_up_a_floor() -> None:
    rooms = floors((DOCS / "architecture.md").read_text(encoding="utf-8"))
    sources = sorted(
        p for top in ("harness", "rqueue") for p in (ROOT / top).rglob("*.py")
        if "__pycache__" not in p.parts and p != PACKAGE / "__init__.py"  # a face, one line
    )  # fmt: skip
    unplaced, upward = [], []
    for path in sources:
        here = path.relative_to(ROOT).as_posix()
        room = room_of(here, rooms)
        if room is None:
            unplaced.append(here)
            continue
        for target in sorted(imports_of(path)):
            there = room_of(target, rooms)
            if there is not None and there != room and rooms[there] > rooms[room]:
                upward.append(f"{here} (floor {rooms[room]}) -> {target} (floor {rooms[there]})")
    assert unplaced == [], "in no room of docs/architecture.md's floor table: " + ", ".join(
        unplaced
    )
    assert upward == [], "imports up a floor of docs/architecture.md's table: " + "; ".join(upward)


def test_the_index_links_every_document() -> None:
    index = DOCS / "README.md"
    linked = {
        (DOCS / m.group(1).partition("#")[0]).resolve()
        for _, line in _prose(index.read_text(encoding="utf-8"))
        for m in LINK.finditer(line)
    }
    documents = {p.resolve() for p in [*DOCS.glob("*.md"), *DOCS.glob("*/README.md")]}
    missing = sorted(str(p.relative_to(ROOT)) for p in documents - linked - {index.resolve()})
    assert missing == [], "docs/README.md does not link: " + ", ".join(missing)
