"""``python -m harness bench``: the figures of issue 6, on one cluster, in one run.

Measured in this order, each on a queue prepared for it:

1. the store's limit: single-statement INSERTs/s over HTTP at each concurrency (and
   again right before each claim and claim+ack figure, which is compared with that
   paired figure: the machine's load drifts over the minutes of a run);
2. publish/s, single ``publish`` and batched ``publish_many``;
3. rqueue claims/s alone (a pre-filled queue, one message per group) and claim+ack
   cycles/s, at each concurrency: first with every worker thread sharing one transport
   (concurrent calls share requests: group commit), then with a transport per worker,
   then (shared) with each ack folded into the next claim by ``ack_and_claim``;
4. 64 sync threads vs 64 asyncio tasks on one loop (claim+ack cycles), each side sharing
   one transport, then a transport per worker; two windows a side, in the order threads,
   tasks, tasks, threads, so that a drift of the machine's speed weighs on both alike;
5. the ``seed-reference`` subject's claim+ack cycles/s (on the seed's own schema);
6. claim latency p50/p99 of one claimer with a small backlog, then right after with a
   big one (1,000,000 messages over 10,000 groups): back to back, since the machine's
   speed drifts over a run.

Leases are long (nothing lapses mid-run). The results
go to ``bench.json`` with the targets checked as ratios of figures from this run, a plot
``bench.png``, Markdown tables ``bench.md`` (what docs/performance.md's first section quotes) and a
printed table. The queue's tables are emptied and dropped between
measurements: never point ``--urls`` at a cluster whose queue you want to keep.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..subjects import Subject
from . import queue, store
from .cost import Meter, cost_row
from .load import Load, percentile_ms, run_tasks, run_threads

BENCH_FORMAT = 1
Doc = dict[str, Any]  # the bench.json document being built
Say = Callable[[str], None]  # where progress lines go


@dataclass(frozen=True)
class BenchSettings:
    """Sizes and durations of one benchmark run."""

    seconds: float = 5.0  # measured window of each throughput figure
    warmup: float = 1.0  # unmeasured run-in before each window
    concurrency: tuple[int, ...] = (1, 8, 32)
    async_concurrency: int = 64
    # the backlogs must outlast each run: a queue that runs dry caps the figure (reported)
    claim_backlog: int = 40_000  # groups (one message each) before a claims-alone run
    cycle_backlog: int = 30_000  # messages before a claim+ack run ...
    cycle_groups: int = 500  # ... over this many groups
    publish_batch: int = 100
    samples: int = 500  # claim latency samples per backlog
    small_backlog: int = 1_000  # messages (one group each)
    big_backlog: int = 1_000_000
    big_groups: int = 10_000
    bulk_batch: int = 100_000  # rows per bulk INSERT statement when filling
    target_concurrency: int = field(default=8)

    def __post_init__(self) -> None:
        positive = {k: v for k, v in asdict(self).items() if k not in ("concurrency", "warmup")}
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise ValueError(f"concurrency levels must be >= 1, got {self.concurrency}")
        if self.target_concurrency not in self.concurrency:
            raise ValueError(
                f"the targets are checked at concurrency {self.target_concurrency}, which is "
                f"not among the levels measured ({', '.join(map(str, self.concurrency))})"
            )
        if self.cycle_groups > self.cycle_backlog or self.big_groups > self.big_backlog:
            raise ValueError("a backlog needs at least as many messages as groups")


class Progress:
    """One line per step on stderr, with the elapsed time."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.t0 = time.monotonic()

    def __call__(self, text: str) -> None:
        if not self.quiet:
            print(f"[{time.monotonic() - self.t0:6.1f}s] {text}", file=sys.stderr, flush=True)


# -- the run -------------------------------------------------------------------------------
#: the parts of a run, in the order they run (``--only`` picks some)
PARTS = ("store", "publish", "claims", "cycles", "threads-vs-tasks", "seed", "latency")


