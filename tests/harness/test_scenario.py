"""Scenario files: the shipped ones load, bad ones are refused with file, key and expectation."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from harness.scenario import (
    FAULT_KINDS,
    OUTAGE_KINDS,
    RECOVERY,
    SCENARIO_DIR,
    Scenario,
    ScenarioError,
    dropped_count,
    list_scenarios,
    load_scenario,
)

REQUIRED = {
    "leader-failover",
    "partition-leader",
    "partition-majority",
    "pause-leader",
    "lease-expiry",
    "clock-skew",
    "crash-restart-all",
    "mixed",
    "blob-text",
    "timezone",
}


def write(tmp_path: Path, text: str, name: str = "bad.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_required_scenario_ships_with_a_description():
    scenarios = {s.name: s for s in list_scenarios()}
    assert set(scenarios) >= REQUIRED
    for s in scenarios.values():
        assert s.description and s.duration == 60.0
        assert s.source.endswith(f"{s.name}.toml")


def test_fault_kinds_cover_the_issue():
    kinds = {f.kind for s in list_scenarios() for f in s.faults}
    assert {"kill-leader", "pause-leader", "partition-leader", "partition-majority"} <= kinds
    assert {"clock-skew-worker", "clock-skew-node", "lease-expiry", "kill-all"} <= kinds
    assert "timezone" in kinds
    assert kinds <= set(FAULT_KINDS)


def test_the_group_commit_scenario_shares_transports():
    s = load_scenario("group-commit")
    assert s.workload.shared_transport and s.needs_partitions
    assert not load_scenario("leader-failover").workload.shared_transport


def test_ack_and_claim_is_a_probability_defaulting_to_off(tmp_path):
    path = write(tmp_path, 'description = "x"\n[workload]\nack_and_claim = 0.25\n', "f.toml")
    assert load_scenario(path).workload.ack_and_claim == 0.25
    path = write(tmp_path, 'description = "x"\n[workload]\nack_and_claim = 1\n', "one.toml")
    assert load_scenario(path).workload.ack_and_claim == 1.0
    assert load_scenario("leader-failover").workload.ack_and_claim == 0.0
    assert load_scenario("ack-and-claim").workload.ack_and_claim == 1.0
    assert load_scenario("group-commit").workload.ack_and_claim == 0.5


def test_partition_scenarios_say_they_need_partitions():
    assert load_scenario("partition-leader").needs_partitions
    assert not load_scenario("leader-failover").needs_partitions


def test_time_moves_the_windows_but_keeps_each_faults_duration():
    s = load_scenario("leader-failover")  # kill-leader 8+6 every 15, 60 s
    short = s.scaled(20)
    assert short.duration == 20 and short.workload == s.workload  # visibility etc. as written
    assert [(f.start, f.duration) for f in short.faults] == [(round(8 / 3, 3), 6.0)]
    assert len(short.dropped) == 3 and "kill-leader at 23-29 s of the scenario" in short.dropped[0]
    long = s.scaled(120)
    assert [(f.start, f.duration) for f in long.faults] == [(16, 6), (46, 6), (76, 6), (106, 6)]
    assert long.dropped == ()
    same = s.scaled(60)
    assert [f.windows(60) for f in same.faults] == [[w] for w in s.faults[0].windows(60)]


def test_a_shortened_crash_restart_all_leaves_room_after_each_kill():
    """Issue 23: at --time 30 the last kill-all came 25.5 s into the run and its window
    could not be judged; now it is dropped, and the run says so."""
    short = load_scenario("crash-restart-all").scaled(30)  # kill-all 10+4 every 20
    assert [(f.start, f.duration) for f in short.faults] == [(5, 4), (15, 4)]
    (why,) = short.dropped
    assert why == (
        "kill-all at 50-54 s of the scenario: the earliest it could start is 25 s (its start "
        "scaled to the run), so it would end at 29 s, 1.0 s before the run's end, where it "
        "needs 5 s to recover and be judged"
    )


def test_dropped_windows_say_where_they_could_start_without_contradicting_each_other():
    """pause-leader at 15 s keeps 1 of 4 windows. Two of the dropped ones are pushed to
    the same earliest start by the window kept before them: each message says that is
    the earliest it could start, and why, not that it would run there."""
    short = load_scenario("pause-leader").scaled(15)  # pause-leader 8+6 every 15, 60 s
    assert dropped_count(short) == "3 of 4 fault windows dropped (no room left in 15 s), 1 kept"
    assert short.dropped == (
        "pause-leader at 23-29 s of the scenario: the earliest it could start is 13 s (after "
        "the pause-leader kept at 2-8 s and its recovery), so it would end at 19 s, past the "
        "run's end (15 s)",
        "pause-leader at 38-44 s of the scenario: the earliest it could start is 13 s (after "
        "the pause-leader kept at 2-8 s and its recovery), so it would end at 19 s, past the "
        "run's end (15 s)",
        "pause-leader at 53-59 s of the scenario: the earliest it could start is 13.25 s (its "
        "start scaled to the run), so it would end at 19.25 s, past the run's end (15 s)",
    )


def _windows(s):
    return sorted((a, b, f.kind) for f in s.faults for a, b in f.windows(s.duration))


@pytest.mark.parametrize("seconds", [12, 20, 30, 45, 90])
@pytest.mark.parametrize("path", sorted(SCENARIO_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_every_scaled_window_keeps_its_length_and_its_room(path: Path, seconds: float) -> None:
    s = load_scenario(path)
    try:
        short = s.scaled(seconds)
    except ScenarioError as e:
        assert "leaves no room for any fault" in str(e)
        least = float(str(e).rsplit(" is ", 1)[1].removesuffix(" s"))
        assert least > seconds and s.scaled(least).faults  # the time it names does keep one
        return
    original, moved = _windows(s), _windows(short)
    assert len(moved) + len(short.dropped) == len(original)
    lengths = sorted(round(b - a, 6) for a, b, _ in original)
    for a, b, kind in moved:
        assert round(b - a, 6) in lengths  # each fault's own duration
        room = RECOVERY if kind in OUTAGE_KINDS else 0.0
        left = min(s.duration - e for _, e, k in original if k == kind)  # by the scenario
        assert b + min(room, left) <= seconds + 1e-6
    for (_, b, kind), (c, _, _) in itertools.pairwise(moved):
        if kind in OUTAGE_KINDS and not any(x < c < y for x, y, _ in moved):
            assert c - b >= min(RECOVERY, _least_gap(original)) - 1e-6  # recovery room


def _least_gap(windows) -> float:
    return min((c - b for (_, b, _), (c, _, _) in itertools.pairwise(windows)), default=0.0)


def test_a_time_too_short_for_any_fault_names_the_shortest_that_fits():
    with pytest.raises(ScenarioError, match=r"--time 20 leaves no room for any fault of lease-"
                       r"expiry: .* the shortest run that keeps one is 26 s"):  # fmt: skip
        load_scenario("lease-expiry").scaled(20)
    assert len(load_scenario("lease-expiry").scaled(26).faults) == 1
    assert load_scenario("steady").scaled(2).faults == ()


def test_nodes_override_is_checked():
    assert load_scenario("leader-failover").with_nodes(5).nodes == 5
    with pytest.raises(ScenarioError, match="partition-bridge' needs 5 nodes"):
        load_scenario(SCENARIO_DIR / "partition-bridge.toml").with_nodes(3)


def test_a_scenario_by_path(tmp_path):
    path = write(tmp_path, 'description = "x"\nduration = 10\n', "mine.toml")
    s = load_scenario(path)
    assert (s.name, s.duration, s.faults) == ("mine", 10.0, ())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'description = "x"\nduration = "long"',
            "key 'duration': expected a number > 0, got 'long'",
        ),
        ("duration = 5", "key 'description': expected a string (this key is required)"),
        ('description = "x"\nnodes = 4', "key 'nodes': expected 3, 5 or 7 nodes, got 4"),
        (
            'description = "x"\n[workload]\nvisibility = 0',
            "key 'workload.visibility': expected a number > 0, got 0",
        ),
        (
            'description = "x"\n[workload]\nvisiblity = 2',
            "unknown key 'workload.visiblity'",
        ),
        (
            'description = "x"\n[workload]\nwork = [2, 1]',
            "key 'workload.work': expected [low, high] seconds with 0 <= low <= high",
        ),
        (
            'description = "x"\n[workload]\npriorities = [7]',
            "key 'workload.priorities': expected a non-empty list of integers 0..4",
        ),
        (
            'description = "x"\n[[faults]]\nkind = "meteor"\nduration = 1',
            "key 'faults[0].kind': expected one of 'kill-leader'",
        ),
        (
            'description = "x"\n[[faults]]\nkind = "kill-leader"',
            "key 'faults[0].duration': expected a number > 0",
        ),
        (
            'description = "x"\n[[faults]]\nkind = "kill-leader"\nduration = 5\nevery = 2',
            "key 'faults[0].every': expected a period >= the fault's duration (5)",
        ),
        (
            'description = "x"\n[[faults]]\nkind = "kill-leader"\nduration = 5\noffset = 2',
            "unknown key 'faults[0].offset'",
        ),
        (
            'description = "x"\nduration = 10\n[[faults]]\nkind = "kill-leader"\n'
            "duration = 1\nstart = 20",
            "key 'faults[0].start': expected a time before the scenario's duration (10)",
        ),
        (
            'description = "x"\n[[faults]]\nkind = "clock-skew-node"\nduration = 1\n'
            'target = "moon"',
            "key 'faults[0].target': expected one of 'leader', 'follower', 'random', "
            "'minority', 'all'",
        ),
        (
            'description = "x"\n[[faults]]\nkind = "timezone"\nduration = 10\noffset = 1.5',
            "key 'faults[0].offset': expected whole seconds between -89999 and 89999",
        ),
        (
            'description = "x"\n[[faults]]\nkind = "timezone"\nduration = 10',
            "key 'faults[0].offset': expected a zone off UTC: an offset other than 0, or a "
            "'transition'",
        ),
        (
            'description = "x"\n[[faults]]\nkind = "timezone"\nduration = 10\ntransition = 10',
            "key 'faults[0].transition': expected seconds into the fault, under its duration",
        ),
        (
            'description = "x"\n[[faults]]\nkind = "timezone"\nduration = 10\ntransition = 2\n'
            "jump = 0",
            "key 'faults[0].jump': expected whole seconds other than 0",
        ),
        (
            'description = "x"\n[[faults]]\nkind = "timezone"\nduration = 10\noffset = 3600\n'
            "jump = 60",
            "key 'faults[0].transition': expected seconds into the fault when 'jump' is given",
        ),
        (
            'description = "x"\n[[faults]]\nkind = "timezone"\nduration = 10\noffset = 89000\n'
            "transition = 1\njump = 3600",
            "key 'faults[0].jump': expected whole seconds other than 0, the offset after it",
        ),
        (
            'description = "x"\n[workload]\nadversarial_text = 2',
            "key 'workload.adversarial_text': expected a probability between 0 and 1, got 2",
        ),
        (
            'description = "x"\n[workload]\nshared_transport = "yes"',
            "key 'workload.shared_transport': expected true or false, got 'yes'",
        ),
        (
            'description = "x"\n[workload]\nshared_transport = true\n[[faults]]\n'
            'kind = "clock-skew-worker"\nduration = 1',
            "fault 'clock-skew-worker' skews each claimer's own clock",
        ),
        (
            'description = "x"\n[workload]\nack_and_claim = 1.5',
            "key 'workload.ack_and_claim': expected a probability between 0 and 1, got 1.5",
        ),
        (
            'description = "x"\n[workload]\nack_and_claim = -0.25',
            "key 'workload.ack_and_claim': expected a probability between 0 and 1, got -0.25",
        ),
        (
            'description = "x"\n[workload]\nack_and_claim = "often"',
            "key 'workload.ack_and_claim': expected a probability between 0 and 1, got 'often'",
        ),
        (
            'description = "x"\n[workload]\nack_and_claim = true',
            "key 'workload.ack_and_claim': expected a probability between 0 and 1, got True",
        ),
        ('description = "x"\nfaults = 3', "key 'faults': expected an array of tables"),
        ('description = "x"\nworkload = 3', "key 'workload': expected a table"),
    ],
)
def test_malformed_files_name_the_file_the_key_and_the_expectation(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_invalid_toml_names_the_file(tmp_path):
    path = write(tmp_path, "description = \n")
    with pytest.raises(ScenarioError, match=r"bad\.toml: not valid TOML"):
        load_scenario(path)


def test_unknown_scenario_lists_the_known_ones():
    with pytest.raises(ScenarioError, match=r"no scenario 'nope'.*known: .*leader-failover"):
        load_scenario("nope")


def test_bad_time_is_refused():
    with pytest.raises(ScenarioError, match="--time must be > 0"):
        load_scenario("steady").scaled(0)


@pytest.mark.parametrize("path", sorted(SCENARIO_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_every_scenario_round_trips_through_its_run_folder(tmp_path: Path, path: Path) -> None:
    """What a run saves as scenario.json loads back as the same scenario (issue 21: a fault
    without ``every`` was saved as ``"every": null``, which the loader refused), and shrink
    accepts the folder."""
    from harness.shrink import load_run
    from harness.store import RunStore

    s = load_scenario(path)
    store = RunStore.create(s.name, tmp_path / "run")
    store.write_json("scenario.json", s.to_json())
    store.write_json("run.json", {"options": {"seed": 1}, "summary": {"anomalies": {}}})
    assert load_run(store.root)["scenario"] == store.read_json("scenario.json")
    assert Scenario.from_json(store.read_json("scenario.json")) == s
    for seconds in (30, 90):  # as --time resolves it, with the windows it dropped
        scaled = s.scaled(seconds)
        store.write_json("scenario.json", scaled.to_json())
        assert Scenario.from_json(store.read_json("scenario.json")) == scaled
        load_run(store.root)


def test_a_run_folder_saved_with_every_null_still_loads(tmp_path: Path) -> None:
    from harness.shrink import load_run

    s = load_scenario("poison")
    data = s.to_json()
    for f in data["faults"]:
        f.setdefault("every", None)  # as runs saved it before the fix
    (tmp_path / "scenario.json").write_text(json.dumps(data))
    (tmp_path / "run.json").write_text("{}")
    assert load_run(tmp_path)["scenario"]["faults"][0]["every"] is None
    assert Scenario.from_json(data) == s


def test_the_timezone_scenario_moves_every_zone_inside_its_windows():
    s = load_scenario("timezone")
    assert s.needs_time_zones and not s.needs_partitions
    assert [f.target for f in s.faults] == ["leader", "minority", "all"]
    for f in s.faults:
        assert f.kind == "timezone" and f.transition is not None
        assert 0 < f.transition < f.duration and f.jump != 0
    assert any(f.jump > 0 for f in s.faults)  # a spring-forward: leases look expired
    again = Scenario.from_json(s.to_json())
    assert again.faults == s.faults
    fixed = load_scenario("steady")
    assert not fixed.needs_time_zones


def test_a_fixed_zone_needs_no_transition_and_saves_none(tmp_path):
    path = write(
        tmp_path,
        'description = "x"\n[[faults]]\nkind = "timezone"\nduration = 5\noffset = 19800\n'
        'target = "minority"\n',
        "z.toml",
    )
    (f,) = load_scenario(path).faults
    assert (f.offset, f.transition, f.target) == (19800.0, None, "minority")
    saved = load_scenario(path).to_json()["faults"][0]
    assert "transition" not in saved and Scenario.from_json(load_scenario(path).to_json())


def test_blob_text_and_mixed_use_adversarial_text():
    assert load_scenario("blob-text").workload.adversarial_text == 1.0
    assert 0 < load_scenario("mixed").workload.adversarial_text < 1
    assert load_scenario("steady").workload.adversarial_text == 0


def test_without_leaves_a_kind_out_and_names_every_window():
    """``--skip-fault``: the nightly job runs ``clock-skew`` on the official image, whose
    nodes share the host's clock, without its node clock skew (and says so)."""
    s = load_scenario("clock-skew")
    kept = s.without(["clock-skew-node"])
    assert {f.kind for f in kept.faults} == {"clock-skew-worker"}
    assert kept.skipped == (
        "clock-skew-node at 10-25 s (--skip-fault)",
        "clock-skew-node at 40-55 s (--skip-fault)",
    )
    assert Scenario.from_json(kept.to_json(), name="clock-skew").skipped == kept.skipped
    assert s.without(["timezone"]).faults == s.faults  # a kind it lacks: nothing left out
    with pytest.raises(ScenarioError, match="--skip-fault clock-skew: no such fault kind"):
        s.without(["clock-skew"])


