"""The simulated cluster's Raft at its contract: one leader per term, commit on a
majority, a new leader after a crash or a partition, a deposed leader's writes failing."""

from __future__ import annotations

from harness.sim.raft import DISK_FULL, EXECUTE, LEADERSHIP_LOST
from harness.sim.world import World


def _leader(world: World) -> str:
    return world.cluster.wait_for_leader(10.0).id


def test_a_leader_is_elected_and_agreed() -> None:
    world = World(seed=7, nodes=3)
    lead = _leader(world)
    world.loop.run(world.loop.now + 0.5)  # a heartbeat reaches every follower
    assert [n.id for n in world.nodes.values() if n.is_leader()] == [lead]
    assert all(n.known_leader() == lead for n in world.nodes.values())


def test_a_write_commits_on_a_majority_and_every_node_applies_it() -> None:
    world = World(seed=7, nodes=3)
    lead = world.nodes[_leader(world)]
    got: list = []
    wire = (_stmt("CREATE TABLE t (x)"),)
    lead.submit(EXECUTE, wire, True, lambda results, error: got.append((results, error)))
    world.loop.run(world.loop.now + 1.0, stop=world.settled)
    assert got and got[0][1] is None
    assert world.settled()
    for n in world.nodes.values():
        n.catch_up()
        assert n.db.query([_stmt("SELECT name FROM sqlite_master")], False)[0]["values"] == [["t"]]


def test_a_minority_leader_cannot_commit_and_steps_down() -> None:
    world = World(seed=3, nodes=3)
    old = _leader(world)
    others = [n for n in world.nodes if n != old]
    world.cluster.partition([[old], others])
    got: list = []
    wire = (_stmt("CREATE TABLE t (x)"),)
    world.nodes[old].submit(EXECUTE, wire, True, lambda r, e: got.append(e))
    new = world.cluster.wait_for_leader(10.0, exclude=[old]).id
    assert new in others
    world.loop.run(world.loop.now + 2.0)
    assert got == [LEADERSHIP_LOST]  # the deposed leader's write: outcome unknown
    assert not world.nodes[old].is_leader()
    world.cluster.heal()
    world.loop.run(world.loop.now + 3.0, stop=world.settled)
    assert world.settled()  # the old leader's uncommitted entry was replaced


def test_a_killed_leader_is_replaced_and_rejoins_with_its_log() -> None:
    world = World(seed=5, nodes=3)
    old = _leader(world)
    world.cluster.kill(old)
    new = world.cluster.wait_for_leader(10.0, exclude=[old]).id
    assert new != old
    world.cluster.restart(old)
    world.loop.run(world.loop.now + 3.0, stop=world.settled)
    assert world.settled()
    assert world.nodes[old].known_leader() == new


def _stmt(sql: str):
    from harness.node.statements import Statement

    return Statement(sql)


def test_a_full_leader_refuses_the_write_and_steps_down() -> None:
    world = World(seed=5, nodes=3)
    old = _leader(world)
    world.cluster.fill_disk(old)
    got: list = []
    world.nodes[old].submit(
        EXECUTE, (_stmt("CREATE TABLE t (x)"),), True, lambda r, e: got.append(e)
    )
    assert got == [DISK_FULL]  # certain: nothing was stored or replicated
    new = world.cluster.wait_for_leader(10.0, exclude=[old]).id
    assert new != old


def test_the_majority_commits_without_a_full_follower_which_catches_up_once_freed() -> None:
    world = World(seed=5, nodes=3)
    lead = world.nodes[_leader(world)]
    full = next(n for n in world.nodes if n != lead.id)
    world.cluster.fill_disk(full)
    got: list = []
    lead.submit(EXECUTE, (_stmt("CREATE TABLE t (x)"),), True, lambda r, e: got.append(e))
    world.loop.run(world.loop.now + 1.0)
    assert got == [None]
    assert len(world.nodes[full].log) < len(lead.log)
    world.cluster.free_disk(full)
    world.loop.run(world.loop.now + 2.0, stop=world.settled)
    assert world.settled()
