"""Every fault kind the simulation models acts on the simulated cluster through the
harness's own kind, and the cluster recovers once it is undone."""

from __future__ import annotations

import random

import pytest

from harness.faults.base import Stage
from harness.faults.registry import KINDS
from harness.history import HistoryRecorder
from harness.scenario import WorkloadSpec
from harness.sim.cluster import CAPABILITIES
from harness.sim.nemesis import SimNemesis
from harness.sim.run import UNSUPPORTED
from harness.sim.world import World, virtual_time
from harness.subjects import get_subject
from harness.workload import Workload

MODELLED = sorted(k for k in KINDS if k not in UNSUPPORTED)


def test_the_unsupported_kinds_need_what_the_simulation_lacks_or_membership() -> None:
    for name in UNSUPPORTED:
        assert name in KINDS
    for name in MODELLED:
        assert KINDS[name].needs <= CAPABILITIES, name


@pytest.mark.parametrize("name", MODELLED)
def test_a_kind_acts_and_the_cluster_recovers(tmp_path, name: str) -> None:
    world = World(seed=11, nodes=5 if name == "partition-bridge" else 3)
    world.cluster.wait_for_leader(10.0)
    recorder = HistoryRecorder(tmp_path / "h.jsonl", clock=world.loop.clock)
    workload = Workload(WorkloadSpec(), get_subject("rqueue"), world.urls, recorder)
    workload.reply_proxies = world.proxies
    nemesis = SimNemesis(world.cluster, recorder, workload, (), 10.0, seed=11)
    nemesis.loop = world.loop
    kind = KINDS[name]
    params = kind.draw(random.Random(3), 6.0)
    with virtual_time(world.loop):
        action = kind.begin(Stage(world.cluster, workload, random.Random(4)), params)
        nemesis._record(action.f, action.value, action.act)
        world.loop.run(world.loop.now + 3.0)
        nemesis._record(action.f_end, action.value, action.undo)
    world.loop.run(world.loop.now + 10.0, stop=world.settled)
    assert world.cluster.leader_now() is not None
    assert world.settled()
    recorder.close()
