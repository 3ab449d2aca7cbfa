"""A run that tested little is inconclusive: the coverage judgement on made-up histories."""

from __future__ import annotations

from typing import Any

from harness.coverage import assess


def ops(times: list[float]) -> list[dict[str, Any]]:
    return [{"process": 0, "type": "ok", "f": "claim", "time": t, "value": None} for t in times]


def fault(
    t: float, typ: str = "info", error: str | None = None, kind: str = "kill-leader"
) -> dict[str, Any]:
    value: dict[str, Any] = {"fault": kind, "phase": "start", "nodes": ["n1"]}
    ev = {"process": "nemesis", "type": typ, "f": "kill", "time": t, "value": value}
    if error:
        ev["error"] = error
    return ev


def steady(until: float, step: float = 0.1) -> list[float]:
    return [round(i * step, 3) for i in range(1, int(until / step))]


PLAN = [("kill-leader", 5.0, 8.0), ("kill-leader", 20.0, 23.0)]


def test_a_normal_run_is_conclusive() -> None:
    events = sorted([*ops(steady(30.0)), fault(5.0), fault(20.0)], key=lambda e: e["time"])
    cov = assess(events, PLAN, 30.0)
    assert cov.conclusive, cov.reasons
    assert cov.planned_faults == cov.started_faults == 2


def test_a_fault_that_could_not_start_makes_it_inconclusive() -> None:
    events = [*ops(steady(30.0)), fault(5.0), fault(20.0, "fail", "no leader to target within 5s")]
    cov = assess(events, PLAN, 30.0)
    assert not cov.conclusive
    assert "1 of 2 planned faults did not happen (no leader to target within 5s)" in cov.reasons[0]


def test_a_long_stretch_without_any_success_makes_it_inconclusive() -> None:
    times = [t for t in steady(60.0) if not 12.0 < t < 48.8]
    plan = [("kill-leader", 10.0, 13.0)]
    cov = assess([*ops(times), fault(10.0)], plan, 60.0)
    assert not cov.conclusive
    assert any("no operation succeeded for 36.8 s (from 12.0 s" in r for r in cov.reasons)
    assert cov.longest_quiet > 36


def test_a_fault_window_with_almost_no_work_makes_it_inconclusive() -> None:
    # the workload stalls from 19 s to 34 s (shorter than the quiet bound), over a fault
    times = [t for t in steady(40.0) if not 19.0 < t < 33.5]
    plan = [("kill-leader", 5.0, 8.0), ("pause-leader", 20.0, 23.0)]
    events = [*ops(times), fault(5.0), fault(20.0, kind="pause-leader")]
    cov = assess(events, plan, 40.0, max_quiet=20.0)
    assert len(cov.reasons) == 1 and "pause-leader at 20.0 s (0 ok)" in cov.reasons[0]


def test_an_all_down_fault_followed_by_recovery_is_conclusive() -> None:
    # kill-all for 4 s: nothing can succeed inside it, but the grace period recovers
    times = [t for t in steady(40.0) if not 10.0 < t < 15.5]
    plan = [("kill-all", 10.0, 14.0), ("kill-all", 30.0, 34.0)]
    times = [t for t in times if not 30.0 < t < 35.5]
    events = [*ops(times), fault(10.0, kind="kill-all"), fault(30.0, kind="kill-all")]
    cov = assess(events, plan, 40.0)
    assert cov.conclusive, cov.reasons


def test_a_fault_refused_before_the_history_is_named_by_the_nemesis_error() -> None:
    cov = assess(
        [*ops(steady(30.0)), fault(5.0)], PLAN, 30.0, errors=["kill-leader: no leader to target"]
    )
    assert cov.started_faults == 1
    assert cov.reasons == [
        "1 of 2 planned faults did not happen (kill-leader: no leader to target)"
    ]


def test_a_fault_at_the_very_end_of_the_run_is_not_judged() -> None:
    times = steady(6.0)
    plan = [("partition-leader", 5.7, 6.0)]
    events = [*ops(times), fault(5.7, kind="partition-leader")]
    cov = assess(events, plan, 6.0)
    assert cov.conclusive, cov.reasons


def test_a_short_run_mostly_under_faults_is_judged_against_its_whole_rate() -> None:
    # 6 s run, kill-all at 1.0-1.4 s: only 1 s lies outside the fault's span
    times = [t for t in steady(6.0, 0.002) if t < 1.0] + [t for t in steady(6.0) if t > 2.5]
    plan = [("kill-all", 1.0, 1.4)]
    cov = assess([*ops(times), fault(1.0, kind="kill-all")], plan, 6.0)
    assert cov.conclusive, cov.reasons


