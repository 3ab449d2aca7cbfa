"""A small FIFO queue client on rqlite's HTTP API, written as a harness subject.

It is not rqueue: one table, a claim that is one UPDATE plus a read-back, and lease times
from the worker's own clock. Run every scenario against it with this folder on
PYTHONPATH::

    PYTHONPATH=docs/example_subject python -m harness run steady --subject mymodule:SUBJECT

``steady`` is valid. The fault scenarios show what the harness makes of its shortcuts
(no retries after an unknown outcome, worker clocks for leases): see README.md here.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import requests
from urllib3.exceptions import ConnectTimeoutError

from harness.subjects import Subject
from rqueue import LeaseLost, OutcomeUnknown, StatementError, TransportClosed, Unavailable

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tinyq (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
    "group_id TEXT NOT NULL, priority INTEGER NOT NULL, event TEXT NOT NULL, "
    "token TEXT, until REAL NOT NULL DEFAULT 0)"
)
# Only a group's oldest message can be leased, and only when no live lease or park
# (``until`` in the future) holds it: FIFO and one message in flight per group.
CLAIM = (
    "UPDATE tinyq SET token = ?, until = ? WHERE seq = ("
    "SELECT h.seq FROM tinyq h WHERE h.priority >= ? AND h.until < ? "
    "AND h.seq = (SELECT min(x.seq) FROM tinyq x WHERE x.group_id = h.group_id) "
    "ORDER BY h.seq LIMIT 1)"
)


@dataclass(frozen=True)
class Lease:
    """What the harness needs of a lease: seq, group_id, event (verbatim) and token."""

    seq: int
    group_id: str
    event: str
    token: str


class TinyQueue:
    """The sync client: every method is one or two HTTP requests, fenced by the token.
    Threads may share it (each uses its own HTTP session)."""

    def __init__(
        self, urls: Sequence[str], clock: Callable[[], float], timeout: float, create: bool = True
    ) -> None:
        self.urls = [u.rstrip("/") for u in urls]
        self.clock, self.timeout = clock, timeout
        self._sessions: dict[int, requests.Session] = {}  # one per thread: shareable
        self._lock = threading.Lock()
        self.closed = False
        if create:
            self._write([[SCHEMA]])

    # -- the queue's calls ----------------------------------------------------------------
    def publish(self, group_id: str, event: str, priority: int = 0) -> int:
        sql = "INSERT INTO tinyq (group_id, priority, event) VALUES (?, ?, ?)"
        return self._write([[sql, group_id, priority, event]])["last_insert_id"]

    def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> Lease | None:
        token, now = f"{worker_id}-{uuid.uuid4().hex}", self.clock()
        result = self._write([[CLAIM, token, now + visibility, min_priority, now]])
        if result.get("rows_affected"):
            rows = self._query("SELECT seq, group_id, event FROM tinyq WHERE token = ?", token)
            if not rows:  # a newer leader lacks our write: we cannot tell what happened
                raise OutcomeUnknown("claim applied, but its lease is not readable")
            seq, group_id, event = rows[0]
            return Lease(seq, group_id, event, token)
        return None

    def ack(self, lease: Lease) -> None:
        self._fenced("DELETE FROM tinyq WHERE seq = ? AND token = ? AND until >= ?", lease)

    def nack(self, lease: Lease, delay: float = 0) -> None:
        sql = "UPDATE tinyq SET token = NULL, until = ? WHERE seq = ? AND token = ? AND until >= ?"
        self._fenced(sql, lease, self.clock() + delay)

    def extend(self, lease: Lease, visibility: float) -> None:
        sql = "UPDATE tinyq SET until = ? WHERE seq = ? AND token = ? AND until >= ?"
        self._fenced(sql, lease, self.clock() + visibility)

    def ack_and_claim(
        self, lease: Lease, worker_id: str, visibility: float, min_priority: int = 0
    ) -> Lease | None:
        """Two calls: an error after the ack applied carries ``acked = True``."""
        self.ack(lease)
        try:
            return self.claim(worker_id, visibility, min_priority)
        except (Unavailable, OutcomeUnknown, StatementError) as e:
            e.acked = True
            raise

    def close(self) -> None:
        with self._lock:
            self.closed = True
            sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.close()

    # -- HTTP -----------------------------------------------------------------------------
    def _fenced(self, sql: str, lease: Lease, *first: Any) -> None:
        result = self._write([[sql, *first, lease.seq, lease.token, self.clock()]])
        if not result.get("rows_affected"):
            raise LeaseLost(f"lease {lease.token} on message {lease.seq} is gone")

    def _write(self, statements: list) -> dict:
        return self._post("/db/execute", statements, write=True)

    def _query(self, sql: str, *args: Any) -> list:
        result = self._post("/db/query?level=strong", [[sql, *args]], write=False)
        return result.get("values", [])

    def _post(self, path: str, statements: list, write: bool) -> dict:
        """One request: the first node that takes it. Refused or 503: nothing was
        applied, try the next. A timeout or a lost answer after sending: unknown."""
        with self._lock:
            if self.closed:
                raise TransportClosed("client closed")
            http = self._sessions.get(threading.get_ident())
            if http is None:
                http = self._sessions[threading.get_ident()] = requests.Session()
        errors = []
        for url in self.urls:
            try:
                r = http.post(url + path, json=statements, timeout=self.timeout)
            except requests.RequestException as e:
                if write and not _not_sent(e):
                    raise OutcomeUnknown(f"{url}: {type(e).__name__}: {e}") from None
                errors.append(f"{url}: {type(e).__name__}")
                continue
            if r.status_code == 503:
                errors.append(f"{url}: 503 {r.text.strip()}")
                continue
            try:
                body = r.json()
            except ValueError:
                body = None
            if r.status_code != 200 or not isinstance(body, dict) or "error" in body:
                if write:
                    raise OutcomeUnknown(f"{url}: HTTP {r.status_code} {r.text[:200]}")
                errors.append(f"{url}: HTTP {r.status_code}")
                continue
            result = body["results"][0]
            if "error" in result:
                raise StatementError(result["error"])
            return result
        raise Unavailable("no node took the request: " + "; ".join(errors))


def _not_sent(e: requests.RequestException) -> bool:
    """Whether the request certainly never reached the node (refused, connect timeout)."""
    reason = getattr(e.args[0], "reason", None) if e.args else None
    return isinstance(e, requests.ConnectTimeout) or isinstance(reason, ConnectTimeoutError)


class AsyncTinyQueue:
    """The async client: the sync one's calls, each on a worker thread."""

    def __init__(self, sync: TinyQueue) -> None:
        self._sync = sync

    async def publish(self, group_id: str, event: str, priority: int = 0) -> int:
        return await asyncio.to_thread(self._sync.publish, group_id, event, priority)

    async def claim(self, worker_id: str, visibility: float, min_priority: int = 0):
        return await asyncio.to_thread(self._sync.claim, worker_id, visibility, min_priority)

    async def ack(self, lease: Lease) -> None:
        await asyncio.to_thread(self._sync.ack, lease)

    async def ack_and_claim(
        self, lease: Lease, worker_id: str, visibility: float, min_priority: int = 0
    ) -> Lease | None:
        return await asyncio.to_thread(
            self._sync.ack_and_claim, lease, worker_id, visibility, min_priority
        )

    async def nack(self, lease: Lease, delay: float = 0) -> None:
        await asyncio.to_thread(self._sync.nack, lease, delay)

    async def extend(self, lease: Lease, visibility: float) -> None:
        await asyncio.to_thread(self._sync.extend, lease, visibility)

    async def close(self) -> None:
        self._sync.close()


# -- what the harness loads ---------------------------------------------------------------
def open_sync(urls: Sequence[str], clock: Callable[[], float], timeout: float) -> TinyQueue:
    return TinyQueue(urls, clock, timeout)


async def open_async(
    urls: Sequence[str], clock: Callable[[], float], timeout: float
) -> AsyncTinyQueue:
    return AsyncTinyQueue(await asyncio.to_thread(TinyQueue, urls, clock, timeout))


def pending(urls: Sequence[str], timeout: float) -> int | None:
    """Messages left (the drain waits for 0); None when no node answers."""
    client = TinyQueue(urls, lambda: 0.0, timeout, create=False)
    try:
        return client._query("SELECT COUNT(*) FROM tinyq")[0][0]
    except (Unavailable, StatementError, IndexError):
        return None
    finally:
        client.close()


SUBJECT = Subject(
    name="tinyq",
    description="docs/example_subject: one table on rqlite's HTTP API, worker-clock leases",
    open_sync=open_sync,
    open_async=open_async,
    pending=pending,
)
