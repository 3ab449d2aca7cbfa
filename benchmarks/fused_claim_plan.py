"""What the fused claim costs on the node's SQLite: microseconds per ``claim_batch``.

    PYTHONPATH=. python benchmarks/fused_claim_plan.py [--groups 20000] [--batches 1500]

Runs ``claim_batch`` of four claims against one in-memory database of ``--groups``
groups (one message each) on apsw, the SQLite the embedded node runs (3.54; rqlite's
go-sqlite3 is as recent), for three forms in turn, three rounds each: the statement
before writes were idempotent (``mutant-no-idempotency``'s, byte for byte), the
idempotent one without the unary ``+`` on ``pick.group_id`` (as issue 40 first landed
it: SQLite scanned every group row against ``pick``), and today's. Prints microseconds
per batch and the plan's steps on ``groups``.
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable

import apsw

from harness.subjects.mutants import NoIdempotencyStatements
from rqueue import _schema
from rqueue._models import Claim
from rqueue._render import STAMP
from rqueue._statements import Statements

KEYED = '"groups".group_id = +pick.group_id'
FORMS: dict[str, tuple[type[Statements], Callable[[str], str]]] = {
    "before idempotency": (NoIdempotencyStatements, lambda sql: sql),
    "idempotent, no +": (Statements, lambda sql: sql.replace(KEYED, KEYED.replace("+", ""))),
    "idempotent (today)": (Statements, lambda sql: sql),
}


def database(groups: int) -> apsw.Connection:
    db = apsw.Connection(":memory:")
    for s in (*_schema.TABLES, *_schema.INDEXES):
        db.execute(s.sql, s.params)
    db.execute(STAMP.sql, STAMP.params)
    with db:
        for i in range(1, groups + 1):
            db.execute(
                "INSERT INTO messages (seq, group_id, event, enqueued_at) VALUES (?, ?, 'e', 0)",
                (i, f"g{i}"),
            )
            db.execute("INSERT INTO groups (group_id, head_seq) VALUES (?, ?)", (f"g{i}", i))
    return db


def per_batch(form: str, groups: int, batches: int) -> tuple[float, list[str]]:
    cls, edit = FORMS[form]
    st = cls(server_clock=True, clock=time.time)
    db = database(groups)
    start = time.perf_counter()
    for _ in range(batches):
        stmt = st.claim_batch([Claim(uuid.uuid4().hex, 30.0) for _ in range(4)], 0)
        with db:
            db.execute(STAMP.sql, STAMP.params)
            list(db.execute(edit(stmt.sql), stmt.params))
    took = (time.perf_counter() - start) / batches * 1e6
    plan = [r[3] for r in db.execute(f"EXPLAIN QUERY PLAN {edit(stmt.sql)}", stmt.params)]
    return took, [step for step in plan if step.startswith(("SCAN groups", "SEARCH groups"))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=20_000, help="groups queued (20000)")
    ap.add_argument("--batches", type=int, default=1_500, help="batches per round (1500)")
    args = ap.parse_args()
    print(f"SQLite {apsw.sqlite_lib_version()}, {args.groups:,} groups, batches of 4 claims")
    rounds: dict[str, list[float]] = {form: [] for form in FORMS}
    plans: dict[str, list[str]] = {}
    for _ in range(3):
        for form in FORMS:
            took, plans[form] = per_batch(form, args.groups, args.batches)
            rounds[form].append(took)
    for form, took in rounds.items():
        figures = ", ".join(f"{t:,.0f}" for t in took)
        print(f"{form:20s} µs per batch: {figures:24s} plan on groups: {'; '.join(plans[form])}")


if __name__ == "__main__":
    main()
