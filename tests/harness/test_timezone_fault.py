"""The ``timezone`` fault on a real local cluster: every node restarts in a zone whose
daylight-saving change falls a few seconds into the fault, rewrites 'now' in it before
and after the change, and runs in UTC again once the fault ends.

Each node's offset is measured as the tests of ``LocalCluster.set_time_zone`` measure it:
a write through that node of its rewritten ``julianday('now')`` minus SQLite's own UTC.
"""

from __future__ import annotations

import time

import pytest

from harness.history import HistoryRecorder, fault_intervals, read_history
from harness.nemesis import Nemesis
from harness.scenario import Fault
from tests.cluster.helpers import execute, local_minus_utc, near, wait_until

#: seconds into the fault at which the zone springs forward: after the three restarts
TRANSITION = 10.0


@pytest.mark.slow
def test_the_timezone_fault_moves_every_node_inside_its_window_then_back(
    make_cluster, tmp_path
) -> None:
    c = make_cluster(3)
    execute(c.urls[0], ["CREATE TABLE tz (node TEXT, d REAL)"])
    recorder = HistoryRecorder(tmp_path / "history.jsonl")
    fault = Fault("timezone", 0.0, 40.0, target="all", offset=0.0, transition=TRANSITION)
    nemesis = Nemesis(c, recorder, None, [fault], 60.0, seed=1)
    before = time.time()
    nemesis._begin((0, 0), fault)  # returns once every node answers in its new zone
    value = next(e for e in read_history(recorder.path) if e["type"] == "info")["value"]
    at = before + value["transition"]  # the change, on this machine's clock
    ids = [n.id for n in c.nodes()]
    assert value["nodes"] == ids and value["jump"] == 3600
    assert time.time() < at - 1.0, "the restarts took longer than the transition allows"
    for n in c.nodes():  # still standard time (UTC+00:00) in the new zone
        assert near(local_minus_utc(n.url, n.id), 0.0), n.id
    for n in c.nodes():  # then, without a restart, an hour ahead
        wait_until(
            lambda n=n: near(local_minus_utc(n.url, n.id), 3600.0),
            TRANSITION + 15.0,
            f"{n.id} to rewrite 'now' an hour ahead after the transition",
        )
    assert time.time() >= at
    nemesis.heal_all()  # every node restarted in UTC
    c.wait_for_leader(30)
    for n in c.nodes():
        assert near(local_minus_utc(n.url, n.id), 0.0), n.id
    recorder.close()
    (interval,) = fault_intervals(read_history(recorder.path))
    assert interval.kind == "timezone" and interval.end is not None
    assert interval.transition is not None and interval.start < interval.transition < interval.end
    assert "UTC+00:00, UTC+01:00" in interval.label
