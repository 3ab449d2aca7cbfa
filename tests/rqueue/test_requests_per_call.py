"""How many HTTP requests and statements a claim costs on a real cluster (sync twin).

Where the server runs writes and reads as one Raft entry (rqlite >= 8.23), a claim is
one request whose UPDATE returns the leased row: if the server ignored its RETURNING,
the core would read the row back in a second request, and these tests would see it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rqueue import RqliteTransport

VIS = 30.0


class _Counted:
    """Wraps a transport's session and keeps every request body it sends."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.bodies: list[Any] = []

    def request(self, method: str, url: str, path: str, body: Any, timeout: float) -> Any:
        self.bodies.append((path, json.loads(body) if body else None))
        return self.inner.request(method, url, path, body, timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def counted(queue_urls: list[str]) -> Any:
    t = RqliteTransport.from_url(",".join(queue_urls))
    if not t._core.server.one_request_claim:
        t.close()
        pytest.skip(f"server {t._core.server.version}: claims take three requests before 8.23")
    session = _Counted(t._session)
    t._session = session
    try:
        yield t, session
    finally:
        t.close()


def test_a_claim_is_one_request_and_returns_its_row(counted: Any) -> None:
    t, session = counted
    t.publish("g", '"x"')
    session.bodies.clear()
    lease = t.claim("w", VIS)
    assert lease is not None and lease.event == '"x"'
    # writes alone: /db/execute, which skips /db/request's read-only checks per statement
    assert [p.split("?")[0] for p, _ in session.bodies] == ["/db/execute"]
    (_, body) = session.bodies[0]
    sqls = [s[0] if isinstance(s, list) else s for s in body]
    assert not any(sql.startswith("SELECT") for sql in sqls)  # no read-back statement
    assert any("RETURNING" in sql for sql in sqls)
    assert t.claim("w2", VIS) is None and len(session.bodies) == 2  # nothing left: one more


def test_ack_and_claim_is_one_request(counted: Any) -> None:
    t, session = counted
    t.publish("g", '"1"')
    t.publish("g", '"2"')
    first = t.claim("w", VIS)
    session.bodies.clear()
    second = t.ack_and_claim(first, "w", VIS)
    assert second is not None and second.event == '"2"'
    assert len(session.bodies) == 1


def test_an_extend_is_one_request_whose_update_returns_the_new_expiry(counted: Any) -> None:
    t, session = counted
    t.publish("g", '"x"')
    lease = t.claim("w", VIS)
    session.bodies.clear()
    longer = t.extend(lease, 2 * VIS)
    assert longer.expires_at is not None and longer.expires_at > lease.expires_at + VIS / 2
    assert [p.split("?")[0] for p, _ in session.bodies] == ["/db/execute"]  # no read-back
    t.ack(longer)