def refusals(times: list[float], refused: bool = True) -> list[dict[str, Any]]:
    line = "ZoneRefused: rqueue: every node rewrites 'now' off UTC ...; start rqlited with TZ=UTC"
    return [
        {"process": 1, "type": "fail", "f": "claim", "time": t, "value": None, "error": line}
        | ({"refused": True} if refused else {})
        for t in times
    ]


def test_a_window_in_which_the_queue_refused_on_purpose_is_conclusive() -> None:
    # every node off UTC from 20 s to 45 s: no ok at all, every call refused, saying why
    gap = [t for t in steady(60.0) if 20.0 < t < 45.0]
    times = [t for t in steady(60.0) if t not in gap]
    plan = [("timezone", 20.0, 36.0)]
    start = fault(20.0, kind="timezone")
    cov = assess([*ops(times), *refusals(gap), start], plan, 60.0)
    assert cov.conclusive, cov.reasons
    assert cov.longest_quiet < 1 and cov.windows[0]["ok"] < cov.windows[0]["refused"]
    # the same failures without the mark are silence: quiet too long and a starved window
    cov = assess([*ops(times), *refusals(gap, refused=False), start], plan, 60.0)
    assert not cov.conclusive and len(cov.reasons) == 2, cov.reasons
    assert "no operation succeeded for 25.0 s" in cov.reasons[0]
    assert "timezone at 20.0 s (12 ok)" in cov.reasons[1]  # 45-46 s, in its grace


def test_a_start_counts_from_its_invoke_even_when_it_completes_late() -> None:
    # a timezone start restarts nodes: its info comes 9 s after its invoke at 5 s
    value = {"fault": "timezone", "phase": "start", "nodes": ["n1", "n2", "n3"]}
    invoke = {"process": "nemesis", "type": "invoke", "f": "timezone", "time": 5.0, "value": value}
    done = {**invoke, "type": "info", "time": 14.0}
    events = sorted([*ops(steady(40.0)), invoke, done], key=lambda e: e["time"])
    cov = assess(events, [("timezone", 5.0, 21.0)], 40.0)
    assert cov.conclusive and cov.started_faults == 1, cov.reasons
    failed = {**done, "type": "fail", "error": "could not set the time zone of n2"}
    events = sorted([*ops(steady(40.0)), invoke, failed], key=lambda e: e["time"])
    cov = assess(events, [("timezone", 5.0, 21.0)], 40.0)
    assert cov.started_faults == 0 and "could not set the time zone of n2" in cov.reasons[0]


def test_a_transition_that_came_before_its_nodes_ran_is_inconclusive() -> None:
    value = {"fault": "timezone", "phase": "start", "nodes": ["n1"], "transition": 10.4}
    invoke = {"process": "nemesis", "type": "invoke", "f": "timezone", "time": 5.0, "value": value}
    for done, conclusive in ((12.0, True), (16.0, False)):
        info = {**invoke, "type": "info", "time": done}
        events = sorted([*ops(steady(40.0)), invoke, info], key=lambda e: e["time"])
        cov = assess(events, [("timezone", 5.0, 21.0)], 40.0)
        assert cov.conclusive is conclusive, cov.reasons
    assert cov.reasons == [
        "1 time zone change(s) came before their nodes ran in the zone, so no transition "
        "happened while they ran: timezone at 5.0 s (in place after 11.0 s, transition at "
        "+10.4 s)"
    ]


def test_a_fault_that_could_not_be_undone_makes_it_inconclusive() -> None:
    end = {
        "process": "nemesis", "type": "fail", "f": "rejoin", "time": 12.0,
        "value": {"fault": "remove-node", "phase": "end", "nodes": ["n2"],
                  "error": "ClusterError: could not add back n2"},
    }  # fmt: skip
    events = sorted([*ops(steady(30.0)), fault(5.0), fault(20.0), end], key=lambda e: e["time"])
    cov = assess(events, PLAN, 30.0)
    assert not cov.conclusive
    assert cov.reasons == [
        "1 fault(s) could not be undone, so the cluster did not end as it began "
        "(remove-node: ClusterError: could not add back n2)"
    ]
    ended = [{**end, "type": "info"} if e is end else e for e in events]
    assert assess(ended, PLAN, 30.0).conclusive  # the same end, done: nothing to say
