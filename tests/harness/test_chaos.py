"""Random fault schedules (harness.chaos, a scenario's ``[chaos]`` table): drawn from the
seed alone, from the kinds the cluster can run, refused in one line otherwise; the
drawn schedule is a plain scenario that shrink reduces and a file reproduces."""

from __future__ import annotations

import random
import tomllib

import pytest

from harness import chaos
from harness.cluster.base import (
    CAPABILITY_NAMES,
    CLOCK_SKEW,
    DISK,
    KILL,
    LINKS,
    PARTITIONS,
    PAUSE,
)
from harness.faults import KINDS, RECOVERY, Fault, kind_of
from harness.scenario import Scenario, ScenarioError, WorkloadSpec, load_scenario, parse_scenario
from harness.shrink.steps import candidates, to_toml, validate

ALL = frozenset(CAPABILITY_NAMES)

CHAOS = """
description = "x"
duration = 60.0
[chaos]
pool = {pool}
"""


def scenario(pool: str = '"all"', extra: str = "", **kw) -> Scenario:
    return parse_scenario("c", tomllib.loads(CHAOS.format(pool=pool) + extra), "c.toml")


def test_the_same_seed_draws_the_same_schedule_and_other_seeds_others():
    s = load_scenario("chaos")
    a, b = s.drawn_from(7, ALL), s.drawn_from(7, ALL)
    assert a.faults == b.faults and a.drawn == b.drawn and a.faults
    others = {s.drawn_from(seed, ALL).faults for seed in range(1, 6)}
    assert len(others) == 5
    assert a.chaos is None and a.drawn["seed"] == 7
    assert a.drawn["schedule"] == [chaos.describe(f) for f in a.faults]


@pytest.mark.parametrize("seed", range(1, 21))
def test_windows_fit_the_run_one_after_another_with_room_after_each(seed):
    s = load_scenario("chaos")
    for run in (s, s.scaled(30.0)):
        drawn = run.drawn_from(seed, ALL)
        end = 0.0
        for f in drawn.faults:
            k = kind_of(f.kind)
            assert f.start >= max(end, run.chaos.start) - 1e-6, drawn.drawn["schedule"]
            lo, hi = k.draw_length or run.chaos.length
            assert lo <= f.duration <= hi
            end = f.start + f.duration + max(run.chaos.min_gap, k.recovery)
            validate(drawn.to_json())  # every drawn window is a valid [[faults]] entry
        assert end <= run.duration + 0.2
        assert 1 <= len(drawn.faults) <= run.chaos.windows


def test_the_pool_holds_only_what_the_cluster_can_do_and_the_nodes_fit():
    s = load_scenario("chaos")
    kinds, left = chaos.pool(s.chaos, 3, s.workload, {KILL, PAUSE})
    assert set(kinds) == {
        n for n, k in KINDS.items() if k.needs <= {KILL, PAUSE} and k.min_nodes <= 3
    }
    assert "lease-expiry" in kinds and "clock-skew-worker" in kinds
    assert left["partition-leader"] == "the cluster cannot: partitions"
    assert left["clock-skew-node"] == "the cluster cannot: clock-skew"
    assert left["partition-bridge"] == "the cluster cannot: partitions"
    kinds, left = chaos.pool(s.chaos, 3, s.workload, ALL)
    assert left == {"partition-bridge": "needs 5 nodes"}
    assert "partition-bridge" in chaos.pool(s.chaos, 5, s.workload, ALL)[0]
    drawn = s.drawn_from(1, frozenset({KILL}))
    assert {f.kind for f in drawn.faults} <= {n for n, k in KINDS.items() if k.needs <= {KILL}}


def test_all_takes_every_registered_kind_so_later_kinds_join(monkeypatch):
    class Later(kind_of("lease-expiry")):
        name = "later-kind"

    monkeypatch.setitem(KINDS, "later-kind", Later)
    s = load_scenario("chaos")
    assert "later-kind" in chaos.pool(s.chaos, 3, s.workload, ALL)[0]


