"""Before and after in one run: rqueue of two checkouts on the same node, alternating.

    python benchmarks/compare_trees.py OLD_TREE NEW_TREE [--runs 2] [--clients 8]
                                       [--engine embedded|rqlited] [--rqlited PATH]

Both runs use NEW_TREE's cluster code and embedded node (so both pay the node's costs
as the new tree models them: no statement cache) and each tree's own ``rqueue``. Each
figure comes with the statements per operation the client sent and their SQLite opcodes
(``harness.bench.opcodes``, on the tree's own schema).

A figure from one day's bench run against another's compares machines as much as code
(on a shared 2-core machine the INSERT rate alone moves by half within minutes). This
script runs the same load on both trees in turn, OLD, NEW, OLD, NEW, ...: each run is a
fresh process that imports that tree's ``harness`` and ``rqueue``, starts a 3-node
cluster, queues ``--groups`` one-message groups with ``publish_many``, then measures two
pairs of windows: single-statement INSERTs on ``--clients`` keep-alive connections, then
claims by ``--clients`` threads sharing one transport; then, on a fresh schema with
30,000 messages over 500 groups, INSERTs and ``ack_and_claim`` cycles. It prints each
window's rates and their ratio to the INSERTs just before. Trees come from
``git worktree add DIR COMMIT`` or ``git archive COMMIT | tar -x -C DIR``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

#: the code each run executes in its own interpreter: the cluster (the embedded node) and
#: the opcode counter from NODE_TREE, rqueue from TREE
RUN = r"""
import http.client, json, sys, tempfile, threading, time
tree, node_tree, engine, binary, clients, groups, seconds = sys.argv[1:8]
clients, groups, seconds = int(clients), int(groups), float(seconds)
sys.path.insert(0, node_tree)
from harness.cluster.local.cluster import LocalCluster
from harness.bench.opcodes import Opcodes, rqueue_schema
from harness.bench.store import Http, drop_queue
if "rqueue" in sys.modules:
    raise SystemExit("the node tree's harness imported rqueue before the tree's could be")
sys.path[0] = tree
import rqueue
from rqueue import _schema
if not rqueue.__file__.startswith(tree):
    raise SystemExit(f"imported {rqueue.__file__}, not the tree {tree}")
opcodes = Opcodes(rqueue_schema(_schema))


class Counted:
    # counts the bodies a transport's session sends: statements and their opcodes
    def __init__(self, inner):
        self.inner, self.bodies, self.lock = inner, [], threading.Lock()

    def request(self, method, url, path, body, timeout):
        if body:
            with self.lock:
                self.bodies.append(body)
        return self.inner.request(method, url, path, body, timeout)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def rate(make_step, counted=None):
    steps = [make_step(i) for i in range(clients)]
    start = time.perf_counter() + 1.0
    end = start + seconds
    counts = [0] * clients
    dry = [0] * clients
    marks = {}

    def work(i):
        while (t := time.perf_counter()) < end:
            worked = steps[i]()
            if t >= start and time.perf_counter() <= end:
                counts[i] += bool(worked)
                dry[i] += not worked

    def mark():
        for at in (start, end):
            time.sleep(max(0.0, at - time.perf_counter()))
            marks[at] = len(counted.bodies) if counted else 0

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    threads.append(threading.Thread(target=mark))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if sum(dry):
        raise SystemExit(f"the queue ran dry ({sum(dry)} empty claims): raise --groups")
    ops = sum(counts)
    if counted is None:
        return ops / seconds, None, None
    sent = counted.bodies[marks[start]:marks[end]]
    stmts = sum(len(json.loads(b)) for b in sent)
    codes = sum(opcodes.of_body(b) or 0 for b in sent)
    return ops / seconds, stmts / ops, codes / ops


def post(conn, body):
    conn.request("POST", "/db/execute", body=json.dumps(body),
                 headers={"Content-Type": "application/json"})
    reply = conn.getresponse()
    reply.read()
    if reply.status != 200:
        raise SystemExit(f"HTTP {reply.status} from the leader")
    return True


def shown(what, r, inserts):
    per, stmts, codes = r
    print(f"  {what:<14} {per:8,.0f}/s  ratio {per / inserts:.2f}  "
          f"statements/op {stmts:.2f}  opcodes/op {codes:,.0f}", flush=True)


with tempfile.TemporaryDirectory(prefix="compare-trees-") as tmp:
    cluster = LocalCluster.start(3, directory=tmp + "/c", engine=engine,
                                 rqlited=binary or None, timeout=60.0)
    try:
        url = cluster.leader(timeout=10.0).url
        host, port = url[len("http://"):].split(":")
        post(http.client.HTTPConnection(host, int(port), timeout=60),
             ["CREATE TABLE bench_ins (id INTEGER PRIMARY KEY, k INTEGER, v TEXT)"])
        event = json.dumps({"kind": "bench", "pad": "x" * 32})

        def insert(i):
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            body = [["INSERT INTO bench_ins (k, v) VALUES (?, ?)", i, "x" * 32]]
            return lambda: post(conn, body)

        def transport():
            q = rqueue.RqliteTransport.from_url(",".join(cluster.urls))
            q._session = Counted(q._session)
            return q

        q = transport()
        for k in range(0, groups, 100):
            q.publish_many([(f"c-{g}", event) for g in range(k, min(k + 100, groups))])

        def claim(i):
            return lambda: q.claim(f"bench-claimer-{i}", 600.0) is not None

        for _ in range(2):
            inserts = rate(insert)[0]
            print(f"  INSERT         {inserts:8,.0f}/s", flush=True)
            shown("claims", rate(claim, q._session), inserts)
        q.close()
        drop_queue(Http(url))
        q = transport()
        per_group = max(1, 30_000 // 500)
        for k in range(per_group):
            for j in range(0, 500, 100):
                q.publish_many([(f"y-{g}", event) for g in range(j, j + 100)])

        def cycle(i):
            held = [None]

            def step():
                held[0] = (q.ack_and_claim(held[0], f"bench-cycler-{i}", 600.0)
                           if held[0] is not None else q.claim(f"bench-cycler-{i}", 600.0))
                return held[0] is not None

            return step

        inserts = rate(insert)[0]
        print(f"  INSERT         {inserts:8,.0f}/s", flush=True)
        shown("ack_and_claim", rate(cycle, q._session), inserts)
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
                str(tree.resolve()), str(args.new.resolve()), args.engine, args.rqlited,
                str(args.clients), str(args.groups), str(args.seconds),
            ]  # fmt: skip
            done = subprocess.run([sys.executable, "-c", RUN, *argv_run], check=False)
            if done.returncode != 0:
                print(f"the run on {tree} failed (exit {done.returncode})", file=sys.stderr)
                return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
