"""``seed-reference``: the seed design's literal protocol, as a test subject.

Written from the design text (``rqlite-transport.txt``), faults and all, so the harness
can show what it finds in it:

* ``now`` is the *worker's* clock (the one the clock-skew fault offsets);
* claim takes three requests: a leasing ``UPDATE``, a ``level=strong`` read-back by
  token, and an ``UPDATE`` of the group's ``last_claimed_at``;
* ``ack`` and ``nack`` act by ``seq`` alone, with no check that the lease is still held.

The seed has no ``ack_and_claim``; its two-request equivalent here is ``ack`` then
``claim`` (an error from the claim, after the ack returned, carries ``acked = True``).

Only connection handling goes beyond the seed: the client is given every node's URL and
moves to the next one after a definite failure, so a killed node does not end the run.
Outcomes are classified like rqueue's (refused / 503 / SQL error: failed; timeout,
dropped connection, HTTP 200 with a top-level error: unknown) and raised as rqueue's
exception classes so that the history's ``fail``/``info`` types are right.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rqueue import OutcomeUnknown, RqueueError, StatementError, TransportClosed, Unavailable

from .base import Clock, Subject

PARKED = "__parked__"

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS messages ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT, group_id TEXT NOT NULL, event TEXT NOT NULL,"
    " locked_by TEXT, lock_expiry REAL)",
    "CREATE TABLE IF NOT EXISTS groups ("
    " group_id TEXT PRIMARY KEY, last_claimed_at REAL NOT NULL DEFAULT 0.0,"
    " priority INT NOT NULL DEFAULT 0)",
]

CLAIM_SQL = (
    "UPDATE messages SET locked_by = ?, lock_expiry = ? WHERE seq = ("
    " SELECT m.seq FROM messages m JOIN groups g ON g.group_id = m.group_id"
    " WHERE (m.locked_by IS NULL OR m.lock_expiry < ?)"
    " AND m.group_id NOT IN ("
    "  SELECT group_id FROM messages WHERE locked_by IS NOT NULL AND lock_expiry >= ?)"
    " AND g.priority >= ?"
    " ORDER BY g.last_claimed_at ASC, m.seq ASC LIMIT 1)"
)
READ_BACK_SQL = "SELECT seq, group_id, event FROM messages WHERE locked_by = ?"
TOUCH_GROUP_SQL = "UPDATE groups SET last_claimed_at = ? WHERE group_id = ?"


@dataclass(frozen=True)
class SeedLease:
    """The seed's Lease: the row's ``seq`` is the handle ack and nack use."""

    seq: int
    group_id: str
    event: str
    token: str


# -- sans-IO: statements and outcome classification -----------------------------------------
def publish_statements(group_id: str, event: str, priority: int) -> list[list[Any]]:
    return [
        ["INSERT INTO messages (group_id, event) VALUES (?, ?)", group_id, event],
        ["INSERT OR IGNORE INTO groups (group_id, priority) VALUES (?, ?)", group_id, priority],
    ]


def ack_statements(lease: SeedLease) -> list[list[Any]]:
    return [
        ["DELETE FROM messages WHERE seq = ?", lease.seq],
        [
            "DELETE FROM groups WHERE group_id = ? AND NOT EXISTS"
            " (SELECT 1 FROM messages WHERE group_id = ?)",
            lease.group_id,
            lease.group_id,
        ],
    ]


def nack_statements(lease: SeedLease, delay: float, now: float) -> list[list[Any]]:
    if delay > 0:
        sql = "UPDATE messages SET locked_by = ?, lock_expiry = ? WHERE seq = ?"
        return [[sql, PARKED, now + delay, lease.seq]]
    return [["UPDATE messages SET locked_by = NULL, lock_expiry = 0 WHERE seq = ?", lease.seq]]


def extend_statements(lease: SeedLease, visibility: float, now: float) -> list[list[Any]]:
    # The seed has no extend; this one is in its style: by seq, unfenced.
    return [["UPDATE messages SET lock_expiry = ? WHERE seq = ?", now + visibility, lease.seq]]


def results_of(status: int, body: str, *, write: bool) -> list[dict[str, Any]]:
    """The per-statement results of an answer, or the rqueue exception it amounts to."""
    if status == 503:
        raise Unavailable(f"HTTP 503: {body.strip()[:200]}")
    if status != 200:
        if 400 <= status < 500:
            raise StatementError(f"HTTP {status}: {body.strip()[:200]}")
        raise (OutcomeUnknown if write else Unavailable)(f"HTTP {status}: {body.strip()[:200]}")
    try:
        doc = json.loads(body)
    except ValueError:
        raise (OutcomeUnknown if write else Unavailable)(
            f"unparseable answer: {body[:200]!r}"
        ) from None
    if doc.get("error"):
        raise (OutcomeUnknown if write else Unavailable)(f"rqlite: {doc['error']}")
    results = doc.get("results", [])
    for r in results:
        if "error" in r:
            raise StatementError(f"rqlite statement error: {r['error']}")
    return results


def _check_args(visibility: float | None = None, delay: float | None = None) -> None:
    if visibility is not None and visibility <= 0:
        raise ValueError(f"visibility must be > 0 seconds, got {visibility}")
    if delay is not None and delay < 0:
        raise ValueError(f"delay must be >= 0 seconds, got {delay}")


@contextlib.contextmanager
def _acked() -> Iterator[None]:
    """Mark an rqueue error raised inside as coming after an ack that took effect."""
    try:
        yield
    except RqueueError as exc:
        exc.acked = True
        raise


class _Urls:
    """Round-robin over the node URLs, advanced after a definite failure."""

    def __init__(self, urls: Sequence[str]) -> None:
        if not urls:
            raise ValueError("urls: at least one node URL is needed")
        self.urls = [u.rstrip("/") for u in urls]
        self.i = 0

    @property
    def current(self) -> str:
        return self.urls[self.i]

    def advance(self) -> None:
        self.i = (self.i + 1) % len(self.urls)


# -- sync, over requests ------------------------------------------------------------------
class SeedTransport:
    """The seed's RqliteTransport over ``requests``, with the worker's clock."""

    def __init__(self, urls: Sequence[str], clock: Clock = time.time, timeout: float = 5.0):
        import requests

        self._requests = requests
        self._urls = _Urls(urls)
        self._clock = clock
        self._timeout = timeout
        self._session: Any = requests.Session()

    @classmethod
    def from_url(
        cls,
        urls: Sequence[str],
        clock: Clock = time.time,
        timeout: float = 5.0,
        wait: float = 30.0,
    ) -> SeedTransport:
        """Connect and create the schema, retrying until a leader answers or ``wait`` passes."""
        t = cls(urls, clock, timeout)
        deadline = time.monotonic() + wait
        while True:
            try:
                t._execute(SCHEMA)
                return t
            except (Unavailable, OutcomeUnknown) as e:
                if time.monotonic() > deadline:
                    t.close()
                    raise Unavailable(
                        f"no leader answered at {', '.join(t._urls.urls)} within {wait:g}s: {e}"
                    ) from None
                time.sleep(0.1)

    def _post(self, path: str, statements: list, *, write: bool) -> list[dict[str, Any]]:
        if self._session is None:
            raise TransportClosed("the transport is closed")
        exc = self._requests.exceptions
        url = f"{self._urls.current}{path}"
        try:
            r = self._session.post(url, json=statements, timeout=self._timeout)
        except (exc.ConnectTimeout, exc.SSLError) as e:
            self._urls.advance()
            raise Unavailable(f"{url}: {type(e).__name__}") from None
        except exc.ConnectionError as e:
            if "NewConnectionError" in repr(e) or "Connection refused" in str(e):
                self._urls.advance()
                raise Unavailable(f"{url}: connection refused") from None
            raise (OutcomeUnknown if write else Unavailable)(f"{url}: {type(e).__name__}") from None
        except exc.Timeout:
            raise (OutcomeUnknown if write else Unavailable)(f"{url}: timed out") from None
        try:
            return results_of(r.status_code, r.text, write=write)
        except Unavailable:
            self._urls.advance()
            raise

    def _execute(self, statements: list) -> list[dict[str, Any]]:
        return self._post("/db/execute", statements, write=True)

    def _query(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        return self._post("/db/query?level=strong", [[sql, *params]], write=False)

    def publish(self, group_id: str, event: str, priority: int = 0) -> int:
        res = self._execute(publish_statements(group_id, event, priority))
        return int(res[0]["last_insert_id"])

    def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> SeedLease | None:
        _check_args(visibility=visibility)
        now = self._clock()
        token = f"{worker_id}:{uuid.uuid4().hex}"
        res = self._execute([[CLAIM_SQL, token, now + visibility, now, now, min_priority]])
        if not res or res[0].get("rows_affected", 0) == 0:
            return None
        try:  # the row is leased now: any failure from here on leaves the outcome unknown
            rows = self._query(READ_BACK_SQL, token)[0].get("values") or []
            if not rows:
                raise OutcomeUnknown("leased row not found on read-back")
            seq, group_id, event = rows[0]
            self._execute([[TOUCH_GROUP_SQL, now, group_id]])
        except (Unavailable, StatementError) as e:
            raise OutcomeUnknown(f"claim leased a row but then failed: {e}") from None
        return SeedLease(int(seq), group_id, event, token)

    def ack(self, lease: SeedLease) -> None:
        self._execute(ack_statements(lease))

    def ack_and_claim(
        self, lease: SeedLease, worker_id: str, visibility: float, min_priority: int = 0
    ) -> SeedLease | None:
        """The seed's two-request equivalent of rqueue's ``ack_and_claim``: ack, then claim."""
        _check_args(visibility=visibility)
        self.ack(lease)
        with _acked():
            return self.claim(worker_id, visibility, min_priority)

    def nack(self, lease: SeedLease, delay: float = 0) -> None:
        _check_args(delay=delay)
        self._execute(nack_statements(lease, delay, self._clock()))

    def extend(self, lease: SeedLease, visibility: float) -> None:
        _check_args(visibility=visibility)
        self._execute(extend_statements(lease, visibility, self._clock()))

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


# -- async, over httpx --------------------------------------------------------------------
class AsyncSeedTransport:
    """The seed's async twin over ``httpx.AsyncClient``, every HTTP call awaited."""

    def __init__(self, urls: Sequence[str], clock: Clock = time.time, timeout: float = 5.0):
        import httpx

        self._httpx = httpx
        self._urls = _Urls(urls)
        self._clock = clock
        self._client: Any = httpx.AsyncClient(timeout=timeout)

    @classmethod
    async def from_url(
        cls,
        urls: Sequence[str],
        clock: Clock = time.time,
        timeout: float = 5.0,
        wait: float = 30.0,
    ) -> AsyncSeedTransport:
        import asyncio

        t = cls(urls, clock, timeout)
        deadline = time.monotonic() + wait
        while True:
            try:
                await t._execute(SCHEMA)
                return t
            except (Unavailable, OutcomeUnknown) as e:
                if time.monotonic() > deadline:
                    await t.close()
                    raise Unavailable(
                        f"no leader answered at {', '.join(t._urls.urls)} within {wait:g}s: {e}"
                    ) from None
                await asyncio.sleep(0.1)

    async def _post(self, path: str, statements: list, *, write: bool) -> list[dict[str, Any]]:
        if self._client is None:
            raise TransportClosed("the transport is closed")
        hx = self._httpx
        url = f"{self._urls.current}{path}"
        try:
            r = await self._client.post(url, json=statements)
        except (hx.ConnectError, hx.ConnectTimeout, hx.PoolTimeout) as e:
            self._urls.advance()
            raise Unavailable(f"{url}: {type(e).__name__}") from None
        except hx.TransportError as e:
            raise (OutcomeUnknown if write else Unavailable)(f"{url}: {type(e).__name__}") from None
        try:
            return results_of(r.status_code, r.text, write=write)
        except Unavailable:
            self._urls.advance()
            raise

    async def _execute(self, statements: list) -> list[dict[str, Any]]:
        return await self._post("/db/execute", statements, write=True)

    async def _query(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        return await self._post("/db/query?level=strong", [[sql, *params]], write=False)

    async def publish(self, group_id: str, event: str, priority: int = 0) -> int:
        res = await self._execute(publish_statements(group_id, event, priority))
        return int(res[0]["last_insert_id"])

    async def claim(
        self, worker_id: str, visibility: float, min_priority: int = 0
    ) -> SeedLease | None:
        _check_args(visibility=visibility)
        now = self._clock()
        token = f"{worker_id}:{uuid.uuid4().hex}"
        res = await self._execute([[CLAIM_SQL, token, now + visibility, now, now, min_priority]])
        if not res or res[0].get("rows_affected", 0) == 0:
            return None
        try:
            rows = (await self._query(READ_BACK_SQL, token))[0].get("values") or []
            if not rows:
                raise OutcomeUnknown("leased row not found on read-back")
            seq, group_id, event = rows[0]
            await self._execute([[TOUCH_GROUP_SQL, now, group_id]])
        except (Unavailable, StatementError) as e:
            raise OutcomeUnknown(f"claim leased a row but then failed: {e}") from None
        return SeedLease(int(seq), group_id, event, token)

    async def ack(self, lease: SeedLease) -> None:
        await self._execute(ack_statements(lease))

    async def ack_and_claim(
        self, lease: SeedLease, worker_id: str, visibility: float, min_priority: int = 0
    ) -> SeedLease | None:
        """The seed's two-request equivalent of rqueue's ``ack_and_claim``: ack, then claim."""
        _check_args(visibility=visibility)
        await self.ack(lease)
        with _acked():
            return await self.claim(worker_id, visibility, min_priority)

    async def nack(self, lease: SeedLease, delay: float = 0) -> None:
        _check_args(delay=delay)
        await self._execute(nack_statements(lease, delay, self._clock()))

    async def extend(self, lease: SeedLease, visibility: float) -> None:
        _check_args(visibility=visibility)
        await self._execute(extend_statements(lease, visibility, self._clock()))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _open_sync(urls: Sequence[str], clock: Clock, timeout: float) -> SeedTransport:
    return SeedTransport.from_url(urls, clock, timeout)


async def _open_async(urls: Sequence[str], clock: Clock, timeout: float) -> AsyncSeedTransport:
    return await AsyncSeedTransport.from_url(urls, clock, timeout)


SUBJECT = Subject(
    name="seed-reference",
    description="the seed design's literal protocol: worker clock, ack/nack by seq, 3-step claim",
    open_sync=_open_sync,
    open_async=_open_async,
    expected_valid=False,
)
