"""``stats()`` and ``python -m rqueue stats`` on a queue of a million messages.

    python benchmarks/stats_bench.py [--messages 1000000] [--groups 1000] [--samples 50]
                                     [--engine embedded|rqlited] [--rqlited PATH]

Starts a local 3-node cluster, queues ``--messages`` messages over ``--groups`` groups
(each group's first message through ``publish_many``, the rest by bulk INSERT, all
counted by rqueue's triggers), leases 50 and parks 10 of them, dead-letters 5, then
prints: each stats statement's query plan (EXPLAIN QUERY PLAN on the leader), the
latency of ``stats()`` on a connected transport (p50/p99/max over ``--samples``), the
wall time of ``python -m rqueue stats`` as a whole process (interpreter start, imports,
connect, one stats request) and, for contrast, of ``SELECT count(*) FROM messages`` and
of counting by priority without the counters.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.bench.queue import fill  # noqa: E402
from harness.bench.store import Http  # noqa: E402
from harness.cluster.local.cluster import LocalCluster  # noqa: E402
from harness.subjects import get_subject  # noqa: E402
from rqueue import RqliteTransport, _cli, _stats  # noqa: E402


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def _timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return sorted(out)


def _summary(xs: list[float]) -> str:
    p99 = xs[min(len(xs) - 1, int(0.99 * len(xs)))]
    return f"p50 {_ms(statistics.median(xs))}, p99 {_ms(p99)}, max {_ms(xs[-1])} (n={len(xs)})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--groups", type=int, default=1000)
    p.add_argument("--samples", type=int, default=50)
    p.add_argument("--cli-runs", type=int, default=5)
    p.add_argument("--engine", default="embedded", choices=("embedded", "rqlited"))
    p.add_argument("--rqlited", help="the rqlited binary (with --engine rqlited)")
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="stats-bench-") as tmp:
        cluster = LocalCluster.start(
            nodes=3, directory=Path(tmp) / "c", engine=args.engine, rqlited=args.rqlited,
            timeout=60.0,
        )  # fmt: skip
        try:
            return _bench(args, cluster)
        finally:
            cluster.stop()


def _bench(args: argparse.Namespace, cluster: LocalCluster) -> int:
    urls = list(cluster.urls)
    leader = cluster.leader(timeout=10.0)
    http = Http(leader.url if leader else urls[0], timeout=600.0)
    q = RqliteTransport.from_url(urls, max_deliveries=1)
    print(f"cluster: 3 nodes ({args.engine}), server {q.server.version}")
    q.claim("bench", 1.0)  # an empty claim stamps the time new messages are enqueued at
    t0 = time.perf_counter()
    fill(
        get_subject("rqueue"), urls, http, prefix="g", groups=args.groups,
        messages=args.messages, bulk_batch=20_000,
    )  # fmt: skip
    print(f"queued {args.messages:,} messages over {args.groups:,} groups in "
          f"{time.perf_counter() - t0:.1f} s")  # fmt: skip
    leases = [q.claim("bench", 600.0) for _ in range(55)]
    for lease in leases[:5]:
        q.nack(lease, 0, error="bench: poison")  # max_deliveries=1: moved by the next claim
    for lease in leases[5:15]:
        q.nack(lease, 600.0)  # parked
    q.claim("bench", 600.0)
    s = q.stats()
    print(f"stats(): {s}")
    exact = http.query("SELECT count(*) FROM messages")[0][0]
    if s.queued != exact:
        print(f"MISMATCH: stats says {s.queued} queued, count(*) says {exact}")
        return 1

    print("\nquery plans (EXPLAIN QUERY PLAN on the leader; the last one walks the primary")
    print("key from the oldest message and stops at the first not in flight: LIMIT 1):")
    for stmt in _stats.STATEMENTS:
        plan = http.post(
            "/db/query?level=none", [["EXPLAIN QUERY PLAN " + stmt.sql, *stmt.params]]
        )[0].get("values", [])
        print(f"  {stmt.sql[:90]}...")
        for row in plan:
            print(f"      {row[-1]}")

    print("\nlatency:")
    print(f"  stats() on a connected transport: {_summary(_timed(q.stats, args.samples))}")
    count = _timed(lambda: http.query("SELECT count(*) FROM messages"), 5)
    print(f"  for contrast, SELECT count(*) FROM messages: {_summary(count)}")
    by_priority = (
        "SELECT g.priority, count(*) FROM messages m JOIN groups g "
        "ON g.group_id = m.group_id GROUP BY g.priority"
    )
    # level=none: on the leader's own copy, so a long read does not hold up its Raft log
    scan = _timed(lambda: http.post("/db/query?level=none", [by_priority]), 5)
    print(f"  and counting by priority without the counters (a join over the queue, "
          f"level=none): {_summary(scan)}")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RQUEUE_URL": ",".join(urls)}
    cmd = [sys.executable, "-m", "rqueue", "stats", "--json"]
    walls = []
    for _ in range(args.cli_runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        walls.append(time.perf_counter() - t0)
    print(f"  `python -m rqueue stats --json`, whole process: {_summary(sorted(walls))}")
    for what, code in (
        ("interpreter start and the CLI's imports", "import rqueue._cli, rqueue._cli_http"),
        ("interpreter start alone (python -c pass)", "pass"),
    ):
        startup = []
        for _ in range(args.cli_runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            startup.append(time.perf_counter() - t0)
        print(f"    of which {what}: {_summary(sorted(startup))}")
    os.environ["RQUEUE_URL"] = ",".join(urls)
    in_process = _timed(lambda: _cli.run(["stats", "--json"], out=io.StringIO()), args.samples)
    print(f"  the CLI's own work (connect to a node, one stats request, print): "
          f"{_summary(in_process)}")  # fmt: skip
    q.close()
    http.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