def test_a_worker_kind_the_workload_cannot_take_is_left_out_of_all():
    s = scenario(extra="[workload]\nshared_transport = true\n")
    kinds, left = chaos.pool(s.chaos, 3, s.workload, ALL)
    assert "clock-skew-worker" not in kinds and "clock-strobe-worker" not in kinds
    assert "shared_transport" in left["clock-skew-worker"]


def test_exclude_weights_and_skip_fault_shape_the_pool():
    s = scenario(extra='exclude = ["kill-all"]\n[chaos.weights]\ntimezone = 0\n')
    kinds, left = chaos.pool(s.chaos, 3, WorkloadSpec(), ALL)
    assert "kill-all" not in kinds and left["kill-all"] == "excluded"
    assert left["timezone"] == "weight 0"
    skipped = s.without(["pause-leader"])
    assert "pause-leader" not in chaos.pool(skipped.chaos, 3, WorkloadSpec(), ALL)[0]
    assert skipped.skipped == ("pause-leader from the [chaos] pool (--skip-fault)",)
    only = scenario(pool='["timezone", "kill-leader"]', extra="[chaos.weights]\nkill-leader = 0\n")
    assert {f.kind for f in only.drawn_from(3, ALL).faults} == {"timezone"}


@pytest.mark.parametrize(
    ("pool", "extra", "message"),
    [
        ('"some"', "", "key 'chaos.pool': expected \"all\" or a non-empty list of fault kinds"),
        ('["flood"]', "", "key 'chaos.pool': expected \"all\" or a non-empty list"),
        ("[]", "", "key 'chaos.pool': expected"),
        ('"all"', "windows = 0\n", "key 'chaos.windows': expected an integer >= 1, got 0"),
        ('"all"', "turbo = 1\n", "unknown key 'chaos.turbo'"),
        ('"all"', 'exclude = "kill-all"\n', "key 'chaos.exclude': expected a list of fault kinds"),
        ('"all"', "[chaos.weights]\nflood = 1\n", "key 'chaos.weights': expected a table"),
        ('"all"', "start = 60\n", "key 'chaos.start': expected a time before"),
        ('["kill-all"]', 'exclude = ["kill-all"]\n', "key 'chaos.pool': expected at least one"),
        ('["partition-bridge"]', "", "[chaos] pool kind 'partition-bridge' needs 5 nodes"),
    ],
)
def test_a_bad_chaos_table_is_one_line_naming_the_file_and_key(pool, extra, message):
    with pytest.raises(ScenarioError, match=r"^c\.toml: ") as e:
        scenario(pool, extra)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_chaos_and_faults_together_and_named_kinds_the_workload_cannot_take_are_refused():
    text = CHAOS.format(pool='"all"') + '[[faults]]\nkind = "kill-leader"\nduration = 1\n'
    with pytest.raises(ScenarioError, match="key 'chaos': a random schedule or"):
        parse_scenario("c", tomllib.loads(text), "c.toml")
    with pytest.raises(ScenarioError, match=r"key 'chaos\.pool': fault 'clock-skew-worker' skews"):
        scenario('["clock-skew-worker"]', "[workload]\nshared_transport = true\n")


def test_no_kind_that_fits_is_a_one_line_error():
    s = scenario('["partition-leader"]')
    with pytest.raises(
        ScenarioError, match=r"no fault kind of \[chaos\] fits \(partition-leader: the"
    ):
        s.drawn_from(1, frozenset({KILL}))


def test_a_named_pool_the_cluster_cannot_run_is_refused_before_the_workload(tmp_path, monkeypatch):
    from harness import runner
    from harness.runner import RunOptions
    from tests.harness.test_faults import Lacking

    monkeypatch.setattr(
        "harness.cluster.factory.make_cluster", lambda *a, **k: Lacking(ALL - {CLOCK_SKEW})
    )
    path = tmp_path / "c.toml"
    path.write_text(CHAOS.format(pool='["clock-strobe-node", "kill-leader"]'))
    result = runner.run(RunOptions(str(path), out=tmp_path / "r", progress=False, plots=False))
    assert result.reason == (
        "scenario c skews nodes' clocks (clock-strobe-node): the fake backend cannot skew a "
        "node's clock"
    )


