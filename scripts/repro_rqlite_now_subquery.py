#!/usr/bin/env python3
"""Show rqlite replicas diverging after a write whose 'now' rqlite leaves unrewritten.

rqlite (>= 8.33) rewrites time functions such as ``julianday('now')`` to a literal on
the node that receives a write, so every replica applies the same value. This script
sends, to a cluster you give it, writes where that rewriting does not happen:

1. ``control``   ``INSERT ... VALUES (..., julianday('now'))``: rewritten (>= 8.33), so
                 the replicas should agree;
2. ``subquery``  ``UPDATE ... SET v = (SELECT julianday('now')) ...``: the 'now' inside a
                 scalar subquery;
3. ``groups``    ``UPDATE groups SET v = julianday('now') ...``: a top-level 'now', but in
                 an UPDATE of a table named ``groups`` (skipped if such a table exists
                 already: the script never writes to your tables);
4. ``insert-groups``  ``INSERT INTO groups(...) VALUES (..., julianday('now'))``: the
                 control's statement on the table ``groups`` (rqlite v8.36.18's parser
                 accepts this one: it is rewritten, the replicas agree);
5. ``quoted-groups``  3 with the name quoted, ``UPDATE "groups" ...``: a control for 3
                 (if 3 diverges and 5 does not, the bare name is what stops the
                 rewriting).

Each write is sent ``--rounds`` times. Then it waits until every node has applied them
(a marker row written last, read with ``level=none`` from each node's own copy) and
prints each node's values. Replicas that hold different values for the same row have
diverged: a later read depends on which node answers.

Standard library only. Usage::

    python3 scripts/repro_rqlite_now_subquery.py http://127.0.0.1:4001 \\
        http://127.0.0.1:4011 http://127.0.0.1:4021

Exit status: 0 every node holds the same values, 1 replicas diverged (the values are
printed), 2 the script could not run (the reason on stderr). It creates the table
``repro_now`` (and ``groups`` when absent) and drops what it created unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

CASES = (
    ("control", "INSERT INTO repro_now(run, name, v) VALUES (?, ?, julianday('now'))", False),
    (
        "subquery",
        "UPDATE repro_now SET v = (SELECT julianday('now')) WHERE run = ? AND name = ?",
        True,
    ),
    ("groups", "UPDATE groups SET v = julianday('now') WHERE run = ? AND name = ?", True),
    ("insert-groups", "INSERT INTO groups(run, name, v) VALUES (?, ?, julianday('now'))", False),
    (
        "quoted-groups",
        "UPDATE \"groups\" SET v = julianday('now') WHERE run = ? AND name = ?",
        True,
    ),
)


class ReproError(RuntimeError):
    """The script cannot go on; the message says why."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a follower's redirect to the leader is re-sent by hand (as a POST)


_OPENER = urllib.request.build_opener(_NoRedirect)


def request(url: str, body: Any = None, timeout: float = 10.0) -> tuple[Any, dict[str, str]]:
    """POST ``body`` as JSON (GET when None); follows a redirect to the leader once."""
    for _ in range(3):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
        req.add_header("Content-Type", "application/json")
        try:
            with _OPENER.open(req, timeout=timeout) as resp:
                return json.loads(resp.read() or b"null"), dict(resp.headers)
        except urllib.error.HTTPError as e:
            if e.code in (301, 302, 307, 308) and e.headers.get("Location"):
                url = e.headers["Location"]
                continue
            text = e.read().decode(errors="replace").strip()
            raise ReproError(f"{url}: HTTP {e.code}: {text[:300]}") from None
        except (urllib.error.URLError, OSError) as e:
            raise ReproError(f"{url}: {e}") from None
    raise ReproError(f"{url}: too many redirects")


def execute(base: str, statements: list[list[Any]]) -> list[dict[str, Any]]:
    """Run write statements through ``base``; raises on any statement's error."""
    out, _ = request(f"{base}/db/execute?timings", statements)
    results = (out or {}).get("results") or []
    for stmt, r in zip(statements, results, strict=False):
        if r.get("error"):
            raise ReproError(f"{stmt[0]!r}: {r['error']}")
    return results


def query(base: str, sql: str, *params: Any) -> list[list[Any]]:
    """Rows of ``sql`` from ``base``'s own copy of the data (``level=none``)."""
    out, _ = request(f"{base}/db/query?level=none", [[sql, *params]])
    result = ((out or {}).get("results") or [{}])[0]
    if result.get("error"):
        raise ReproError(f"{base}: {sql!r}: {result['error']}")
    return result.get("values") or []


