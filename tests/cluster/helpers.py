"""Small HTTP and waiting helpers for the cluster and conformance tests (rqlite's API,
stdlib only)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post(url: str, body: Any, timeout: float = 10.0) -> dict:
    """POST JSON, return the decoded JSON answer (HTTP errors raise)."""
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with _OPENER.open(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def outcome(url: str, body: Any, timeout: float) -> str:
    """POST JSON; what the client saw: ``ok``, or ``error: ...`` for a failed exchange, an
    HTTP error, or an ``error`` in the answer (rqlite answers 200 with a top-level
    ``error`` when forwarding to the leader fails, http/service.go)."""
    try:
        out = post(url, body, timeout)
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        return f"error: {exc}"
    results = out.get("results") or [{}]
    return "ok" if "error" not in out and "error" not in results[0] else f"error: {out}"


def execute(base: str, statements: list) -> list[dict]:
    """Run writes through ``/db/execute``; fail the test on any per-statement error."""
    out = post(f"{base}/db/execute", statements)
    assert "error" not in out, out
    for result in out["results"]:
        assert "error" not in result, result
    return out["results"]


def rows(base: str, sql: str, level: str = "strong") -> list[list]:
    """The rows of one query at the given read consistency level."""
    out = post(f"{base}/db/query?level={level}", [sql])
    assert "error" not in out, out
    result = out["results"][0]
    assert "error" not in result, result
    return result.get("values", [])


def wait_until(check: Callable[[], T], timeout: float, what: str) -> T:
    """Poll ``check`` until it returns something truthy and return that; fail naming
    ``what`` and the last result (or exception: a node may be unreachable for a while)
    after ``timeout`` seconds. ``check`` runs at least once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            last: Any = check()
        except Exception as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout}s for {what}; last result: {last!r}")
        time.sleep(0.05)


def local_minus_utc(url: str, node_id: str) -> float:
    """A write through ``url`` into table ``tz(node, d)``: its rewritten 'now' minus
    SQLite's own (UTC), in seconds (the node's local offset, as rqlite rewrites it)."""
    execute(url, [["INSERT INTO tz(node, d) VALUES (?, julianday('now') - julianday())", node_id]])
    got = rows(url, f"SELECT d FROM tz WHERE node = '{node_id}' ORDER BY rowid DESC LIMIT 1")
    return got[0][0] * 86400.0


def near(seconds: float, want: float) -> bool:
    """Within 2 s: a zone's offset measured through a write that took its time."""
    return abs(seconds - want) < 2.0


def full_leader_loses_no_ack(cluster: Any, elect: float, catch_up: float) -> list[int]:
    """Fill the leader's disk and write to it until a write fails (some may fail at
    once); every acknowledged row must be on the next leader (elected within ``elect``
    seconds), which takes writes; once freed, the old leader catches up (``catch_up``).
    Returns the rows the new leader holds."""
    lead = cluster.wait_for_leader(60)
    execute(lead.url, [["CREATE TABLE t (x INTEGER)"], ["INSERT INTO t VALUES (1)"]])
    cluster.fill_disk(lead.id)
    # entries that still fit in the journal's last block are kept; then one fails
    acked, failed = [1], None
    for x in range(2, 2000):
        out = post(f"{lead.url}/db/execute", [["INSERT INTO t VALUES (?)", x]])
        if "error" in out or any("error" in r for r in out["results"]):
            failed = x
            break
        acked.append(x)
    assert failed is not None, "every write was acknowledged on a full disk"
    new = cluster.wait_for_leader(elect, exclude=[lead.id], all_ready=False)
    execute(new.url, [["INSERT INTO t VALUES (?)", 5000]])
    got = [r[0] for r in rows(new.url, "SELECT x FROM t ORDER BY x")]
    assert set(acked) <= set(got) and 5000 in got, (acked, got)
    cluster.free_disk(lead.id)
    wait_until(
        lambda: [r[0] for r in rows(lead.url, "SELECT x FROM t ORDER BY x", "none")] == got,
        catch_up,
        "the freed node to catch up",
    )
    return got