def test_the_resolved_scenario_round_trips_and_shrinks_as_a_plain_file():
    drawn = load_scenario("chaos").scaled(30.0).drawn_from(2, ALL)
    data = drawn.to_json()
    assert "chaos" not in data and data["drawn"]["seed"] == 2
    again = Scenario.from_json(data, name="chaos")
    assert again.faults == drawn.faults and again.drawn == drawn.drawn and again.chaos is None
    # what shrink reduces is the drawn schedule; its files have no [chaos] table
    cands = candidates(data)
    assert cands and any(len(c.data["faults"]) < len(drawn.faults) for c in cands)
    text = to_toml(cands[0].data)
    assert "\n[chaos]" not in text and "[[faults]]" in text
    reread = parse_scenario("min", tomllib.loads(text), "min.toml")
    assert reread.chaos is None and reread.faults == validate(cands[0].data).faults
    # an undrawn one (a run that failed before its cluster was up) reads back undrawn
    undrawn = Scenario.from_json(load_scenario("chaos").to_json(), name="chaos")
    assert undrawn.chaos == load_scenario("chaos").chaos and not undrawn.faults


def test_scaling_draws_fewer_windows_and_needs_are_the_pools():
    s = load_scenario("chaos")
    assert s.scaled(30.0).chaos.windows == 2 and s.scaled(30.0).duration == 30.0
    assert s.needs == frozenset().union(*(k.needs for k in KINDS.values()))
    assert s.needs_partitions
    assert scenario('["kill-leader"]').needs == {KILL}


@pytest.mark.parametrize("name", list(KINDS))
def test_every_kind_draws_parameters_its_reader_accepts(name):
    k = kind_of(name)
    for seed in range(5):
        rng = random.Random(seed)
        length = round(rng.uniform(*(k.draw_length or (3.0, 8.0))), 1)
        params = k.draw(rng, length)
        fault = Fault(name, 1.0, length, None, params)
        data = {
            "description": "x",
            "faults": [fault.to_json()],
            "workload": {},
            "nodes": max(3, k.min_nodes),
        }
        assert validate(data).faults == (fault,), params


def test_drawn_node_clock_offsets_stay_inside_rqueues_tolerance():
    for name in ("clock-skew-node", "clock-strobe-node", "clock-jump-back-node"):
        offsets = [abs(kind_of(name).draw(random.Random(i), 5.0)["offset"]) for i in range(50)]
        assert min(offsets) > 0 and max(offsets) <= 0.2, name
    assert kind_of("kill-leader").draw(random.Random(1), 5.0) == {}
    assert RECOVERY > 0 and PARTITIONS in kind_of("partition-leader").needs


@pytest.mark.slow
def test_a_chaos_run_writes_what_it_drew_and_runs_it(run_scenario):
    import json
    import os

    result = run_scenario("chaos", time=20.0, seed=2)
    assert result.exit_code in (0, 3), (result.reason, result.summary)
    resolved = json.loads((result.run_dir / "scenario.json").read_text())
    # as root the local backend runs a netns cluster with disks of its own (partitions,
    # links, disks, and members: a joiner gets a namespace of its own), else a loopback
    # one (members)
    netns = os.geteuid() == 0
    capabilities = ALL if netns else ALL - {PARTITIONS, LINKS, DISK}
    expected = load_scenario("chaos").scaled(20.0).drawn_from(2, capabilities)
    assert resolved["drawn"] == expected.drawn and "chaos" not in resolved
    assert [f["kind"] for f in resolved["faults"]] == [f.kind for f in expected.faults]
    assert set(result.summary["faults"]) == {f.kind for f in expected.faults}
    report = (result.run_dir / "report.md").read_text()
    assert "Drawn by `[chaos]` from seed 2" in report
    assert all(line in report for line in expected.drawn["schedule"])
