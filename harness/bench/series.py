"""The bench document's throughput series and the lookups every rendering of it shares.

Pure functions of the ``bench.json`` document, used by :mod:`.report` (targets, tables,
plot) and :mod:`.breakdown` (the cost per operation).
"""

from __future__ import annotations

from typing import Any

#: the throughput series: (label, bench.json key)
SERIES = (
    ("store INSERT", "store_insert"),
    ("rqueue claim, shared transport", "rqueue_claim_shared"),
    ("rqueue claim, transport each", "rqueue_claim"),
    ("rqueue claim+ack, shared transport", "rqueue_cycle_shared"),
    ("rqueue claim+ack, transport each", "rqueue_cycle"),
    ("rqueue ack_and_claim cycle, shared transport", "rqueue_cycle_folded"),
    ("seed claim+ack", "seed_cycle"),
)


def series(doc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return doc.get(key) or []


def levels_of(doc: dict[str, Any]) -> list[int]:
    """The concurrency levels of the run's throughput figures."""
    return sorted({r["concurrency"] for _, key in SERIES for r in series(doc, key)})


def row_at(rows: list[dict[str, Any]], concurrency: int) -> dict[str, Any] | None:
    return next((r for r in rows if r["concurrency"] == concurrency), None)


def ratio_of(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return a / b


def rate_at(rows: list[dict[str, Any]], concurrency: int) -> float | None:
    row = row_at(rows, concurrency)
    return None if row is None else row["per_second"]


def baseline(doc: dict[str, Any], key: str, concurrency: int) -> float | None:
    """The INSERT rate a figure is compared with: the one measured just before it if
    any (``insert_per_second``), else the run's store-limit figure."""
    row = row_at(series(doc, key), concurrency)
    if row is not None and row.get("insert_per_second"):
        return row["insert_per_second"]
    return rate_at(series(doc, "store_insert"), concurrency)