def version(base: str) -> str:
    """The node's rqlite version (from /status, else the response header)."""
    status, headers = request(f"{base}/status")
    build = (status or {}).get("build") or {}
    return str(build.get("version") or headers.get("X-Rqlite-Version") or "unknown")


def wait_applied(urls: list[str], run: str, timeout: float) -> None:
    """Wait until every node's own copy has the marker row (written after every case)."""
    deadline = time.monotonic() + timeout
    for u in urls:
        while not query(u, "SELECT 1 FROM repro_now WHERE run = ? AND name = 'marker'", run):
            if time.monotonic() > deadline:
                raise ReproError(f"{u} did not apply the writes within {timeout:g} s")
            time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("urls", nargs="+", help="every node's HTTP URL, e.g. http://127.0.0.1:4001")
    p.add_argument("--rounds", type=int, default=5, help="writes per case (default 5)")
    p.add_argument("--keep", action="store_true", help="keep the tables this script created")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds to wait for apply")
    args = p.parse_args(argv)
    urls = [u.rstrip("/") for u in args.urls]
    try:
        return run(urls, args.rounds, args.keep, args.timeout)
    except ReproError as e:
        print(f"repro: error: {e}", file=sys.stderr)
        return 2


def run(urls: list[str], rounds: int, keep: bool, timeout: float) -> int:
    """Send the writes, read every node, print the comparison; 1 if replicas diverged."""
    leader = urls[0]
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, nodes:")
    for u in urls:
        print(f"  {u}  rqlite {version(u)}")
    tables = {r[0] for r in query(leader, "SELECT name FROM sqlite_master WHERE type='table'")}
    created = [] if "repro_now" in tables else ["repro_now"]
    execute(leader, [["CREATE TABLE IF NOT EXISTS repro_now (run TEXT, name TEXT, v REAL)"]])
    cases = list(CASES)
    if "groups" in tables:
        print("table 'groups' exists already: the 'groups' case is skipped")
        cases = [c for c in cases if "groups" not in c[0]]
    else:
        execute(leader, [['CREATE TABLE "groups" (run TEXT, name TEXT, v REAL)']])
        created.append("groups")
    run_id = uuid.uuid4().hex[:12]
    try:
        for name, sql, needs_row in cases:
            table = "groups" if "groups" in name else "repro_now"
            for i in range(rounds):
                row = f"{name}-{i}"
                if needs_row:  # the row to update, its value a plain literal
                    insert = f'INSERT INTO "{table}"(run, name, v) VALUES (?, ?, 0)'
                    execute(leader, [[insert, run_id, row]])
                execute(leader, [[sql, run_id, row]])
                time.sleep(0.01)  # the rounds a few ms apart, as separate Raft entries
        execute(leader, [["INSERT INTO repro_now(run, name, v) VALUES (?, 'marker', 0)", run_id]])
        wait_applied(urls, run_id, timeout)
        return report(urls, cases, run_id, rounds)
    finally:
        if not keep:
            execute(leader, [[f'DROP TABLE IF EXISTS "{t}"'] for t in created])
            if "repro_now" not in created:
                execute(leader, [["DELETE FROM repro_now WHERE run = ?", run_id]])


def report(urls: list[str], cases: list[tuple[str, str, bool]], run_id: str, rounds: int) -> int:
    """Print each case's values on every node; 1 if any row differs between nodes."""
    diverged_any = False
    for name, sql, _ in cases:
        table = "groups" if "groups" in name else "repro_now"
        select = f'SELECT name, v FROM "{table}" WHERE run = ? AND name LIKE ?'
        per_node = {u: dict(query(u, select, run_id, f"{name}-%")) for u in urls}
        rows = [f"{name}-{i}" for i in range(rounds)]
        differing = [r for r in rows if len({repr(per_node[u].get(r)) for u in urls}) > 1]
        verdict = f"DIVERGED ({len(differing)} of {rounds} rows)" if differing else "identical"
        diverged_any |= bool(differing)
        print(f"\n{name}: {sql}\n  -> {verdict}")
        for r in differing[:2] or rows[:1]:
            for u in urls:
                print(f"  {r:<12} {u:<24} {per_node[u].get(r)!r}")
    print(
        "\nverdict: replicas DIVERGED" if diverged_any else "\nverdict: every node holds the same"
    )
    return 1 if diverged_any else 0


if __name__ == "__main__":
    sys.exit(main())
