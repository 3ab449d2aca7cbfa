"""Fault names as data: each kind declares the ``f`` of its window's start and end, the
nemesis records those, and the docs list every registered kind with them."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import harness.faults as faults
from harness.faults import KINDS
from harness.faults.base import Action, FaultKind

ROOT = Path(__file__).resolve().parents[2]


def _table(path: str, heading: str) -> list[list[str]]:
    """The cells of the first table after ``heading`` in the document ``path``."""
    text = "\n" + (ROOT / path).read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1]
    rows = []
    for line in section.splitlines():
        if rows and not line.startswith("|"):
            break
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows[1:]  # the header's row left out


def _names(cell: str) -> list[str]:
    return re.findall(r"`([a-z-]+)`", cell)


def documented_names() -> dict[str, tuple[str, str]]:
    """Per kind, the start and end ``f`` docs/history-format.md's "Fault events" gives."""
    found: dict[str, tuple[str, str]] = {}
    for cells in _table("docs/history-format.md", "## Fault events"):
        (start,), (end,) = _names(cells[1]), _names(cells[2])
        for kind in _names(cells[0]):
            assert kind not in found, f"{kind} documented twice"
            found[kind] = (start, end)
    return found


def test_every_kind_declares_its_names() -> None:
    for name, kind in KINDS.items():
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", kind.f_start), name
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", kind.f_end), name


def test_the_history_format_lists_every_kind_with_its_names() -> None:
    documented = documented_names()
    assert len(documented) >= 20, documented  # the parse found the table
    assert documented == {n: (k.f_start, k.f_end) for n, k in KINDS.items()}


def test_the_fault_kinds_page_lists_every_kind() -> None:
    listed = [n for cells in _table("docs/faults.md", "# Fault kinds") for n in _names(cells[0])]
    assert sorted(listed) == sorted(KINDS)


def test_a_kind_records_the_names_it_declares() -> None:
    """No kind writes an ``Action(...)`` with names of its own: :meth:`FaultKind.action`
    builds every one from the kind's ``f_start`` and ``f_end``."""
    for module in {inspect.getmodule(k) for k in KINDS.values()}:
        assert "Action(" not in inspect.getsource(module), module.__name__
    action = FaultKind.action.__func__(KINDS["grow"], {"nodes": ["n4"]}, print, print)
    assert isinstance(action, Action) and (action.f, action.f_end) == ("join", "remove")
    assert faults.KINDS is KINDS
