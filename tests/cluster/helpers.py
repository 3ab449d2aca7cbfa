"""Small HTTP and waiting helpers for the cluster tests (rqlite's API, stdlib only)."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post(url: str, body: Any, timeout: float = 10.0) -> dict:
    """POST JSON, return the decoded JSON answer (HTTP errors raise)."""
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with _OPENER.open(req, timeout=timeout) as resp:
        return json.loads(resp.read())


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


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:  # a node may be unreachable for a while: keep polling
            last = exc
        else:
            if last:
                return last
        time.sleep(0.05)
    raise AssertionError(f"waited {timeout}s for {what}; last result: {last!r}")
