"""Log compaction: a node that missed compacted entries is restored from a snapshot, and a
full restart rebuilds SQLite from snapshot + journal. Embedded node only (it needs the
node's ``--compaction-entries`` flag), so the nodes are started here by hand."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster.external.cluster import URLS_ENV
from harness.cluster.local.processes import MARKER_ENV
from harness.cluster.ports import free_ports
from tests.cluster.helpers import wait_until

from ._http import call, execute, query

pytestmark = pytest.mark.skipif(
    bool(os.environ.get(URLS_ENV)), reason="starts its own embedded nodes"
)


class HandCluster:
    """Three ``python -m harness.node`` processes with a tiny compaction threshold."""

    def __init__(self, root: Path, compaction: int, compaction_mib: float = 64.0) -> None:
        ports = free_ports(6)
        self.ids = ["n1", "n2", "n3"]
        self.http = {i: f"127.0.0.1:{ports[k * 2]}" for k, i in enumerate(self.ids)}
        self.raft = {i: f"127.0.0.1:{ports[k * 2 + 1]}" for k, i in enumerate(self.ids)}
        self.root = root
        self.compaction = compaction
        self.compaction_mib = compaction_mib
        self.procs: dict[str, subprocess.Popen] = {}

    def url(self, node: str) -> str:
        return f"http://{self.http[node]}"

    def start(self, node: str) -> None:
        argv = [
            sys.executable, "-m", "harness.node", "--node-id", node,
            "--http-addr", self.http[node], "--raft-addr", self.raft[node],
            "--data-dir", str(self.root / node), "--compaction-entries", str(self.compaction),
            "--compaction-mib", str(self.compaction_mib),
        ]  # fmt: skip
        for other in self.ids:
            if other != node:
                argv += ["--peer", f"{other},{self.raft[other]},{self.http[other]}"]
        log = open(self.root / f"{node}.log", "ab")  # noqa: SIM115 - handed to the child
        # the marker lets the session's safety net reap the node if the test is cut short
        env = {**os.environ, MARKER_ENV: str(self.root)}
        self.procs[node] = subprocess.Popen(argv, stdout=log, stderr=log, env=env)
        log.close()

    def kill(self, node: str) -> None:
        proc = self.procs.pop(node)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def leader(self) -> str:
        def find() -> str | None:
            for n in self.procs:
                st = call("GET", self.url(n), "/status", timeout=2.0).json["store"]
                ready = call("GET", self.url(n), "/readyz", timeout=2.0).status == 200
                if st["raft"]["state"] == "Leader" and ready:
                    return n
            return None

        return wait_until(find, 30.0, "a leader among the hand-started nodes")

    def stop(self) -> None:
        for node in list(self.procs):
            self.kill(node)


@pytest.fixture
def hand_cluster(tmp_path: Path) -> Iterator[HandCluster]:
    hc = HandCluster(tmp_path, compaction=40)
    try:
        for n in hc.ids:
            hc.start(n)
        yield hc
    finally:
        hc.stop()


def _count(url: str, table: str, level: str) -> int:
    res = query(url, [f"SELECT COUNT(*) FROM {table}"], f"?level={level}")
    return res["results"][0]["values"][0][0]


def test_snapshot_restores_a_lagging_node_and_a_full_restart(hand_cluster: HandCluster) -> None:
    hc = hand_cluster
    table = f"t_{uuid.uuid4().hex[:8]}"
    lead = hc.leader()
    execute(hc.url(lead), [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v TEXT)"])
    lagging = next(n for n in hc.ids if n != lead)
    hc.kill(lagging)
    for i in range(150):  # several compactions while the node is away
        execute(hc.url(lead), [[f"INSERT INTO {table}(v) VALUES(?)", f"row{i}"]])
    assert (hc.root / lead / "snapshot.bin").exists(), "the leader never compacted its log"

    hc.start(lagging)
    wait_until(
        lambda: _count(hc.url(lagging), table, "none") == 150,
        30.0,
        f"{lagging} to be restored to 150 rows",
    )

    for n in list(hc.procs):
        hc.kill(n)
    for n in hc.ids:
        hc.start(n)
    lead = hc.leader()
    assert _count(hc.url(lead), table, "strong") == 150
    for n in hc.ids:
        wait_until(
            lambda n=n: _count(hc.url(n), table, "none") == 150,
            15.0,
            f"{n} to hold all 150 rows after the full restart",
        )


def test_a_journal_past_its_size_bound_is_compacted(tmp_path: Path) -> None:
    """Few but big entries (merged requests, batched publishes) trigger a snapshot by size,
    long before the entry count would."""
    hc = HandCluster(tmp_path, compaction=100_000, compaction_mib=1.0)
    try:
        for n in hc.ids:
            hc.start(n)
        lead = hc.leader()
        table = f"t_{uuid.uuid4().hex[:8]}"
        execute(hc.url(lead), [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v TEXT)"])
        pad = "x" * 1000
        for i in range(12):  # ~12 entries of ~200 kB: 2.4 MB in all
            execute(hc.url(lead), [[f"INSERT INTO {table}(v) VALUES(?)", f"{i}{pad}"]] * 200)
        for n in hc.ids:
            wait_until(
                lambda n=n: (hc.root / n / "snapshot.bin").exists(),
                15.0,
                f"{n} to compact its journal past 1 MiB",
            )
            assert (hc.root / n / "raft.journal").exists()
        assert _count(hc.url(lead), table, "strong") == 12 * 200
    finally:
        hc.stop()
