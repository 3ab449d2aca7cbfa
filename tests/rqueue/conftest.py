"""Fixtures for rqueue's tests: both twins behind one blocking face, clean tables."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from rqueue import AsyncRqliteTransport, RqliteTransport

from .fakes import FakeNode, SqliteExecutor


class Blocking:
    """An ``AsyncRqliteTransport`` driven from blocking code on a private event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, transport: AsyncRqliteTransport) -> None:
        self._loop = loop
        self.transport = transport

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.transport, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *a, **k: self._loop.run_until_complete(attr(*a, **k))
        return attr

    def __repr__(self) -> str:
        return repr(self.transport)


Connect = Callable[..., Any]


@pytest.fixture(params=["sync", "async"])
def connect(request: pytest.FixtureRequest) -> Iterator[Connect]:
    """``connect(url, **kw)``: a transport of the twin under test, closed afterwards."""
    made: list[Any] = []
    loop = asyncio.new_event_loop() if request.param == "async" else None

    def factory(url: Any, cls: type | None = None, **kw: Any) -> Any:
        if loop is None:
            t = (cls or RqliteTransport).from_url(url, **kw)
        else:
            t = Blocking(
                loop, loop.run_until_complete((cls or AsyncRqliteTransport).from_url(url, **kw))
            )
        made.append(t)
        return t

    factory.twin = request.param  # type: ignore[attr-defined]
    try:
        yield factory
    finally:
        for t in made:
            t.close()
        if loop is not None:
            loop.close()


def clear_queue(urls: list[str]) -> None:
    """Delete every row of rqueue's tables (the schema must exist)."""
    stmts = [
        "DELETE FROM messages",
        "DELETE FROM groups",
        "DELETE FROM rqueue_dedup",
        "DELETE FROM rqueue_dead",
    ]
    for url in urls:
        try:
            r = requests.post(f"{url}/db/execute?transaction=true", json=stmts, timeout=10)
        except requests.RequestException:
            continue
        if r.status_code == 200 and "error" not in r.text:
            return
    raise AssertionError(f"could not clear the queue tables through any of {urls}")


@pytest.fixture
def queue_urls(cluster: Any) -> list[str]:
    """The shared cluster's URLs, with rqueue's schema present and its tables empty."""
    urls = list(cluster.urls)
    RqliteTransport.from_url(",".join(urls), timeout=60).close()
    clear_queue(urls)
    return urls


@pytest.fixture
def executor() -> SqliteExecutor:
    return SqliteExecutor()


@pytest.fixture
def fake_node(executor: SqliteExecutor) -> Iterator[FakeNode]:
    node = FakeNode(executor)
    try:
        yield node
    finally:
        node.stop()