def test_a_shortened_run_that_drops_an_essential_window_says_the_shortest_time_keeping_it():
    """timezone's third window (every node off UTC, refused cleanly) is its point: at
    --time 30 it does not fit, and the run is inconclusive, naming the --time that keeps it."""
    full = load_scenario("timezone")
    assert [f.essential for f in full.faults] == [False, False, True]
    short = full.scaled(30)
    assert len(short.faults) == 1 and len(short.essential_dropped) == 1
    why = short.essential_dropped[0]
    assert why.startswith("timezone at 41-57 s of the scenario, which it cannot do without")
    shortest = int(why.rsplit(" ", 2)[-2])
    assert any(f.essential for f in full.scaled(shortest).faults)
    assert not full.scaled(shortest).essential_dropped
    assert full.scaled(shortest - 1).essential_dropped
    assert Scenario.from_json(short.to_json()).essential_dropped == short.essential_dropped
    assert load_scenario("disk-full").scaled(30).essential_dropped == ()  # both targets kept


def test_essential_is_a_flag_of_a_fault(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'description = "x"\n[[faults]]\nkind = "kill-leader"\nduration = 5\nessential = 1\n'
    )
    with pytest.raises(ScenarioError, match=r"faults\[0\]\.essential.*true or false"):
        load_scenario(str(bad))


def test_a_dropped_essential_window_makes_the_run_inconclusive():
    from harness.verdict import INCONCLUSIVE, coverage, decide

    short = load_scenario("timezone").scaled(30)
    result = {"valid": True, "anomalies": {}}
    cov = coverage([], short, {**result, "stats": {"replicas": {"compared": True}}})
    assert not cov["conclusive"] and short.essential_dropped[0] in cov["reasons"]
    verdict = decide({**result, "coverage": cov})
    assert verdict.label == INCONCLUSIVE and short.essential_dropped[0] in verdict.reasons