def run_bench(
    urls: list[str],
    settings: BenchSettings,
    progress: Say,
    pids: Mapping[str, int] | None = None,
    parts: Sequence[str] = PARTS,
) -> Doc:
    """Measure ``parts`` on the cluster at ``urls`` (leader first); the bench.json dict.

    ``pids``: node URL -> process id, for the nodes' CPU in the cost breakdown.
    """
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise ValueError(f"unknown bench parts {unknown}; choose from {', '.join(PARTS)}")
    bench = _Bench(urls, settings, progress, dict(pids or {}))
    try:
        for part in PARTS:
            if part in parts:
                getattr(bench, part.replace("-", "_"))()
        bench.http.execute([f"DROP TABLE IF EXISTS {store.INSERT_TABLE}"])
    finally:
        bench.http.close()
    doc = bench.doc
    doc["parts"] = [p for p in PARTS if p in parts]
    doc["machine"]["load_after"] = list(os.getloadavg())
    doc["finished"] = _utc()
    from .report import targets

    doc["targets"] = [t.to_json() for t in targets(doc, settings.target_concurrency)]
    return doc


def _paired(load: Load, baseline: Load, meter: Meter | None = None) -> dict[str, Any]:
    """A row with the INSERT rate measured just before it, at the same concurrency: the
    machine's load drifts over a run, and the ratio should compare like with like."""
    row = {**load.to_json(), "insert_per_second": round(baseline.rate, 1)}
    if meter is not None:
        row["cost"] = cost_row(meter, load.ops)
    return row


def _how(shared: bool) -> str:
    return "one shared transport" if shared else "a transport per worker"


