"""Where real rqlited spends its CPU: per INSERT, per claim, per ``ack_and_claim`` cycle.

    python benchmarks/rqlited_profile.py --rqlited PATH [--concurrency 8] [--seconds 8]

Starts a local 3-node cluster of real rqlited (v8: it serves Go's CPU profiles at
``/debug/pprof/profile``), then runs three loads in turn, each with ``--concurrency``
threads: the bench's single-statement INSERTs (a keep-alive connection each), claims
on a queue of ``--groups`` one-message groups, and ``ack_and_claim`` cycles on 30,000
messages over 500 groups (both with the threads sharing one ``RqliteTransport``).
During each load's measured window every node's CPU profile is taken at once; the
table then shares the nodes' CPU per operation (summed over the three nodes) among
rqlited's components (``harness.bench.pprof.RQLITED_COMPONENTS``: a sample counts
for every component on its stack, so the indented parts of apply add up to at most
apply). Each figure is from this one run; the machine is shared by client and nodes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.bench import queue  # noqa: E402
from harness.bench.load import Load, run_threads  # noqa: E402
from harness.bench.pprof import RQLITED_COMPONENTS, Profile, read_profile  # noqa: E402
from harness.bench.store import Http, create_insert_table, drop_queue, insert_step  # noqa: E402
from harness.cluster.local.cluster import LocalCluster  # noqa: E402
from harness.subjects import get_subject  # noqa: E402


class Profiler:
    """A meter for :func:`run_threads`: every node's CPU profile over the window."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.profiles: dict[str, Profile] = {}
        self.seconds = 0
        self.errors: list[str] = []

    def watch(self, start: float, end: float) -> threading.Thread:
        self.seconds = max(1, int(end - start))

        def fetch(url: str) -> None:
            delay = start - time.perf_counter()
            if delay > 0:
                time.sleep(delay)  # a scheduled start, not a wait for a condition
            try:
                with urllib.request.urlopen(
                    f"{url}/debug/pprof/profile?seconds={self.seconds}", timeout=self.seconds + 30
                ) as reply:
                    self.profiles[url] = read_profile(reply.read())
            except OSError as exc:
                self.errors.append(f"{url}: {exc}")

        threads = [threading.Thread(target=fetch, args=(u,), daemon=True) for u in self.urls]
        for t in threads:
            t.start()

        def join_all() -> None:
            for t in threads:
                t.join()

        joiner = threading.Thread(target=join_all, daemon=True)
        joiner.start()
        return joiner


def _measure(
    name: str, urls: list[str], run: Callable[[Profiler], Load]
) -> tuple[str, float, dict[str, float], float]:
    """(name, ops/s, node CPU ms per op by component, total node CPU ms per op)."""
    profiler = Profiler(urls)
    load = run(profiler)
    if profiler.errors or len(profiler.profiles) != len(urls):
        raise SystemExit(f"{name}: no profile from every node: {'; '.join(profiler.errors)}")
    ops = load.rate * profiler.seconds
    per_op = {c: 0.0 for c, _ in RQLITED_COMPONENTS}
    total = 0.0
    for p in profiler.profiles.values():
        total += p.total_ns / 1e6 / ops
        for c, ns in p.component_ns(RQLITED_COMPONENTS).items():
            per_op[c] += ns / 1e6 / ops
    print(f"  {name}: {load.rate:,.0f}/s, nodes {total:.3f} ms CPU per operation", flush=True)
    return name, load.rate, per_op, total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rqlited", required=True, help="the rqlited binary (v8)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--seconds", type=int, default=8, help="profiled seconds per load")
    p.add_argument("--groups", type=int, default=60_000, help="queued groups for claims")
    args = p.parse_args(argv)
    if args.concurrency < 1 or args.seconds < 1:
        p.error("--concurrency and --seconds must be at least 1")
    with tempfile.TemporaryDirectory(prefix="rqlited-profile-") as tmp:
        cluster = LocalCluster.start(
            nodes=3, directory=Path(tmp) / "c", engine="rqlited", rqlited=args.rqlited,
            timeout=60.0,
        )  # fmt: skip
        try:
            return _profile(args, cluster)
        finally:
            cluster.stop()


def _profile(args: argparse.Namespace, cluster: LocalCluster) -> int:
    urls = list(cluster.urls)
    leader = cluster.leader(timeout=10.0)
    http = Http(leader.url if leader else urls[0], timeout=600.0)
    subject = get_subject("rqueue")
    c, secs = args.concurrency, args.seconds
    print(f"rqlited CPU profiles, {c} clients, {secs} s per load", flush=True)
    rows = []

    create_insert_table(http)

    def inserts(meter: Profiler) -> Load:
        def open_worker(i: int) -> tuple[Callable[[], bool], Callable[[], None]]:
            own = Http(http.url)
            return insert_step(own, i), own.close

        return run_threads(open_worker, c, secs + 1, 1.0, meter)  # type: ignore[arg-type]

    rows.append(_measure("INSERT", urls, inserts))

    queue.fill(subject, urls, http, prefix="c-", groups=args.groups, messages=args.groups)
    shared = queue.open_client(subject, urls)
    try:

        def claims(meter: Profiler) -> Load:
            return run_threads(
                lambda i: queue.claim_worker(subject, urls, i, shared), c, secs + 1, 1.0, meter
            )  # type: ignore[arg-type]

        rows.append(_measure("claim", urls, claims))
        drop_queue(http)
        queue.fill(subject, urls, http, prefix="y-", groups=500, messages=30_000)

        def cycles(meter: Profiler) -> Load:
            return run_threads(
                lambda i: queue.folded_cycle_worker(subject, urls, i, shared),
                c, secs + 1, 1.0, meter,
            )  # type: ignore[arg-type]  # fmt: skip

        rows.append(_measure("ack_and_claim", urls, cycles))
    finally:
        shared.close()
    _print(rows)
    return 0


def _print(rows: list[tuple[str, float, dict[str, float], float]]) -> None:
    names = [r[0] for r in rows]
    print("\nnodes' CPU ms per operation (three nodes summed), by rqlited component:\n")
    print("| component | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(rows))
    print("| operations/s | " + " | ".join(f"{r[1]:,.0f}" for r in rows) + " |")
    for component, _ in RQLITED_COMPONENTS:
        print(f"| {component} | " + " | ".join(f"{r[2][component]:.3f}" for r in rows) + " |")
    print("| **all of rqlited** | " + " | ".join(f"**{r[3]:.3f}**" for r in rows) + " |")


if __name__ == "__main__":
    sys.exit(main())
