"""Replica divergence: compare what each node holds once all have applied the same log.

The runner records, after heal and drain, every node's tables read from that node alone
(``replicas.json``, written by :mod:`harness.replicas`). :func:`compare` is a pure
function of that record: a row that is not the same on every node (missing on some, or
with other values) is one ``replica-divergence``, and so is a table that some nodes lack
or whose columns differ. Rows are matched by the table's primary key (the whole row
for a table without one), so one changed column shows as one example naming the row.

The record (``version`` 1)::

    {"version": 1, "error": null, "waited": 0.4, "waited_for": "...",
     "nodes": [{"id": "n1", "url": "...", "applied_index": 812, "fsm_index": 811,
                "tables": {"messages": {"columns": ["seq", ...], "key": ["seq"],
                                        "rows": [[7, "g1", ...], ...]}}}, ...]}

``error`` set means no comparable snapshot was taken (the reason says why).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.wording import plural

from .errors import HarnessError
from .store import REPLICAS

NAME = "replica-divergence"
#: the record's file in a run folder (:mod:`harness.store` names it)
FILE = REPLICAS
VERSION = 1
MAX_EXAMPLES = 10


class SnapshotFormatError(HarnessError, ValueError):
    """A replicas record that does not have the documented shape; the message says where."""


def compare(record: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compare the nodes of a replicas record: (the anomaly entry, statistics).

    The anomaly entry is ``{"count", "examples"}`` as for every anomaly; each example is
    ``{"table", "key", "rows": {node id: row or None}}`` (``key`` maps the key columns
    to their values), or ``{"table", "columns": {node id: columns or None}}`` for a
    table missing on some nodes or shaped differently. The statistics say whether the
    replicas were compared and, if not, why. Raises :class:`SnapshotFormatError` for a
    record of the wrong shape.
    """
    if record is None:
        return _entry([]), {"compared": False, "reason": f"no {FILE} beside the history"}
    nodes = _nodes(record)
    if record.get("error"):
        return _entry([]), {"compared": False, "reason": str(record["error"])}
    if len(nodes) < 2:
        return _entry([]), {"compared": False, "reason": "fewer than two nodes were read"}
    ids = [n["id"] for n in nodes]
    names = sorted({t for n in nodes for t in n["tables"]})
    examples: list[dict[str, Any]] = []
    rows_per_table: dict[str, int] = {}
    for table in names:
        shapes = {n["id"]: _shape(n["tables"].get(table)) for n in nodes}
        if len({json.dumps(s) for s in shapes.values()}) > 1:
            examples.append({"table": table, "columns": shapes})
            continue
        found = _diff_table(table, ids, [n["tables"][table] for n in nodes])
        rows_per_table[table] = max(len(n["tables"][table]["rows"]) for n in nodes)
        examples.extend(found)
    stats = {
        "compared": True,
        "nodes": ids,
        "applied_index": {n["id"]: n.get("applied_index") for n in nodes},
        "tables": rows_per_table,
        "differing_tables": sorted({ex["table"] for ex in examples}),
    }
    return _entry(examples), stats


def read(path: Path) -> dict[str, Any] | None:
    """The replicas record at ``path``, or None when there is none.

    Raises :class:`SnapshotFormatError` for a file that is not JSON, ``OSError`` when
    it cannot be read.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        raise SnapshotFormatError(f"not JSON: {e}") from None


def summary(stats: Mapping[str, Any]) -> str:
    """One line on the replicas' comparison, from :func:`compare`'s statistics."""
    if not stats.get("compared"):
        return f"replicas: not compared ({stats.get('reason')})"
    indexes = sorted({str(v) for v in stats["applied_index"].values()})
    tables = ", ".join(f"{t} {plural(n, 'row')}" for t, n in stats["tables"].items()) or "no tables"
    differ = stats.get("differing_tables") or []
    verdict = f"DIFFER in {', '.join(differ)}" if differ else "identical"
    return (
        f"replicas: {len(stats['nodes'])} nodes at applied index {'/'.join(indexes)}, "
        f"{verdict} ({tables})"
    )


def not_compared(reason: str) -> dict[str, Any]:
    """A record saying no snapshot could be taken, and why."""
    return {"version": VERSION, "error": reason, "nodes": []}


def describe(example: Mapping[str, Any]) -> str:
    """One short line for an example: the table, the row's key and which nodes differ."""
    table = example.get("table")
    if "columns" in example:
        cols = example["columns"]
        missing = sorted(k for k, v in cols.items() if v is None)
        if missing:
            return f"{table}: table missing on {', '.join(missing)}"
        return f"{table}: columns differ between nodes"
    rows = example.get("rows") or {}
    key = ", ".join(f"{k}={v!r}" for k, v in (example.get("key") or {}).items())
    if not key:  # a table without a primary key: the row is its own key
        key = json.dumps(next((r for r in rows.values() if r is not None), None))
    missing = sorted(k for k, v in rows.items() if v is None)
    what = f"missing on {', '.join(missing)}" if missing else "values differ"
    return f"{table} [{key}]: {what}"


