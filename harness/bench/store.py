"""The store itself, spoken to directly over HTTP, for ``python -m harness bench``.

:class:`Http` is one keep-alive connection with the least client work possible, so the
INSERT rate it measures is the store's limit rather than a client library's. The other
functions prepare the queue tables between measurements: empty them, drop them (the
seed's schema differs from rqueue's) and fill them with bulk INSERT statements.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from ..errors import HarnessError
from .cost import WireCounter

INSERT_TABLE = "bench_insert"
#: the queue's tables (the seed's two, and rqueue's dedup table)
QUEUE_TABLES = ("messages", "groups", "rqueue_dedup")


class StoreError(HarnessError):
    """The store refused or failed a request the benchmark needed."""


class Http:
    """One keep-alive HTTP connection to a node, posting rqlite statement lists."""

    def __init__(self, url: str, timeout: float = 60.0, counter: WireCounter | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"expected http://HOST:PORT, got {url!r}")
        self.url = url
        self.counter = counter  # counts requests and bytes for the cost breakdown
        self._conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)

    def post(self, path: str, statements: Sequence[Any]) -> list[dict[str, Any]]:
        """POST ``statements``; the per-statement results, or StoreError naming the fault."""
        body = json.dumps(statements).encode()
        try:
            self._conn.request(
                "POST", path, body=body, headers={"Content-Type": "application/json"}
            )
            resp = self._conn.getresponse()
            payload = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            self._conn.close()
            raise StoreError(f"{self.url}{path}: {type(exc).__name__}: {exc}") from exc
        if self.counter is not None:
            self.counter.add(body, len(payload))
        if resp.status != 200:
            raise StoreError(f"{self.url}{path}: HTTP {resp.status}: {payload[:200]!r}")
        doc = json.loads(payload)
        errors = [r["error"] for r in doc.get("results", []) if "error" in r]
        if doc.get("error") or errors:
            raise StoreError(f"{self.url}{path}: {doc.get('error') or errors[0]}")
        return doc.get("results", [])

    def execute(self, statements: Sequence[Any]) -> list[dict[str, Any]]:
        return self.post("/db/execute?transaction", statements)

    def query(self, sql: str) -> list[list[Any]]:
        (res,) = self.post("/db/query?level=strong", [sql])
        return res.get("values") or []

    def close(self) -> None:
        self._conn.close()


def create_insert_table(http: Http) -> None:
    http.execute(
        [
            f"DROP TABLE IF EXISTS {INSERT_TABLE}",
            f"CREATE TABLE {INSERT_TABLE} (id INTEGER PRIMARY KEY, k INTEGER, v TEXT)",
        ]
    )


def insert_step(http: Http, worker: int) -> Callable[[], bool]:
    """A load step: one single-statement, parameterised INSERT."""
    stmt = [[f"INSERT INTO {INSERT_TABLE} (k, v) VALUES (?, ?)", worker, "x" * 32]]

    def step() -> bool:
        http.post("/db/execute", stmt)
        return True

    return step


def empty_queue(http: Http) -> None:
    """Delete every message, group and dedup record (tables that exist)."""
    present = {row[0] for row in http.query("SELECT name FROM sqlite_master WHERE type='table'")}
    stmts = [f"DELETE FROM {t}" for t in QUEUE_TABLES if t in present]
    if stmts:
        http.execute(stmts)


def drop_queue(http: Http) -> None:
    """Drop the queue's tables (and so their indexes): the next client makes its schema."""
    http.execute([f"DROP TABLE IF EXISTS {t}" for t in QUEUE_TABLES])


def count_messages(http: Http) -> int:
    return int(http.query("SELECT count(*) FROM messages")[0][0])


def bulk_messages(http: Http, prefix: str, groups: int, start: int, count: int, batch: int) -> None:
    """Insert ``count`` messages round-robin over groups ``{prefix}0 .. {prefix}{groups-1}``.

    Message ``i`` (counting from ``start``) goes to group ``i % groups``. Each statement
    inserts up to ``batch`` rows from a recursive CTE, so a million messages take a few
    requests; only the seed's columns (group_id, event) are written, so the groups must
    already have their rows (their first message published through the queue).
    """
    if groups < 1 or batch < 1:
        raise ValueError(f"bulk_messages: need groups >= 1 and batch >= 1, got {groups}, {batch}")
    done = 0
    while done < count:
        n = min(batch, count - done)
        first = start + done
        http.execute(
            [
                [
                    "WITH RECURSIVE s(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM s WHERE i < ?) "
                    "INSERT INTO messages (group_id, event) "
                    "SELECT ? || (i % ?), json_object('n', i) FROM s",
                    first,
                    first + n - 1,
                    prefix,
                    groups,
                ]
            ]
        )
        done += n
