"""INSERT throughput and latency over HTTP on a 3-node cluster (a script, not a test).

    python benchmarks/node_bench.py                       # fresh embedded 3-node cluster
    python benchmarks/node_bench.py --rqlited PATH        # the same on real rqlite
    python benchmarks/node_bench.py --urls http://a:4001,http://b:4011   # existing cluster

Prints, for 1 and 8 concurrent clients (each with its own keep-alive connection to the
leader), single-statement parameterised INSERTs per second and p50/p99 latency.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.bench.load import Load, run_threads
from harness.bench.store import Http, create_insert_table, insert_step
from harness.cluster.base import Cluster


def bench(cluster: Cluster, seconds: float, concurrency: list[int]) -> list[Load]:
    """INSERT load on the leader at each concurrency, each client its own connection."""
    leader = cluster.wait_for_leader(30.0)
    setup = Http(leader.url)
    create_insert_table(setup)
    setup.close()

    def open_worker(i: int) -> tuple[Callable[[], bool], Callable[[], None]]:
        http = Http(leader.url)
        return insert_step(http, i), http.close

    return [run_threads(open_worker, n, seconds, warmup=min(1.0, seconds)) for n in concurrency]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rqlited", help="path to a real rqlited: bench it instead of ours")
    p.add_argument("--urls", help="comma-separated node URLs of an existing cluster")
    p.add_argument("--seconds", type=float, default=5.0, help="measured seconds per row")
    p.add_argument("--clients", default="1,8", help="comma-separated concurrency levels")
    a = p.parse_args(argv)
    concurrency = [int(x) for x in a.clients.split(",")]
    with ExitStack() as stack:
        if a.urls:
            from harness.cluster.external.cluster import ExternalCluster

            cluster: Cluster = ExternalCluster([u.strip() for u in a.urls.split(",")])
            engine = "external"
        else:
            from harness.cluster.local.cluster import LocalCluster

            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="node-bench-")))
            engine = "rqlited" if a.rqlited else "embedded"
            cluster = stack.enter_context(
                LocalCluster.start(
                    nodes=3, directory=tmp / "c", engine=engine, rqlited=a.rqlited, timeout=60.0
                )
            )
        rows = bench(cluster, a.seconds, concurrency)
    print(f"engine: {engine}, 3 nodes, single-statement INSERT over HTTP to the leader")
    print(f"{'clients':>8} {'inserts/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'n':>7}")
    for r in rows:
        print(
            f"{r.concurrency:>8} {r.rate:>10.0f} {r.percentile_ms(50):>8.2f}"
            f" {r.percentile_ms(99):>8.2f} {r.ops:>7}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
