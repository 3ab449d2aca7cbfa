"""Replica snapshots on real clusters, and whole runs that record and compare them.

On the engine chosen by ``RQUEUE_TEST_ENGINE`` (embedded by default). The tests that need
replicas to compute values themselves (a time call rqlite leaves in a scalar subquery)
run only on real rqlite >= 8.33 (``RQUEUE_TEST_ENGINE=rqlited``); elsewhere they skip,
saying why.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
import requests

from harness import divergence
from harness.cluster.base import ClusterError
from harness.cluster.engines import resolve_rqlited, rqlited_version
from harness.cluster.local.cluster import LocalCluster
from harness.replicas import snapshot

ENGINE = os.environ.get("RQUEUE_TEST_ENGINE", "embedded")
RQLITED = os.environ.get("RQUEUE_TEST_RQLITED")

SCHEMA = [
    "CREATE TABLE rqueue_kv (k TEXT PRIMARY KEY, v REAL)",
    "CREATE TABLE plain_log (a INTEGER, b TEXT)",  # no primary key: rows are their own keys
    'CREATE TABLE "odd ""name""" (id INTEGER PRIMARY KEY AUTOINCREMENT, x)',  # sqlite_sequence
]


def execute(cluster: LocalCluster, statements: list[Any]) -> None:
    lead = cluster.wait_for_leader(30.0)
    r = requests.post(f"{lead.url}/db/execute", json=statements, timeout=10)
    r.raise_for_status()
    assert all("error" not in x for x in r.json()["results"]), r.text


def rewriting_engine() -> None:
    """Skip unless the engine rewrites time calls as rqlite >= 8.33 does (the embedded
    node decides as the rqlite version it follows, v10.2.7 by default: see
    harness.node.sql.rewrite)."""
    if ENGINE != "rqlited":
        return
    try:
        version = rqlited_version(resolve_rqlited(RQLITED))
    except ClusterError as e:
        pytest.skip(f"no rqlited binary to run: {e}")
    if version < (8, 33, 0):
        pytest.skip(
            f"rqlited {'.'.join(map(str, version))} rewrites no time call (needs >= 8.33), "
            "so a call left in a subquery is no different from the others"
        )


def test_snapshot_reads_every_node_at_one_applied_index(make_cluster) -> None:
    c = make_cluster()
    execute(c, SCHEMA)
    execute(c, [["INSERT INTO rqueue_kv VALUES (?, ?)", f"k{i}", i / 3] for i in range(20)])
    execute(c, [["INSERT INTO plain_log VALUES (?, ?)", 1, "x"]] * 2)
    # a node that missed writes while down must be read only once it has caught up
    follower = next(n.id for n in c.nodes() if n.id != c.wait_for_leader(30.0).id)
    c.kill(follower)
    execute(c, [['INSERT INTO "odd ""name""" (x) VALUES (?)', i] for i in range(30)])
    c.restart(follower)
    record = snapshot(c, timeout=60.0)
    assert record["error"] is None, record["error"]
    assert [n["id"] for n in record["nodes"]] == [n.id for n in c.nodes()]
    assert len({n["applied_index"] for n in record["nodes"]}) == 1
    for n in record["nodes"]:
        tables = n["tables"]
        assert set(tables) == {"rqueue_kv", "plain_log", 'odd "name"', "sqlite_sequence"}
        assert tables["rqueue_kv"]["key"] == ["k"] and len(tables["rqueue_kv"]["rows"]) == 20
        assert tables["plain_log"] == {"columns": ["a", "b"], "key": [], "rows": [[1, "x"]] * 2}
        assert len(tables['odd "name"']["rows"]) == 30, n["id"]
        seq = tables["sqlite_sequence"]
        assert seq == {"columns": ["name", "seq"], "key": ["name"], "rows": [['odd "name"', 30]]}
    entry, stats = divergence.compare(json.loads(json.dumps(record)))
    assert entry == {"count": 0, "examples": []} and stats["compared"] is True


def test_snapshot_gives_up_within_its_bound_saying_what_it_waited_for(make_cluster) -> None:
    c = make_cluster()
    follower = next(n.id for n in c.nodes() if n.id != c.wait_for_leader(30.0).id)
    c.pause(follower)
    try:
        record = snapshot(c, timeout=2.0, request_timeout=0.5)
    finally:
        c.resume(follower)
    assert record["nodes"] == [] and record["waited"] < 10
    assert record["error"].startswith(
        "waited 2.0s for every node to report the same applied Raft index"
    )
    assert "a node did not answer" in record["error"] and follower in record["error"]
    entry, stats = divergence.compare(record)
    assert entry["count"] == 0 and stats["compared"] is False


def test_snapshot_finds_values_each_replica_computed_itself(make_cluster) -> None:
    rewriting_engine()
    c = make_cluster()
    execute(c, ["CREATE TABLE rqueue_t (id INTEGER PRIMARY KEY, at REAL)"])
    for i in range(10):  # one request each: replicas apply them at different moments
        execute(c, [["INSERT INTO rqueue_t VALUES (?, (SELECT julianday('now')))", i]])
    entry, _ = divergence.compare(snapshot(c, timeout=60.0))
    assert entry["count"] > 0
    assert {ex["table"] for ex in entry["examples"]} == {"rqueue_t"}


@pytest.mark.slow
def test_a_run_records_the_replicas_and_rqueue_keeps_them_identical(
    run_scenario: Callable[..., Any],
) -> None:
    result = run_scenario("steady", time=4, plots=False)
    assert result.exit_code in (0, 1), (result.reason, result.summary)
    record = json.loads((result.run_dir / divergence.FILE).read_text())
    assert record["error"] is None, record["error"]
    assert len(record["nodes"]) == 3
    assert all({"messages", "groups"} <= set(n["tables"]) for n in record["nodes"])
    replicas = result.check["stats"]["replicas"]
    assert replicas["compared"] is True and replicas["nodes"] == ["n1", "n2", "n3"]
    assert "replicas" in json.loads((result.run_dir / "run.json").read_text())["phases"]
    assert result.summary["replicas"].startswith("3 nodes at applied index ")
    assert result.check["anomalies"][divergence.NAME]["count"] == 0, result.check["anomalies"]


@pytest.mark.slow
def test_mutant_subquery_now_is_caught(run_scenario: Callable[..., Any]) -> None:
    rewriting_engine()
    # 14 s keeps one leader kill and its restart (the shortest --time that does), after
    # which the replicas' own clock readings differ in every run; a steady run without
    # a kill leaves them identical after the drain in about half of the seeds
    result = run_scenario("leader-failover", time=14, subject="mutant-subquery-now")
    assert result.exit_code == 1, (result.reason, result.summary)
    assert result.check["anomalies"][divergence.NAME]["count"] > 0, result.check["anomalies"]
    report = (result.run_dir / "report.md").read_text()
    assert f"### {divergence.NAME}: " in report and "Example 1: " in report