# -- internals ------------------------------------------------------------------------------
def _entry(examples: list[dict[str, Any]]) -> dict[str, Any]:
    return {"count": len(examples), "examples": examples[:MAX_EXAMPLES]}


def _nodes(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not isinstance(record, Mapping):
        raise SnapshotFormatError(f"{FILE} must hold a JSON object")
    if record.get("version") != VERSION:
        raise SnapshotFormatError(f"{FILE}: version {record.get('version')!r}, expected {VERSION}")
    nodes = record.get("nodes")
    if not isinstance(nodes, list):
        raise SnapshotFormatError(f"{FILE}: 'nodes' must be a list")
    seen: set[str] = set()
    for i, node in enumerate(nodes):
        where = f"{FILE}: nodes[{i}]"
        if not isinstance(node, dict) or not isinstance(node.get("id"), str):
            raise SnapshotFormatError(f"{where} must be an object with a string 'id'")
        if node["id"] in seen:
            raise SnapshotFormatError(f"{where}: node {node['id']!r} appears twice")
        seen.add(node["id"])
        tables = node.get("tables")
        if not isinstance(tables, dict):
            raise SnapshotFormatError(f"{where}: 'tables' must be an object")
        for name, t in tables.items():
            ok = (
                isinstance(t, dict)
                and isinstance(t.get("columns"), list)
                and isinstance(t.get("key"), list)
                and isinstance(t.get("rows"), list)
                and all(isinstance(r, list) and len(r) == len(t["columns"]) for r in t["rows"])
                and all(k in t["columns"] for k in t["key"])
            )
            if not ok:
                raise SnapshotFormatError(
                    f"{where}: table {name!r} needs 'columns', 'key' (some of the columns) "
                    "and 'rows' (lists as long as 'columns')"
                )
    return nodes


def _shape(table: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if table is None else {"columns": table["columns"], "key": table["key"]}


def _diff_table(
    name: str, ids: Sequence[str], tables: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Examples for the rows of one table (same columns on every node) that differ."""
    columns, key = tables[0]["columns"], tables[0]["key"]
    at = [columns.index(k) for k in key]
    per_node = [_keyed(t["rows"], at) for t in tables]
    found: list[dict[str, Any]] = []
    for k in sorted(set().union(*per_node), key=_order):
        rows = [p.get(k) for p in per_node]
        if all(r == rows[0] for r in rows):
            continue
        first = next(r for r in rows if r is not None)
        found.append(
            {
                "table": name,
                "key": {c: first[i] for c, i in zip(key, at, strict=True)} if at else {},
                "rows": dict(zip(ids, rows, strict=True)),
            }
        )
    return found


def _keyed(rows: Sequence[list], at: Sequence[int]) -> dict[tuple, list]:
    """Each row under its key: the key columns' values, or for a table with no key the
    whole row and which copy of it this is (so duplicated rows are counted)."""
    out: dict[tuple, list] = {}
    copies: Counter[str] = Counter()
    for row in rows:
        if at:
            out[(_canon([row[i] for i in at]), 0)] = row
        else:
            text = _canon(row)
            out[(text, copies[text])] = row
            copies[text] += 1
    return out


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _order(k: tuple[str, int]) -> tuple:
    """Sort keys by value (numbers numerically), whatever their types."""
    values = json.loads(k[0])
    return (
        tuple(
            (0, v, "") if isinstance(v, int | float) and not isinstance(v, bool) else (1, 0, str(v))
            for v in values
        ),
        k[1],
    )
