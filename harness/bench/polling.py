"""``python -m harness bench-polling``: long polling against the sleep-0.5 polling loop.

Two figures for each way of waiting for messages, on one cluster, in one run:

* **idle requests/s**: ``--waiters`` asyncio tasks (64) wait on one transport of an
  empty queue for ``--seconds``; the nodes count the data requests they serve
  (``/debug/vars``: executions, queries, requests, summed over the nodes);
* **publish→claim latency** (p50, p99): the same waiters, and one message published
  every ``--interval`` seconds (at a random phase); from the publish's start to the
  moment a waiter has the message.

The ways: ``long-poll`` (``claim(wait=...)``, the message published through another
transport, as another process would), ``long-poll, same transport`` (published through
the waiters' transport, which wakes them at once), and ``sleep-0.5 loop`` (``claim``,
then ``asyncio.sleep(0.5)`` when it found nothing). Targets (issue 26): an idle
transport with 64 waiters at most 2 requests/s; publish→claim p50 at most 100 ms with
long-pollers (the same-transport figure; from another transport the backoff's ceiling,
0.55 s, bounds it). Writes ``polling.json`` to the output folder; exit 0 when the
targets are met, 1 when one is missed, 2 when the benchmark failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import requests

from ..errors import EXIT_HARNESS, EXIT_MISSED, EXIT_OK
from .load import percentile_ms
from .target import add_cluster_arguments, run_on_cluster

VIS = 60.0
IDLE_TARGET = 2.0  # requests/s, 64 waiters
P50_TARGET = 100.0  # ms
WAYS = ("long-poll", "long-poll, same transport", "sleep-0.5 loop")


def register(sub: argparse._SubParsersAction) -> None:

    p = sub.add_parser(
        "bench-polling",
        help="long polling vs a sleep-0.5 loop: idle requests/s, publish->claim latency",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    add_cluster_arguments(p)
    p.add_argument("--waiters", type=int, default=64, help="waiting tasks (64)")
    p.add_argument("--seconds", type=float, default=20.0, help="idle window per way (20)")
    p.add_argument("--samples", type=int, default=40, help="messages timed per way (40)")
    p.add_argument("--interval", type=float, default=0.5, help="seconds between publishes")
    p.add_argument("--out", type=Path, metavar="DIR", help="default results/bench-polling-<ts>")
    p.set_defaults(handler=main)


def served(urls: list[str]) -> int:
    """Data requests (execute, query, request) the nodes have served so far."""
    total = 0
    for url in urls:
        http = requests.get(f"{url}/debug/vars", timeout=10).json()["http"]
        total += int(http["executions"]) + int(http["queries"]) + int(http["requests"])
    return total


def _clear(urls: list[str]) -> None:
    stmts = ["DELETE FROM messages", "DELETE FROM groups", "DELETE FROM rqueue_dedup"]
    r = requests.post(f"{urls[0]}/db/execute?transaction=true", json=stmts, timeout=30)
    r.raise_for_status()


class _Waiters:
    """``n`` tasks on one transport waiting for messages as ``way`` says; each message
    a waiter gets is acked and its arrival time noted under its ``n``."""

    def __init__(self, transport: Any, n: int, way: str) -> None:
        self.transport, self.way = transport, way
        self.arrived: dict[int, float] = {}
        self.errors: list[str] = []
        self._tasks = [asyncio.create_task(self._wait(k)) for k in range(n)]

    async def _wait(self, k: int) -> None:
        t = self.transport
        while True:
            try:
                if self.way == "sleep-0.5 loop":
                    lease = await t.claim(f"w{k}", VIS)
                    if lease is None:
                        await asyncio.sleep(0.5)  # the loop that long polling replaces
                        continue
                else:
                    lease = await t.claim(f"w{k}", VIS, wait=30.0)
                    if lease is None:
                        continue
                self.arrived[json.loads(lease.event)["n"]] = time.monotonic()
                await t.ack(lease)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # counted; the figure is reported with it
                self.errors.append(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.1)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def measure(urls: list[str], way: str, args: argparse.Namespace, say: Any) -> dict:
    """One way's idle requests/s and publish→claim latencies."""
    from rqueue import AsyncRqliteTransport

    url = ",".join(urls)
    waiting = await AsyncRqliteTransport.from_url(url)
    other = await AsyncRqliteTransport.from_url(url)
    publisher = waiting if way == "long-poll, same transport" else other
    waiters = _Waiters(waiting, args.waiters, way)
    try:
        await asyncio.sleep(1.5)  # run-in: the backoff reaches its ceiling
        before, started = served(urls), time.monotonic()
        await asyncio.sleep(args.seconds)  # the idle window the nodes count requests in
        idle = (served(urls) - before) / (time.monotonic() - started)
        say(f"  {way}: idle {idle:.2f} requests/s with {args.waiters} waiters")
        rng = random.Random(26)
        sent: dict[int, float] = {}
        for n in range(args.samples):
            await asyncio.sleep(args.interval * rng.uniform(0.5, 1.5))
            sent[n] = time.monotonic()
            await publisher.publish(f"g{n % 8}", {"n": n})
        deadline = time.monotonic() + 30
        while len(waiters.arrived) < len(sent) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        latencies = [waiters.arrived[n] - sent[n] for n in sent if n in waiters.arrived]
    finally:
        await waiters.stop()
        await waiting.close()
        await other.close()
    row = {
        "way": way,
        "waiters": args.waiters,
        "idle_requests_per_s": round(idle, 3),
        "samples": len(sent),
        "received": len(latencies),
        "p50_ms": _ms(percentile_ms(latencies, 50)),
        "p99_ms": _ms(percentile_ms(latencies, 99)),
        "errors": len(waiters.errors),
        "first_error": waiters.errors[0] if waiters.errors else None,
    }
    say(f"  {way}: publish->claim p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms")
    return row


