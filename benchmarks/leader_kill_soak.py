"""Kill the leader over and over; print how long each re-election took (a script, not a test).

    python benchmarks/leader_kill_soak.py                      # 50 kills, embedded, 3 nodes
    python benchmarks/leader_kill_soak.py --kills 300
    python benchmarks/leader_kill_soak.py --engine rqlited \\
        --rqlited /opt/rqlite/rqlited --kills 50

Each round: wait (bounded) until the cluster has an agreed leader and every node is
ready; let INSERTs flow for ``--settle`` seconds (3.8 by default, so the followers' link
has been idle past PySyncObj's 3.5 s receive timeout); SIGKILL the leader; restart it
after ``--restart-delay`` seconds (0: at once, so the restarted node takes part in the
election; issue 12's incident restarted it 5 s later); poll every node's ``/status``
until a majority agrees on a leader (bounded by ``--bound``). The recovery is the time
from the SIGKILL to that agreement. A writer thread keeps INSERTs flowing to whichever
node leads (``--no-writes`` turns it off), so the survivors' logs
differ in length when the leader dies, as they do under a workload.

Prints one line per slow round (over ``--slow`` seconds: what every node said while it
waited), then the distribution: p50, p90, p99, max, and how many rounds took over
``--slow`` seconds or found no leader within ``--bound``. Exit status 1 if any round
found no leader within the bound.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.cluster.base import ClusterError, agreed_leader, probe_nodes
from harness.cluster.local.cluster import LocalCluster

POLL = 0.02  # seconds between two probes of every node while waiting for a leader
PROBE_TIMEOUT = 0.5


@dataclass
class Round:
    """One kill: who died, how long until a new agreed leader (None: not within the bound)."""

    killed: str
    recovery: float | None
    leader: str | None = None
    seen: list[str] = field(default_factory=list)  # node states while waiting, when slow


def raft_sockets(cluster: LocalCluster) -> list[str]:
    """``ss`` lines of the TCP sockets on the nodes' Raft ports (what is connected to what)."""
    ports = {f":{cluster._spec(n.id).raft_port}": n.id for n in cluster.nodes()}
    try:
        out = subprocess.run(["ss", "-tanH"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"ss failed: {exc}"]
    lines = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        local, peer = fields[3], fields[4]
        names = [ports.get(local[local.rfind(":") :]), ports.get(peer[peer.rfind(":") :])]
        if any(names):
            lines.append(f"{fields[0]:<10} {local:>22} -> {peer:<22} {names}")
    return sorted(lines)


def wait_new_leader(
    cluster: LocalCluster, bound: float, keep_after: float, sockets: bool = False
) -> Round:
    """Poll ``/status`` of the running nodes until a majority agrees on a leader."""
    start = time.monotonic()
    seen: list[str] = []
    last_summary = ""
    dumped = not sockets
    while True:
        now = time.monotonic()
        running = [n for n in cluster.nodes() if n.pid is not None]
        statuses = probe_nodes([n.url for n in running], PROBE_TIMEOUT)
        lead = agreed_leader(statuses, len(cluster.nodes()))
        elapsed = time.monotonic() - start
        if lead is not None:
            return Round("", now - start if now > start else 0.0, lead.node_id, seen)
        summary = "; ".join(s.summary() for s in statuses)
        if elapsed > keep_after and summary != last_summary:
            seen.append(f"+{elapsed:.2f}s {summary}")
            last_summary = summary
        if elapsed > keep_after and not dumped:
            seen += [f"+{elapsed:.2f}s socket {line}" for line in raft_sockets(cluster)]
            dumped = True
        if elapsed >= bound:
            return Round("", None, None, seen)
        time.sleep(POLL)


class Writer(threading.Thread):
    """INSERTs, one at a time, to the node that last answered as leader (errors ignored)."""

    def __init__(self, cluster: LocalCluster) -> None:
        super().__init__(daemon=True, name="soak-writer")
        self.cluster = cluster
        self.stop = threading.Event()
        self.ok = 0
        self.url: str | None = None

    def run(self) -> None:
        body = json.dumps([["INSERT INTO soak(v) VALUES(?)", "x" * 64]]).encode()
        while not self.stop.is_set():
            url = self.url
            if url is None:
                self.stop.wait(0.05)
                continue
            req = urllib.request.Request(
                f"{url}/db/execute?timeout=2s",
                data=body,
                headers={"Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(req, timeout=3) as resp:
                    if b'"error"' not in resp.read():
                        self.ok += 1
            except OSError:
                self.stop.wait(0.05)


def soak(cluster: LocalCluster, a: argparse.Namespace) -> list[Round]:
    rounds: list[Round] = []
    writer = None
    if a.writes:
        lead = cluster.wait_for_leader(a.bound)
        req = urllib.request.Request(
            f"{lead.url}/db/execute",
            data=json.dumps(["CREATE TABLE soak(id INTEGER PRIMARY KEY, v TEXT)"]).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()
        writer = Writer(cluster)
        writer.start()
    try:
        for i in range(1, a.kills + 1):
            lead = cluster.wait_for_leader(a.bound + 30.0)  # every node back and ready
            if writer is not None:
                writer.url = lead.url
                time.sleep(a.settle)  # let the writer put entries in flight
            cluster.kill(lead.id)
            if a.restart_delay == 0:
                cluster.restart(lead.id)
                r = wait_new_leader(cluster, a.bound, a.slow, a.sockets)
            else:
                r = wait_new_leader(cluster, a.bound, a.slow, a.sockets)
                remaining = a.restart_delay - (r.recovery or a.bound)
                if remaining > 0:
                    time.sleep(remaining)
                cluster.restart(lead.id)
            r.killed = lead.id
            rounds.append(r)
            if writer is not None and r.leader:
                writer.url = cluster.node(r.leader).url
            rec = "none" if r.recovery is None else f"{r.recovery:.2f}s"
            if r.recovery is None or r.recovery > a.slow:
                print(f"round {i}: killed {r.killed}, new leader {r.leader} after {rec}")
                for line in r.seen:
                    print(f"    {line}")
            elif a.verbose:
                print(f"round {i}: killed {r.killed}, new leader {r.leader} after {rec}")
            sys.stdout.flush()
    finally:
        if writer is not None:
            writer.stop.set()
            writer.join(5)
            print(f"writer: {writer.ok} INSERTs acknowledged")
    return rounds


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


def report(rounds: list[Round], a: argparse.Namespace, engine: str) -> int:
    got = [r.recovery for r in rounds if r.recovery is not None]
    lost = len(rounds) - len(got)
    slow = sum(1 for r in rounds if r.recovery is None or r.recovery > a.slow)
    print(
        f"{engine}: {len(rounds)} leader kills, restart delay {a.restart_delay:g} s, "
        f"writes {'on' if a.writes else 'off'}"
    )
    if got:
        print(
            f"  recovery: p50 {percentile(got, 50):.2f} s  p90 {percentile(got, 90):.2f} s  "
            f"p99 {percentile(got, 99):.2f} s  max {max(got):.2f} s  "
            f"mean {statistics.fmean(got):.2f} s  min {min(got):.2f} s"
        )
    print(f"  over {a.slow:g} s: {slow}   no leader within {a.bound:g} s: {lost}")
    return 1 if lost else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine", choices=("embedded", "rqlited"), default="embedded")
    p.add_argument("--rqlited", help="the rqlited binary (with --engine rqlited)")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--kills", type=int, default=50, help="leader kills in a row (default 50)")
    p.add_argument("--bound", type=float, default=60.0, help="give up a round after S seconds")
    p.add_argument("--slow", type=float, default=5.0, help="report rounds slower than S seconds")
    p.add_argument(
        "--restart-delay",
        type=float,
        default=0.0,
        help="restart the killed node S seconds after the kill (0: at once)",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=3.8,
        help="seconds of writes before each kill (default 3.8: past the 3.5 s link timeout)",
    )
    p.add_argument("--no-writes", dest="writes", action="store_false")
    p.add_argument(
        "--sockets", action="store_true", help="slow rounds: list the Raft ports' TCP sockets"
    )
    p.add_argument("--dir", type=Path, help="cluster directory (default: a temporary one)")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per round")
    a = p.parse_args(argv)
    if a.kills < 1:
        p.error(f"--kills must be at least 1, got {a.kills}")
    if a.engine == "rqlited" and not a.rqlited:
        p.error("--engine rqlited needs --rqlited PATH")
    with tempfile.TemporaryDirectory(prefix="leader-kill-soak-") as tmp:
        directory = a.dir or Path(tmp) / "cluster"
        try:
            cluster = LocalCluster.start(
                nodes=a.nodes, directory=directory, engine=a.engine, rqlited=a.rqlited
            )
        except ClusterError as exc:
            print(f"cannot start the cluster: {exc}", file=sys.stderr)
            return 2
        with cluster:
            rounds = soak(cluster, a)
        return report(rounds, a, a.engine)


if __name__ == "__main__":
    raise SystemExit(main())
