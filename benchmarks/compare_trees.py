"""Claims against INSERTs on two checkouts of rqueue, alternating: is the new code slower?

    python benchmarks/compare_trees.py OLD_TREE NEW_TREE [--runs 2] [--clients 8]
                                       [--engine embedded|rqlited] [--rqlited PATH]

A figure from one day's bench run against another's compares machines as much as code
(on a shared 2-core machine the INSERT rate alone moves by half within minutes). This
script runs the same load on both trees in turn, OLD, NEW, OLD, NEW, ...: each run is a
fresh process that imports that tree's ``harness`` and ``rqueue``, starts a 3-node
cluster, queues ``--groups`` one-message groups with ``publish_many``, then measures two
pairs of windows: single-statement INSERTs on ``--clients`` keep-alive connections, then
claims by ``--clients`` threads sharing one transport. It prints each window's rates and
the claims/INSERTs ratio. Trees come from ``git worktree add DIR COMMIT``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

#: the code each run executes in its own interpreter, with TREE first on sys.path
RUN = r"""
import http.client, json, sys, tempfile, threading, time
tree, engine, binary, clients, groups, seconds = sys.argv[1:7]
clients, groups, seconds = int(clients), int(groups), float(seconds)
sys.path.insert(0, tree)
from harness.cluster.local import LocalCluster
import rqueue
if not rqueue.__file__.startswith(tree):
    raise SystemExit(f"imported {rqueue.__file__}, not the tree {tree}")


def rate(make_step):
    steps = [make_step(i) for i in range(clients)]
    start = time.perf_counter() + 1.0
    end = start + seconds
    counts = [0] * clients
    dry = [0] * clients

    def work(i):
        while (t := time.perf_counter()) < end:
            worked = steps[i]()
            if t >= start and time.perf_counter() <= end:
                counts[i] += bool(worked)
                dry[i] += not worked

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if sum(dry):
        raise SystemExit(f"the queue ran dry ({sum(dry)} empty claims): raise --groups")
    return sum(counts) / seconds


def post(conn, body):
    conn.request("POST", "/db/execute", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    reply = conn.getresponse()
    reply.read()
    if reply.status != 200:
        raise SystemExit(f"HTTP {reply.status} from the leader")
    return True


with tempfile.TemporaryDirectory(prefix="compare-trees-") as tmp:
    cluster = LocalCluster.start(3, directory=tmp + "/c", engine=engine,
                                 rqlited=binary or None, timeout=60.0)
    try:
        host, port = cluster.leader(timeout=10.0).url[len("http://"):].split(":")
        post(http.client.HTTPConnection(host, int(port), timeout=60),
             ["CREATE TABLE bench_ins (id INTEGER PRIMARY KEY, k INTEGER, v TEXT)"])
        q = rqueue.RqliteTransport.from_url(",".join(cluster.urls))
        event = json.dumps({"kind": "bench", "pad": "x" * 32})
        for k in range(0, groups, 100):
            q.publish_many([(f"c-{g}", event) for g in range(k, min(k + 100, groups))])

        def insert(i):
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            body = [["INSERT INTO bench_ins (k, v) VALUES (?, ?)", i, "x" * 32]]
            return lambda: post(conn, body)

        def claim(i):
            return lambda: q.claim(f"bench-claimer-{i}", 600.0) is not None

        for _ in range(2):
            inserts, claims = rate(insert), rate(claim)
            print(f"INSERT {inserts:,.0f}/s  claims {claims:,.0f}/s  "
                  f"ratio {claims / inserts:.2f}", flush=True)
        q.close()
    finally:
        cluster.stop()
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old", type=Path, help="the old checkout (a directory with rqueue/)")
    p.add_argument("new", type=Path, help="the new checkout")
    p.add_argument("--runs", type=int, default=2, help="runs per tree, alternating (2)")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--groups", type=int, default=40_000, help="queued one-message groups")
    p.add_argument("--seconds", type=float, default=5.0, help="seconds per window (5)")
    p.add_argument("--engine", default="embedded", choices=("embedded", "rqlited"))
    p.add_argument("--rqlited", default="", help="the rqlited binary (with --engine rqlited)")
    args = p.parse_args(argv)
    for tree in (args.old, args.new):
        if not (tree / "rqueue" / "__init__.py").is_file():
            p.error(f"{tree}: no rqueue/ package there (make one: git worktree add DIR COMMIT)")
    if args.runs < 1 or args.clients < 1 or args.groups < args.clients * 40:
        p.error("--runs and --clients must be at least 1, --groups at least 40 per client")
    for _ in range(args.runs):
        for label, tree in (("old", args.old), ("new", args.new)):
            print(f"{label} ({tree}):", flush=True)
            argv_run = [
                str(tree.resolve()), args.engine, args.rqlited,
                str(args.clients), str(args.groups), str(args.seconds),
            ]  # fmt: skip
            done = subprocess.run([sys.executable, "-c", RUN, *argv_run], check=False)
            if done.returncode != 0:
                print(f"the run on {tree} failed (exit {done.returncode})", file=sys.stderr)
                return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
