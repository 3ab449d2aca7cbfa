"""Scenario lost-replies, squeezed, on the local backend with network namespaces (root):
the clients go through the proxies, the proxies lose replies in their windows, the
followers lose forwarded replies in theirs, rqueue stays valid, and nothing is left."""

from __future__ import annotations

import json
import os

import pytest

from harness.history import read_history

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.timeout(300),
    pytest.mark.skipif(os.geteuid() != 0, reason="forward-reply-loss needs network namespaces"),
]


def test_lost_replies_runs_both_paths_and_rqueue_stays_valid(run_scenario) -> None:
    result = run_scenario("lost-replies", time=30.0, seed=1, plots=False)
    assert result.exit_code == 0, (result.reason, result.summary)
    info = json.loads((result.run_dir / "run.json").read_text())
    lost = info["reply_loss"]
    assert lost["relayed"] > 0 and lost["close"] + lost["reset"] + lost["hold"] > 0, lost
    proxies = info["reply_proxies"]
    assert sorted(proxies) == ["n1", "n2", "n3"] and set(proxies.values()).isdisjoint(info["urls"])
    ends = [
        e
        for e in read_history(result.run_dir / "history.jsonl")
        if e["process"] == "nemesis" and e["type"] == "info"
    ]
    fs = [e["f"] for e in ends]
    assert {"reply-loss", "reply-restore", "forward-loss", "forward-restore"} <= set(fs), fs
    restored = [e["value"]["lost"] for e in ends if e["f"] == "reply-restore"]
    assert sum(sum(x.values()) for x in restored) > 0
    forwarded = [e["value"] for e in ends if e["f"] == "forward-loss"]
    assert all(v["leader"] not in v["nodes"] and v["nodes"] for v in forwarded)