async def run_polling(urls: list[str], args: argparse.Namespace, say: Any) -> dict:
    """Every way, one after the other, each on an emptied queue."""
    from rqueue import AsyncRqliteTransport

    await (await AsyncRqliteTransport.from_url(",".join(urls))).close()  # the schema
    rows = []
    for way in WAYS:
        _clear(urls)
        rows.append(await measure(urls, way, args, say))
    by = {r["way"]: r for r in rows}
    targets = [
        {
            "what": f"idle transport, {args.waiters} long-polling tasks: requests/s",
            "target": f"<= {IDLE_TARGET:g}",
            "value": by["long-poll"]["idle_requests_per_s"],
            "met": by["long-poll"]["idle_requests_per_s"] <= IDLE_TARGET,
        },
        {
            "what": "publish->claim p50 with long-pollers (same transport), ms",
            "target": f"<= {P50_TARGET:g}",
            "value": by["long-poll, same transport"]["p50_ms"],
            "met": (by["long-poll, same transport"]["p50_ms"] or 1e9) <= P50_TARGET,
        },
    ]
    return {"rows": rows, "targets": targets}


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _table(doc: dict) -> str:
    lines = [
        "| way | idle requests/s | publish→claim p50 ms | p99 ms | received | errors |",
        "|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        lines.append(
            f"| {r['way']} | {r['idle_requests_per_s']:.2f} | {r['p50_ms']} | {r['p99_ms']} | "
            f"{r['received']}/{r['samples']} | {r['errors']} |"
        )
    lines.append("")
    for t in doc["targets"]:
        lines.append(f"- {t['what']}: {t['value']} (target {t['target']}): "
                     f"{'met' if t['met'] else 'MISSED'}")  # fmt: skip
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    out = args.out or Path("results") / f"bench-polling-{time.strftime('%Y%m%dT%H%M%SZ')}"
    if args.waiters < 1 or args.samples < 1 or args.seconds <= 0 or args.interval <= 0:
        print("harness: error: --waiters, --samples, --seconds, --interval must be > 0",
              file=sys.stderr)  # fmt: skip
        return EXIT_HARNESS

    def measure(urls: list[str], pids: dict[str, int]) -> dict:
        return asyncio.run(run_polling(urls, args, say))

    doc = run_on_cluster("bench-polling", args, out, say, measure)
    if isinstance(doc, int):
        return doc
    (out / "polling.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "polling.md").write_text(_table(doc) + "\n")
    print(_table(doc))
    return EXIT_OK if all(t["met"] for t in doc["targets"]) else EXIT_MISSED
