"""Read every node's tables once all nodes have applied the same Raft log.

:func:`snapshot` waits (bounded) until every node reports the same applied Raft index
and no node's indexes move between two probes (the applied index, and the index its
database applied where the node reports one: a node may count an entry applied just
before its database has), reads each node's tables from that node alone
(``level=none``), and keeps the reads only if no node's indexes moved meanwhile. The
result is the record :mod:`harness.divergence` compares; it never raises: a snapshot
that could not be taken says why in ``error``.
"""

from __future__ import annotations

import time
from typing import Any

from .cluster.base import Cluster, ClusterError, NodeStatus, QueryRefused, probe_nodes
from .divergence import VERSION

#: what :func:`snapshot` waits for, as the record and its errors say it
WAITED_FOR = (
    "every node to report the same applied Raft index (store.raft.applied_index), "
    "it and the database index (store.fsm_index, where reported) holding still from a "
    "probe before the reads to one after them"
)
#: every table but SQLite's own, except its AUTOINCREMENT counters: a replica that
#: inserted other rows shows there even once the rows are gone
SEQUENCE = "sqlite_sequence"
LIST_TABLES = (
    "SELECT name FROM sqlite_master WHERE type = 'table' "
    f"AND (substr(name, 1, 7) != 'sqlite_' OR name = '{SEQUENCE}') ORDER BY name"
)
_POLL = 0.1


def snapshot(cluster: Cluster, timeout: float, request_timeout: float = 5.0) -> dict[str, Any]:
    """Every node's tables at one agreed applied index (see the module doc)."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    nodes = list(cluster.nodes())
    previous: list[NodeStatus] | None = None
    while True:
        before = probe_nodes([n.url for n in nodes], timeout=min(1.0, request_timeout))
        last = _disagreement(nodes, before)
        if last is None and (previous is None or _indexes(previous) != _indexes(before)):
            last = "the indexes had not yet held still between two probes"
        elif last is None:
            try:
                tables = {n.id: read_tables(cluster, n.id, request_timeout) for n in nodes}
            except QueryRefused as e:  # asking again will not help
                return _failed(f"a node refused to read its tables: {e}", t0)
            except ClusterError as e:
                last = f"a read failed: {e}"
            else:
                after = probe_nodes([n.url for n in nodes], timeout=min(1.0, request_timeout))
                if _indexes(before) == _indexes(after):
                    return {
                        "version": VERSION,
                        "error": None,
                        "waited_for": WAITED_FOR,
                        "waited": round(time.monotonic() - t0, 3),
                        "nodes": [
                            {
                                "id": n.id,
                                "url": n.url,
                                "applied_index": st.applied_index,
                                "fsm_index": st.fsm_index,
                                "tables": tables[n.id],
                            }
                            for n, st in zip(nodes, after, strict=True)
                        ],
                    }
                last = "a node applied more entries while the tables were read"
        previous = before
        if time.monotonic() >= deadline:
            return _failed(f"waited {timeout:.1f}s for {WAITED_FOR}; gave up: {last}", t0)
        time.sleep(_POLL)


def _failed(reason: str, t0: float) -> dict[str, Any]:
    return {
        "version": VERSION,
        "error": reason,
        "waited_for": WAITED_FOR,
        "waited": round(time.monotonic() - t0, 3),
        "nodes": [],
    }


def read_tables(cluster: Cluster, node_id: str, timeout: float) -> dict[str, dict[str, Any]]:
    """One node's tables (see :data:`LIST_TABLES`): columns, primary key and rows each."""
    listed = cluster.read_node(node_id, [LIST_TABLES], timeout)[0]
    names = [row[0] for row in listed.get("values") or []]
    if not names:
        return {}
    statements: list[Any] = []  # all in the ``[sql, *params]`` form: rqlite takes no mix
    for name in names:
        statements.append(["SELECT name, pk FROM pragma_table_info(?) ORDER BY cid", name])
        statements.append([f"SELECT * FROM {quote(name)}"])
    results = cluster.read_node(node_id, statements, timeout)
    tables: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(names):
        info, rows = results[2 * i], results[2 * i + 1]
        pk = sorted((p, c) for c, p in info.get("values") or [] if p)
        tables[name] = {
            "columns": list(rows.get("columns") or [c for c, _ in info.get("values") or []]),
            "key": ["name"] if name == SEQUENCE else [c for _, c in pk],
            "rows": [list(r) for r in rows.get("values") or []],
        }
    return tables


def quote(name: str) -> str:
    """``name`` as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _indexes(statuses: list[NodeStatus]) -> list[tuple[int | None, int | None]]:
    return [(s.applied_index, s.fsm_index) for s in statuses]


def _disagreement(nodes: list, statuses: list[NodeStatus]) -> str | None:
    """Why the nodes are not yet at one applied index (None when they are)."""
    said = "; ".join(
        f"{n.id} {s.error}"
        if s.error
        else f"{n.id} applied {s.applied_index}"
        + ("" if s.fsm_index is None else f" (database {s.fsm_index})")
        for n, s in zip(nodes, statuses, strict=True)
    )
    if any(s.error for s in statuses):
        return f"a node did not answer: {said}"
    if any(s.applied_index is None for s in statuses):
        return f"a node did not report its applied index: {said}"
    if len({s.applied_index for s in statuses}) > 1:
        return f"applied indexes differ: {said}"
    return None
