"""What the real-cluster tests wait on and read with: a bounded poll, a direct read."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import requests


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll ``probe`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def query(urls: list[str], sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """One strong read straight over HTTP (not through rqueue), from any node that answers."""
    for url in urls:
        try:
            r = requests.post(f"{url}/db/query?level=strong", json=[[sql, *params]], timeout=5)
            result = r.json()["results"][0] if r.status_code == 200 else None
        except (requests.RequestException, ValueError, KeyError, IndexError, TypeError):
            continue
        if isinstance(result, dict) and "error" not in result:
            return [tuple(row) for row in result.get("values") or []]
    raise AssertionError(f"no node of {urls} answered {sql!r}")
