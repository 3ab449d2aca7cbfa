"""``python -m harness bench-batch``: ``claim_many`` + ``ack_many`` against single claims.

On one cluster, in one run, ``--clients`` threads (8; a transport each, or one shared
with ``--shared``) consume a pre-filled queue (``--messages`` over ``--groups``) for
``--seconds``, two ways:

* **single**: ``claim`` then ``ack``, one message per cycle (two requests);
* **batched**: ``claim_many(--batch)`` then ``ack_many`` of what it leased (two requests
  for up to ``--batch`` messages of as many groups).

The windows run single, batched, batched, single, each on a queue refilled for it, so a
drift of the machine's speed over the run weighs on both alike; each way's figure is
its two windows together. Printed and written to ``batch.json``: messages/s of each
way, the ratio batched/single (issue 26's target: at least 3 at 8 clients), and per
message the requests the clients sent, the client's CPU and the nodes' CPU (where the
time goes). Exit 0 when the target is met, 1 when missed, 2 when the benchmark failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rqueue._many import MAX_BATCH

from ..errors import EXIT_HARNESS, EXIT_MISSED, EXIT_OK
from . import queue, store
from .cost import Meter
from .load import Load, run_threads
from .target import add_cluster_arguments, run_on_cluster

TARGET = 3.0  # batched messages/s over single messages/s, at 8 clients
WAYS = ("single", "batched")


def register(sub: argparse._SubParsersAction) -> None:

    p = sub.add_parser(
        "bench-batch",
        help="claim_many + ack_many vs single claim + ack: messages/s and their ratio",
        description=(
            "Start a cluster (or use --urls), pre-fill a queue, and let --clients threads "
            "consume it for --seconds two ways: single (claim, then ack: one message per "
            "two requests) and batched (claim_many(--batch), then ack_many: up to --batch "
            "messages of as many groups per two requests). Windows run single, batched, "
            "batched, single, each on a refilled queue, so a drift of the machine's speed "
            "weighs on both alike. Prints messages/s of each way, the ratio batched/single "
            "(target: >= 3 at 8 clients) and, per message, the requests sent and the CPU "
            "of the client and of the nodes; writes batch.json and batch.md."
        ),
        epilog=(
            "The queue's tables are emptied between windows: never point --urls at a "
            "cluster whose queue you want to keep. Exit status: 0 target met, 1 missed, "
            "2 the benchmark failed (the reason on stderr)."
        ),
    )
    add_cluster_arguments(p)
    p.add_argument("--clients", type=int, default=8, help="client threads (8)")
    p.add_argument("--batch", type=int, default=10, help="claim_many's max_messages (10)")
    p.add_argument("--seconds", type=float, default=5.0, help="measured seconds per window (5)")
    p.add_argument("--warmup", type=float, default=1.0, help="unmeasured run-in per window (1)")
    p.add_argument("--groups", type=int, default=2000, help="groups of the backlog (2000)")
    p.add_argument(
        "--messages", type=int, default=40_000, help="messages queued before each window"
    )
    p.add_argument("--shared", action="store_true", help="one transport for every client")
    p.add_argument("--out", type=Path, metavar="DIR", help="default results/bench-batch-<ts>")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(handler=main)


# -- steps -----------------------------------------------------------------------------------
def batch_worker(client: Any, i: int, batch: int) -> Callable[[], int]:
    """A step: ``claim_many(batch)``, then ``ack_many`` of the leases; the messages acked.
    A lease ``ack_many`` could not ack fails the step (counted as an error)."""
    name = f"bench-batcher-{i}"

    def step() -> int:
        leases = client.claim_many(name, queue.VISIBILITY, batch)
        if not leases:
            return 0
        failed = [o for o in client.ack_many(leases) if o is not None]
        if failed:
            raise failed[0]
        return len(leases)

    return step


def single_worker(client: Any, i: int) -> Callable[[], bool]:
    """A step: ``claim``, then ``ack``; one message."""
    step, _ = queue.cycle_worker(None, (), i, client)  # type: ignore[arg-type]
    return step


# -- the run ---------------------------------------------------------------------------------
def run_batch(
    urls: list[str],
    args: argparse.Namespace,
    say: Callable[[str], None],
    pids: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Both ways on the cluster at ``urls`` (leader first); the batch.json document."""
    from ..subjects import get_subject

    subject = get_subject("rqueue")
    http = store.Http(urls[0])
    doc: dict[str, Any] = {
        "started": _utc(),
        "machine": {"cpus": os.cpu_count(), "load_before": list(os.getloadavg())},
        "settings": {
            k: getattr(args, k)
            for k in ("clients", "batch", "seconds", "warmup", "groups", "messages", "shared")
        },
    }
    loads: dict[str, Load] = {}
    meters: dict[str, list[Meter]] = {w: [] for w in WAYS}
    try:
        for way in ("single", "batched", "batched", "single"):
            say(
                f"{way}: {args.clients} clients, {args.messages:,} messages over "
                f"{args.groups:,} groups" + (", one shared transport" if args.shared else "")
            )
            store.empty_queue(http)
            queue.fill(subject, urls, http, prefix="b-", groups=args.groups, messages=args.messages)
            meter = Meter(dict(pids or {}), leader=urls[0])
            load = _window(subject, urls, args, way, meter)
            if load.empty:
                say(f"  warning: {load.empty:,} claims found nothing: raise --messages")
            say(f"  {load.item_rate:,.0f} messages/s ({load.ops:,} cycles)")
            loads[way] = loads[way] + load if way in loads else load
            meters[way].append(meter)
        store.empty_queue(http)
    finally:
        http.close()
    doc["rows"] = [_row(way, loads[way], meters[way]) for way in WAYS]
    single, batched = (loads[w].item_rate for w in WAYS)
    ratio = batched / single if single > 0 else None
    doc["ratio"] = None if ratio is None else round(ratio, 2)
    doc["target"] = {
        "what": f"claim_many({args.batch}) messages/s over single claims', {args.clients} clients",
        "required": TARGET,
        # a single way that ran dry would be capped low and flatter the ratio
        "met": ratio is not None and ratio >= TARGET and not loads["single"].empty,
    }
    doc["machine"]["load_after"] = list(os.getloadavg())
    doc["finished"] = _utc()
    return doc


