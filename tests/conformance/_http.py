"""A tiny HTTP client for the conformance tests: no proxies, no redirects followed.

(Waiting for a condition: :func:`tests.cluster.helpers.wait_until`.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import requests

_SESSION = requests.Session()
_SESSION.trust_env = False  # cluster traffic never goes through a proxy


@dataclass
class Resp:
    status: int
    headers: requests.structures.CaseInsensitiveDict
    text: str
    content: bytes = b""

    @property
    def json(self) -> Any:
        return json.loads(self.text)


def call(
    method: str,
    url: str,
    path: str,
    body: Any = None,
    raw: bytes | None = None,
    timeout: float = 15.0,
    content_type: str = "application/json",
) -> Resp:
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    r = _SESSION.request(
        method,
        url + path,
        data=data,
        timeout=timeout,
        allow_redirects=False,
        headers={"Content-Type": content_type} if data is not None else None,
    )
    return Resp(r.status_code, r.headers, r.text, r.content)


def execute(url: str, stmts: list, params: str = "") -> dict:
    r = call("POST", url, f"/db/execute{params}", stmts)
    assert r.status == 200, f"/db/execute on {url}: HTTP {r.status} {r.text!r}"
    return r.json


def request(url: str, stmts: list, params: str = "") -> dict:
    r = call("POST", url, f"/db/request{params}", stmts)
    assert r.status == 200, f"/db/request on {url}: HTTP {r.status} {r.text!r}"
    return r.json


def query(url: str, stmts: list, params: str = "?level=strong") -> dict:
    r = call("POST", url, f"/db/query{params}", stmts)
    assert r.status == 200, f"/db/query on {url}: HTTP {r.status} {r.text!r}"
    return r.json
