"""Opt-in (``pytest -m chaos``): many random faults in a row, the manager must keep up."""

from __future__ import annotations

import os
import random

import pytest

from tests.cluster.helpers import execute, rows, wait_until

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.root,
    pytest.mark.timeout(900),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]


def test_random_faults_on_five_nodes_always_heal(make_cluster) -> None:
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "1")))
    c = make_cluster(5, netns=True)
    lead = c.wait_for_leader(30)
    execute(lead.url, [["CREATE TABLE t (i INTEGER PRIMARY KEY)"]])
    written = 0
    for _ in range(30):
        ids = [n.id for n in c.nodes()]
        kind = rng.choice(["kill", "pause", "isolate", "split", "bridge"])
        lead = c.wait_for_leader(30)
        if kind == "kill":
            victims = rng.sample(ids, 2)
            for v in victims:
                c.kill(v)
        elif kind == "pause":
            victims = [lead.id]
            c.pause(lead.id)
        else:
            rng.shuffle(ids)
            comps = {
                "isolate": [[lead.id], [i for i in ids if i != lead.id]],
                "split": [ids[:2], ids[2:]],
                "bridge": [ids[:3], ids[2:]],
            }[kind]
            c.partition(comps)
        # a write commits through whoever leads (retried: a stale leader times out)
        wait_until(
            lambda i=written: execute(
                c.wait_for_leader(30, all_ready=False).url,
                [["INSERT OR IGNORE INTO t VALUES (?)", i]],
            ),
            60,
            f"a write to commit during {kind}",
        )
        written += 1
        if kind == "kill":
            for v in victims:
                c.restart(v)
        elif kind == "pause":
            c.resume(lead.id)
        else:
            c.heal()
        c.wait_for_leader(60)
    lead = c.wait_for_leader(30)
    assert rows(lead.url, "SELECT COUNT(*) FROM t") == [[written]]
