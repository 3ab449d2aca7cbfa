"""Nodes in another time zone, on real local clusters: one node, a minority, and every
node, with a daylight-saving jump a few seconds into the test (:mod:`rqueue._zone`).

rqlite rewrites ``'now'`` in the receiving node's local time (the embedded node does as
rqlite does; ``LocalCluster.set_time_zone`` gives a node a TZif file and restarts it). A
spring-forward makes the rewritten time jump an hour: without the stamp's guard every
live lease then looks expired and a delayed message looks due. The mutant subject
``mutant-zone-blind`` (rqueue without the guard and the checks) shows that happening on
the same clusters; rqueue refuses the node (one logged line), fails over to the nodes in
UTC, and raises :class:`~rqueue.ZoneRefused` when there are none.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import zonefile
from harness.cluster.external.cluster import URLS_ENV
from harness.cluster.local.cluster import LocalCluster
from harness.subjects.mutants import ZoneBlindStatements
from rqueue import AsyncRqliteTransport, RqliteTransport, ZoneRefused

from .conftest import Blocking

pytestmark = pytest.mark.skipif(
    bool(os.environ.get(URLS_ENV)), reason=f"needs clusters the test controls, not {URLS_ENV}"
)
ROOT = Path(__file__).resolve().parents[2]
VIS = 120.0
#: seconds from setting the zones to the daylight-saving jump: the nodes' restarts and the
#: leases taken before it fit well inside (a few seconds on this machine)
LEAD = 20
Blind = type("Blind", (RqliteTransport,), {"statements_class": ZoneBlindStatements})


@pytest.fixture
def cluster_with(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Any]]:
    """``cluster_with(n, zone_of)``: an ``n``-node cluster whose node ``i`` runs in the
    zone ``zone_of(i)`` (TZif bytes, None: UTC); stopped afterwards."""
    made: list[LocalCluster] = []

    def start(n: int, zone_of: Callable[[int], bytes | None]) -> LocalCluster:
        c = LocalCluster.start(
            nodes=n, directory=tmp_path_factory.mktemp("zone") / "c", timeout=60.0
        )
        made.append(c)
        for i, node in enumerate(c.nodes()):
            tzif = zone_of(i)
            if tzif is not None:
                c.set_time_zone(node.id, tzif)
        c.wait_for_leader(60.0)
        return c

    try:
        yield start
    finally:
        for c in made:
            c.stop()


def both_twins(urls: list[str], loop: asyncio.AbstractEventLoop) -> list[Any]:
    """rqueue's two twins, each on a queue of its own (``sync``, ``async``)."""
    opened = AsyncRqliteTransport.from_url(urls, queue="async", create=True)
    return [
        RqliteTransport.from_url(urls, queue="sync", create=True),
        Blocking(loop, loop.run_until_complete(opened)),
    ]


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    try:
        yield loop
    finally:
        loop.close()


def until_after(at: float) -> None:
    """Wait (bounded: the jump is at most LEAD s away) until the wall clock passes ``at``,
    the moment of the zones' daylight-saving jump, and a second more."""
    assert at - time.time() <= LEAD + 1, "the jump is further away than the test planned"
    while time.time() < at + 1.0:
        time.sleep(min(0.2, max(0.01, at + 1.0 - time.time())))


def before(at: float) -> None:
    """The leases of the test were taken before the jump (else the machine was too slow
    for this test's timing, which says so rather than pass for the wrong reason)."""
    assert time.time() < at - 1.0, f"too slow: the jump at {at} came before the leases"


def rqueue_cli(url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "rqueue", "--url", url, "--timeout", "5", *argv],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_one_node_off_utc_is_refused(cluster_with: Any, loop: Any, caplog: Any) -> None:
    c = cluster_with(1, lambda i: zonefile.fixed(19800))  # +05:30
    url = c.urls[0]
    line = (
        f"rqueue: node {url} rewrites 'now' +19800 s (+05:30) off UTC (its local time zone "
        "is not UTC): refused for timed calls; start rqlited with TZ=UTC, or give its "
        "container no /etc/localtime of another zone"
    )
    with caplog.at_level(logging.ERROR, logger="rqueue"):
        with pytest.raises(ZoneRefused) as sync:
            RqliteTransport.from_url(url, timeout=10)
        with pytest.raises(ZoneRefused) as asyn:
            loop.run_until_complete(AsyncRqliteTransport.from_url(url, timeout=10))
    assert str(sync.value) == str(asyn.value) == line
    # once per process: the node's state changed once, whatever the transports that saw it
    assert [r.getMessage() for r in caplog.records] == [line]
    # the admin CLI: a timed write is refused with the line; reads do not depend on zones
    done = rqueue_cli(url, "publish", "g", "{}")
    assert (done.returncode, done.stderr.strip()) == (1, f"error: {line}")
    done = rqueue_cli(url, "stats", "--json")
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_a_minority_off_utc_after_a_jump_fails_over_to_the_utc_nodes(
    cluster_with: Any, loop: Any, caplog: Any
) -> None:
    """Node 0 springs forward an hour a few seconds in; the clients talk to it first."""
    at = int(time.time()) + LEAD
    c = cluster_with(3, lambda i: zonefile.dst_jump(at) if i == 0 else None)
    urls = c.urls  # node 0 first: every client starts there
    guarded = both_twins(urls, loop)
    blind = Blind.from_url(urls, queue="blind", create=True)
    try:
        held = {}
        for q in [*guarded, blind]:
            q.publish("g", {"n": 1})
            q.publish("d", {"n": 2}, delay=VIS)  # due in two minutes
            held[q] = q.claim("A", VIS)
        before(at)
        until_after(at)
        with caplog.at_level(logging.ERROR, logger="rqueue"):
            for q in guarded:
                assert q.claim("B", VIS) is None  # g is held, d not due: nothing
                q.ack(held[q])  # the holder still settles its lease, through a UTC node
        assert f"node {urls[0]} rewrites 'now' +3600 s (+01:00) off UTC" in caplog.text
        # the mutant, stamped by node 0's local time: the held lease and the delay lapsed
        late = blind.claim("B", VIS)
        assert late is not None and late.group_id in ("g", "d")
        assert late.group_id == "d" or late.seq == held[blind].seq  # early, or a duplicate
    finally:
        for q in [*guarded, blind]:
            q.close()
    # after the jump the node is off UTC for good: the CLI through it alone is refused
    done = rqueue_cli(urls[0], "publish", "--queue", "sync", "g", "{}")
    assert done.returncode == 1 and "rewrites 'now' +3600 s (+01:00) off UTC" in done.stderr


@pytest.mark.slow
def test_every_node_off_utc_after_a_jump_raises_zone_refused(cluster_with: Any, loop: Any) -> None:
    at = int(time.time()) + LEAD
    c = cluster_with(3, lambda i: zonefile.dst_jump(at))
    guarded = both_twins(c.urls, loop)
    blind = Blind.from_url(c.urls, queue="blind", create=True)
    try:
        held = {}
        for q in [*guarded, blind]:
            q.publish("g", {"n": 1})
            held[q] = q.claim("A", VIS)
        before(at)
        until_after(at)
        for q in guarded:
            with pytest.raises(ZoneRefused, match=r"every node rewrites 'now' off UTC"):
                q.claim("B", VIS)  # nothing applied: no second lease of g
            assert q.peek("g")[0].held_by == "A"  # reads go on
        duplicate = blind.claim("B", VIS)
        assert duplicate is not None and duplicate.seq == held[blind].seq
        assert duplicate.token != held[blind].token  # a second lease of one group
    finally:
        for q in [*guarded, blind]:
            q.close()