def _window(
    subject: Any, urls: Sequence[str], args: argparse.Namespace, way: str, meter: Meter
) -> Load:
    shared = meter.wire.wrap(queue.open_client(subject, urls)) if args.shared else None

    def open_worker(i: int) -> tuple[Callable[[], bool | int], Callable[[], None]]:
        client = shared or meter.wire.wrap(queue.open_client(subject, urls))
        close = (lambda: None) if shared else client.close
        if way == "batched":
            return batch_worker(client, i, args.batch), close
        return single_worker(client, i), close

    try:
        return run_threads(open_worker, args.clients, args.seconds, args.warmup, meter)
    finally:
        if shared is not None:
            shared.close()


def _row(way: str, load: Load, meters: list[Meter]) -> dict[str, Any]:
    """One way's figures over its windows: rates, and per message what it cost."""
    requests = client_cpu = nodes_cpu = leader_cpu = seconds = 0.0
    for m in meters:
        a, b = m.readings[0], m.readings[1]
        seconds += b.at - a.at
        requests += b.wire[0] - a.wire[0]
        client_cpu += b.client_cpu - a.client_cpu
        for url, before in a.node_cpu.items():
            after = b.node_cpu.get(url)
            if before is not None and after is not None:
                nodes_cpu += after - before
                leader_cpu += (after - before) if url == m.leader else 0.0
    n = load.items
    return {
        "way": way,
        "seconds": round(load.seconds, 3),
        "messages": n,
        "messages_per_second": round(load.item_rate, 1),
        "cycles": load.ops,
        "messages_per_cycle": round(n / load.ops, 2) if load.ops else None,
        "p50_cycle_ms": _r(load.percentile_ms(50)),
        "p99_cycle_ms": _r(load.percentile_ms(99)),
        "requests_per_message": round(requests / n, 3) if n else None,
        "client_cpu_ms_per_message": round(client_cpu * 1000 / n, 3) if n else None,
        "nodes_cpu_ms_per_message": round(nodes_cpu * 1000 / n, 3) if n and nodes_cpu else None,
        "leader_cpu_ms_per_message": round(leader_cpu * 1000 / n, 3) if n and leader_cpu else None,
        "busy_cores": round((client_cpu + nodes_cpu) / seconds, 2) if seconds else None,
        "empty": load.empty,
        "errors": load.errors,
        "first_error": load.first_error,
    }


def table(doc: dict[str, Any]) -> str:
    """The figures as a Markdown table, the ratio and the machine's load under it."""
    lines = [
        "| way | messages/s | msgs/cycle | cycle p50 ms | requests/msg | client CPU ms/msg "
        "| nodes CPU ms/msg | busy cores | errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        lines.append(
            f"| {r['way']} | {r['messages_per_second']:,.0f} | {r['messages_per_cycle']} | "
            f"{r['p50_cycle_ms']} | {r['requests_per_message']} | "
            f"{r['client_cpu_ms_per_message']} | {r['nodes_cpu_ms_per_message']} | "
            f"{r['busy_cores']} | {r['errors']} |"
        )
    t, load = doc["target"], doc["machine"]
    dry = [r["way"] for r in doc["rows"] if r["empty"]]
    if dry:
        lines += ["", f"- warning: {', '.join(dry)} ran dry (capped figure): raise --messages"]
    lines += [
        "",
        f"- ratio batched/single: {doc['ratio']} (target >= {t['required']:g}): "
        f"{'met' if t['met'] else 'MISSED'}",
        f"- load average before/after: {_loads(load['load_before'])} / "
        f"{_loads(load['load_after'])} on {load['cpus']} CPUs; {doc['finished']}",
    ]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    """The ``bench-batch`` command: 0 target met, 1 missed, 2 the benchmark failed."""

    def say(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    problems = [
        f"--{k} {getattr(args, k)}: must be above 0"
        for k in ("clients", "batch", "seconds", "groups", "messages")
        if not getattr(args, k) > 0
    ]
    if args.warmup < 0:
        problems.append(f"--warmup {args.warmup}: must be 0 or more")
    if args.groups > args.messages:
        problems.append(
            f"--groups {args.groups} > --messages {args.messages}: every group needs a "
            "message; raise --messages or lower --groups"
        )
    if args.batch > MAX_BATCH:
        problems.append(f"--batch {args.batch}: claim_many takes at most {MAX_BATCH}")
    if problems:
        print(f"harness: error: {'; '.join(problems)}", file=sys.stderr)
        return EXIT_HARNESS
    out = args.out or Path("results") / f"bench-batch-{time.strftime('%Y%m%dT%H%M%SZ')}"
    doc = run_on_cluster(
        "bench-batch", args, out, say, lambda urls, pids: run_batch(urls, args, say, pids)
    )
    if isinstance(doc, int):
        return doc
    (out / "batch.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "batch.md").write_text(table(doc) + "\n")
    print(table(doc))
    return EXIT_OK if doc["target"]["met"] else EXIT_MISSED


def _loads(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