class _Bench:
    """One run's cluster, settings and document; each public method is one part."""

    def __init__(
        self, urls: list[str], settings: BenchSettings, progress: Say, pids: dict[str, int]
    ) -> None:
        from ..subjects import get_subject

        self.urls, self.s, self.progress, self.pids = urls, settings, progress, pids
        self.rqueue, self.seed_subject = get_subject("rqueue"), get_subject("seed-reference")
        self.http = store.Http(urls[0])
        self.doc: Doc = {
            "format": BENCH_FORMAT,
            "settings": {**asdict(settings), "concurrency": list(settings.concurrency)},
            "started": _utc(),
            "machine": {"cpus": os.cpu_count(), "load_before": list(os.getloadavg())},
            "store_insert": [],
            "publish": [],
            "rqueue_claim_shared": [],
            "rqueue_claim": [],
            "rqueue_cycle_shared": [],
            "rqueue_cycle": [],
            "rqueue_cycle_folded": [],
            "seed_cycle": [],
            "sync_vs_async": [],
            "claim_latency": [],
        }

    def meter(self) -> Meter:
        """A cost meter for one load (the leader's CPU shown apart)."""
        return Meter(self.pids, leader=self.urls[0])

    # -- parts ---------------------------------------------------------------------------
    def store(self) -> None:
        store.create_insert_table(self.http)
        for c in self.s.concurrency:
            self.progress(f"store: single-statement INSERTs at concurrency {c}")
            meter = self.meter()
            load = self._inserts(c, meter)
            self.doc["store_insert"].append({**load.to_json(), "cost": cost_row(meter, load.ops)})
        store.drop_queue(self.http)

    def publish(self) -> None:
        s, subject, urls = self.s, self.rqueue, self.urls
        for c in s.concurrency:
            for batch in (1, s.publish_batch):
                self.progress(
                    f"publish: {'single' if batch == 1 else f'batches of {batch}'}, concurrency {c}"
                )
                store.empty_queue(self.http)
                if batch == 1:
                    load = run_threads(
                        lambda i: queue.publish_worker(subject, urls, i), c, s.seconds, s.warmup
                    )
                else:
                    load = run_threads(
                        lambda i, b=batch: queue.publish_many_worker(subject, urls, i, b),
                        c,
                        s.seconds,
                        s.warmup,
                    )
                row = load.to_json()
                row["batch"] = batch
                row["messages_per_second"] = round(load.rate * batch, 1)
                self.doc["publish"].append(row)

    def claims(self) -> None:
        s = self.s
        self._ensure_insert_table()
        for shared in (True, False):
            key = "rqueue_claim_shared" if shared else "rqueue_claim"
            for c in s.concurrency:
                self.progress(
                    f"rqueue: claims alone at concurrency {c}, {_how(shared)} "
                    f"({s.claim_backlog:,} groups queued)"
                )
                self._refill(self.rqueue, "c-", s.claim_backlog, s.claim_backlog)
                baseline = self._inserts(c)
                meter = self.meter()
                load = self._threads(self.rqueue, c, queue.claim_worker, shared, meter)
                self._dry(load, "--claim-backlog")
                self.doc[key].append(_paired(load, baseline, meter))

    def cycles(self) -> None:
        self._ensure_insert_table()
        for shared in (True, False):
            key = "rqueue_cycle_shared" if shared else "rqueue_cycle"
            for c in self.s.concurrency:
                self.doc[key].append(self._cycles(self.rqueue, c, shared=shared))
        for c in self.s.concurrency:
            row = self._cycles(self.rqueue, c, shared=True, folded=True)
            self.doc["rqueue_cycle_folded"].append(row)

    def threads_vs_tasks(self) -> None:
        """Threads, tasks, tasks, threads (each side's figure: its two windows together),
        so a drift of the machine's speed over the four windows weighs on both alike."""
        n, subject = self.s.async_concurrency, self.rqueue

        def window(mode: str, shared: bool) -> Load:
            where = "threads" if mode == "threads" else "asyncio tasks on one loop"
            self.progress(f"{subject.name}: claim+ack cycles, {n} {where}, {_how(shared)}")
            self._fill_cycles(subject)
            if mode == "threads":
                load = self._threads(subject, n, queue.cycle_worker, shared)
            else:
                load = self._tasks(subject, n, shared)
            return self._dry(load, "--cycle-backlog")

        for shared in (True, False):
            loads = {"threads": window("threads", shared)}
            loads["tasks"] = window("tasks", shared) + window("tasks", shared)
            loads["threads"] += window("threads", shared)
            for mode, load in loads.items():
                self.doc["sync_vs_async"].append(
                    {"mode": mode, "shared": shared, "windows": 2, **load.to_json()}
                )

    def seed(self) -> None:
        self._ensure_insert_table()
        store.drop_queue(self.http)  # the seed makes its own schema: no head_seq, no indexes
        for c in self.s.concurrency:
            self.doc["seed_cycle"].append(self._cycles(self.seed_subject, c))
        store.drop_queue(self.http)

    def latency(self) -> None:
        """The two latency figures back to back: the machine's speed drifts over a run."""
        s, subject = self.s, self.rqueue
        self.progress(f"claim latency: {s.small_backlog:,} queued")
        store.drop_queue(self.http)
        self._refill(subject, "lat-", s.small_backlog, s.small_backlog)
        self.doc["claim_latency"].append(self._latency(s.small_backlog, s.small_backlog))
        self.progress(
            f"claim latency: filling {s.big_backlog:,} messages over {s.big_groups:,} groups"
        )
        store.drop_queue(self.http)
        t0 = time.monotonic()
        queue.fill(
            subject,
            self.urls,
            self.http,
            prefix="big-",
            groups=s.big_groups,
            messages=s.big_backlog,
            bulk_batch=s.bulk_batch,
        )
        self.doc["big_fill_seconds"] = round(time.monotonic() - t0, 1)
        self.progress(
            f"claim latency: {s.big_backlog:,} queued (filled in {self.doc['big_fill_seconds']} s)"
        )
        self.doc["claim_latency"].append(self._latency(s.big_backlog, s.big_groups))

    # -- helpers -------------------------------------------------------------------------
    def _ensure_insert_table(self) -> None:
        present = self.http.query(
            f"SELECT 1 FROM sqlite_master WHERE type='table' AND name='{store.INSERT_TABLE}'"
        )
        if not present:
            store.create_insert_table(self.http)

    def _inserts(self, c: int, meter: Meter | None = None) -> Load:
        counter = meter.wire if meter else None

        def open_worker(i: int) -> tuple[Callable[[], bool], Callable[[], None]]:
            conn = store.Http(self.urls[0], counter=counter)
            return store.insert_step(conn, i), conn.close

        return run_threads(open_worker, c, self.s.seconds, self.s.warmup, meter)

    def _dry(self, load: Load, option: str) -> Load:
        """Say so when claims found the queue empty: the backlog ran out mid-run, and the
        figure is capped by it rather than by the queue (the report marks it invalid)."""
        if load.empty:
            self.progress(
                f"  warning: {load.empty:,} claims found nothing: the queue ran dry, so this "
                f"figure is capped by the backlog; raise {option}"
            )
        return load

    def _threads(
        self,
        subject: Subject,
        c: int,
        worker: Callable[..., tuple[Callable[[], bool], Callable[[], None]]],
        shared: bool,
        meter: Meter | None = None,
    ) -> Load:
        """``c`` threads running ``worker`` steps, each with its own client or all sharing
        one; ``meter`` counts the clients' requests and reads the costs."""
        urls, s = self.urls, self.s
        wrap = meter.wire.wrap if meter else _same
        client = wrap(queue.open_client(subject, urls)) if shared else None

        def open_worker(i: int) -> tuple[Callable[[], bool], Callable[[], None]]:
            if client is not None:
                return worker(subject, urls, i, client)
            own = wrap(queue.open_client(subject, urls))
            step, _ = worker(subject, urls, i, own)
            return step, own.close

        try:
            return run_threads(open_worker, c, s.seconds, s.warmup, meter)
        finally:
            if client is not None:
                client.close()

    def _tasks(self, subject: Subject, n: int, shared: bool) -> Load:
        """``n`` asyncio tasks on one loop running claim+ack cycles, like :meth:`_threads`."""
        holder: list[Any] = []
        urls = self.urls

        async def open_task(i: int) -> tuple[Callable, Callable]:
            if not shared:
                return await queue.cycle_task(subject, urls, i)
            if not holder:
                holder.append(await queue.open_async_client(subject, urls))
            step, _ = await queue.cycle_task(subject, urls, i, holder[0])
            # worker 0 is opened first and closed after every task ended: it closes the client
            return step, (holder[0].close if i == 0 else _no_close)

        return run_tasks(open_task, n, self.s.seconds, self.s.warmup)

    def _cycles(
        self, subject: Subject, c: int, shared: bool = False, folded: bool = False
    ) -> dict[str, Any]:
        s = self.s
        self.progress(
            f"{subject.name}: claim+ack cycles at concurrency {c}"
            + (f", {_how(shared)}" if subject.name == "rqueue" else "")
            + (", each ack folded into the next claim" if folded else "")
            + f" ({s.cycle_backlog:,} queued over {s.cycle_groups:,} groups)"
        )
        self._fill_cycles(subject)
        baseline = self._inserts(c)
        worker = queue.folded_cycle_worker if folded else queue.cycle_worker
        meter = self.meter()
        load = self._threads(subject, c, worker, shared, meter)
        self._dry(load, "--cycle-backlog")
        return _paired(load, baseline, meter)

    def _fill_cycles(self, subject: Subject) -> None:
        self._refill(subject, "y-", self.s.cycle_groups, self.s.cycle_backlog)

    def _refill(self, subject: Subject, prefix: str, groups: int, messages: int) -> None:
        """Empty the queue, then queue ``messages`` messages over ``groups`` groups."""
        store.empty_queue(self.http)
        queue.fill(
            subject, self.urls, self.http, prefix=prefix, groups=groups, messages=messages,
            bulk_batch=self.s.bulk_batch,
        )  # fmt: skip

    def _latency(self, backlog: int, groups: int) -> dict[str, Any]:
        subject, urls, s = self.rqueue, self.urls, self.s
        queue.claim_latencies(subject, urls, min(20, s.samples))  # warm-up, not recorded
        lat = queue.claim_latencies(subject, urls, s.samples)
        return {
            "backlog": backlog,
            "groups": groups,
            "samples": len(lat),
            "p50_ms": _r(percentile_ms(lat, 50)),
            "p99_ms": _r(percentile_ms(lat, 99)),
        }


def _same(client: Any) -> Any:
    return client


async def _no_close() -> None:
    pass


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
