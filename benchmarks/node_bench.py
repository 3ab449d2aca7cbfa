"""INSERT throughput and latency over HTTP on a 3-node cluster (a script, not a test).

    python benchmarks/node_bench.py                       # fresh embedded 3-node cluster
    python benchmarks/node_bench.py --rqlited PATH        # the same on real rqlite
    python benchmarks/node_bench.py --urls http://a:4001,http://b:4011   # existing cluster

Prints, for 1 and 8 concurrent clients (each with its own keep-alive connection to the
leader), single-statement parameterised INSERTs per second and p50/p99 latency.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.cluster.base import Cluster


class Client:
    """One keep-alive HTTP connection to a node."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        parts = urlsplit(url)
        self._conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)

    def post(self, path: str, body: object) -> dict:
        data = json.dumps(body).encode()
        self._conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        resp = self._conn.getresponse()
        payload = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path} answered HTTP {resp.status}: {payload[:200]!r}")
        out = json.loads(payload)
        errors = [r["error"] for r in out.get("results", []) if "error" in r]
        if out.get("error") or errors:
            raise RuntimeError(f"{path} failed: {out.get('error') or errors}")
        return out

    def close(self) -> None:
        self._conn.close()


def run_clients(url: str, table: str, clients: int, seconds: float) -> tuple[int, list[float]]:
    """INSERT from ``clients`` threads for ``seconds``; return (count, latencies in s)."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []
    start = threading.Barrier(clients + 1)
    deadline = [0.0]

    def worker(i: int) -> None:
        c = Client(url)
        try:
            start.wait()
            n = 0
            while time.perf_counter() < deadline[0]:
                t0 = time.perf_counter()
                c.post("/db/execute", [[f"INSERT INTO {table}(k, v) VALUES(?, ?)", i, f"v{n}"]])
                latencies[i].append(time.perf_counter() - t0)
                n += 1
        except BaseException as exc:  # report after the run
            errors.append(exc)
        finally:
            c.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    deadline[0] = time.perf_counter() + seconds
    start.wait()
    for t in threads:
        t.join(seconds + 60)
    if errors:
        raise RuntimeError(f"{len(errors)} client(s) failed, first: {errors[0]}")
    flat = [x for per in latencies for x in per]
    return len(flat), flat


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=1000, method="inclusive")[int(q * 10) - 1]


def bench(cluster: Cluster, seconds: float, concurrency: list[int]) -> list[dict]:
    leader = cluster.wait_for_leader(30.0)
    table = f"bench_{uuid.uuid4().hex[:8]}"
    setup = Client(leader.url)
    setup.post("/db/execute", [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, k INT, v TEXT)"])
    setup.close()
    rows = []
    for n in concurrency:
        run_clients(leader.url, table, n, min(1.0, seconds))  # warm-up
        count, lat = run_clients(leader.url, table, n, seconds)
        rows.append(
            {
                "clients": n,
                "inserts": count,
                "per_second": count / seconds,
                "p50_ms": percentile(lat, 50) * 1000,
                "p99_ms": percentile(lat, 99) * 1000,
            }
        )
    return rows


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
            from harness.cluster.external import ExternalCluster

            cluster: Cluster = ExternalCluster([u.strip() for u in a.urls.split(",")])
            engine = "external"
        else:
            from harness.cluster.local import LocalCluster

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
            f"{r['clients']:>8} {r['per_second']:>10.0f} {r['p50_ms']:>8.2f}"
            f" {r['p99_ms']:>8.2f} {r['inserts']:>7}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
