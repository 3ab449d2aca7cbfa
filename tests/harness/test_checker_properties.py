"""Properties of the checker on generated histories.

The generator is the correct-queue simulation of ``benchmarks/checker_bench.py``
(concurrent publishers and claimers, fail/info outcomes, stalls past the visibility,
nacks, extends, faults, a drain). Its histories must check valid; each mutation below
breaks one promise and must be reported as the matching anomaly.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.checker import CLOCK_TOLERANCE, check

_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "checker_bench.py"
_spec = importlib.util.spec_from_file_location("checker_bench", _BENCH)
assert _spec is not None and _spec.loader is not None
bench = sys.modules.setdefault("checker_bench", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(bench)

# CHECKER_EXAMPLES=500 for a longer search than the default suite's
PROPERTY = settings(
    max_examples=int(os.environ.get("CHECKER_EXAMPLES", "20")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def histories(draw: st.DrawFn) -> list[dict]:
    """A history of a correct queue, with the knobs drawn too."""
    return bench.simulate(
        draw(st.integers(0, 2**32 - 1)),
        draw(st.integers(300, 1500)),
        publishers=draw(st.integers(1, 4)),
        claimers=draw(st.integers(1, 8)),
        groups_per_publisher=draw(st.integers(1, 4)),
        visibility=draw(st.sampled_from([0.2, 0.5, 2.0])),
        p_fail=draw(st.sampled_from([0.0, 0.02, 0.1])),
        p_info=draw(st.sampled_from([0.0, 0.01, 0.05])),
        fault_every=draw(st.sampled_from([1.0, 5.0])),
    )


def counts(result: dict) -> dict[str, int]:
    return {k: v["count"] for k, v in result["anomalies"].items() if v["count"]}


def leases(events: list[dict]) -> list[tuple[dict, dict]]:
    """(invoke, ok) of every claim that returned a message."""
    open_: dict[Any, dict] = {}
    out = []
    for ev in events:
        if ev["process"] == "nemesis":
            continue
        if ev["type"] == "invoke":
            open_[ev["process"]] = ev
        else:
            inv = open_.pop(ev["process"])
            if inv["f"] == "claim" and ev["type"] == "ok" and ev["value"] is not None:
                out.append((inv, ev))
    return out


def insert(events: list[dict], new: list[dict]) -> list[dict]:
    """Merge ``new`` events into the history by time and renumber every index."""
    merged = sorted(events + new, key=lambda e: e["time"])
    for i, ev in enumerate(merged):
        ev["index"] = i
    return merged


def new_process(events: list[dict]) -> int:
    return 1 + max(e["process"] for e in events if e["process"] != "nemesis")


@PROPERTY
@given(histories())
def test_a_correct_queue_is_valid(events: list[dict]) -> None:
    result = check(events)
    assert result["valid"], counts(result)
    stats = result["stats"]
    assert stats["redeliveries"] == stats["leases"] - len(
        {ok["value"]["msg"] for _, ok in leases(events)}
    )


@PROPERTY
@given(histories(), st.randoms(use_true_random=False))
def test_removing_the_acks_of_a_message_makes_it_lost(events: list[dict], rnd: Any) -> None:
    result = check(events)
    published = {e["value"]["msg"] for e in events if e["f"] == "publish" and e["type"] == "ok"}
    acked = sorted(
        {e["value"]["msg"] for e in events if e["f"] == "ack" and e["type"] in ("ok", "info")}
        & published
    )
    if not acked:
        return
    victim = rnd.choice(acked)
    kept = [
        copy.copy(e)
        for e in events
        if not (e["f"] == "ack" and isinstance(e["value"], dict) and e["value"]["msg"] == victim)
    ]
    for i, ev in enumerate(kept):
        ev["index"] = i
    mutated = check(kept)
    assert mutated["anomalies"]["lost"]["count"] == 1
    [[i, j]] = mutated["anomalies"]["lost"]["examples"]
    assert kept[i]["f"] == "publish" and kept[i]["value"]["msg"] == victim
    assert kept[j]["type"] == "ok"
    assert result["valid"]


@PROPERTY
@given(histories(), st.randoms(use_true_random=False))
def test_a_second_claim_inside_a_lease_is_a_duplicate(events: list[dict], rnd: Any) -> None:
    events = copy.deepcopy(events)
    candidates = [
        (inv, ok)
        for inv, ok in leases(events)
        if inv["time"] + ok["value"]["visibility"] > ok["time"] + 0.02
    ]
    if not candidates:
        return
    inv, ok = rnd.choice(candidates)
    # the holder's own ack/nack could cut the window short: claim right after the ok
    t = ok["time"] + 0.001
    p = new_process(events)
    value = ok["value"]
    claim = {"index": -1, "time": t, "process": p, "type": "invoke", "f": "claim",
             "value": {"visibility": value["visibility"], "min_priority": 0}}  # fmt: skip
    done = {"index": -1, "time": t + 0.001, "process": p, "type": "ok", "f": "claim",
            "value": {**value, "token": "intruder"}}  # fmt: skip
    mutated = insert(events, [claim, done])
    cut = min(
        (e["time"] for e in mutated
         if e["process"] == inv["process"] and e["type"] == "invoke"
         and e["f"] in ("ack", "nack") and e["time"] > ok["time"]),
        default=float("inf"),
    )  # fmt: skip
    if cut < done["time"]:
        return
    dup = check(mutated)["anomalies"]["duplicate-group-lease"]
    assert dup["count"] >= 1
    assert any(ex[2:] == [claim["index"], done["index"]] for ex in dup["examples"]) or (
        dup["count"] > len(dup["examples"])
    )


@PROPERTY
@given(histories())
def test_swapping_two_deliveries_of_a_group_breaks_fifo(events: list[dict]) -> None:
    events = copy.deepcopy(events)
    pub_ok: dict[str, float] = {}
    pub_inv: dict[str, float] = {}
    group_of: dict[str, str] = {}
    open_: dict[Any, dict] = {}
    for ev in events:
        if ev["process"] == "nemesis":
            continue
        if ev["type"] == "invoke":
            open_[ev["process"]] = ev
            continue
        inv = open_.pop(ev["process"])
        if inv["f"] == "publish":
            m = inv["value"]["msg"]
            pub_inv.setdefault(m, inv["time"])
            group_of[m] = inv["value"]["group"]
            if ev["type"] == "ok":
                pub_ok.setdefault(m, ev["time"])
    by_msg: dict[str, list[tuple[dict, dict]]] = {}
    for inv, ok in leases(events):
        by_msg.setdefault(ok["value"]["msg"], []).append((inv, ok))
    # two messages a, b of one group, a certainly published first, each leased once
    order: dict[str, list[str]] = {}
    for m in sorted(pub_ok, key=pub_ok.get):
        if len(by_msg.get(m, [])) == 1:
            order.setdefault(group_of[m], []).append(m)
    pair = next(
        ((ms[k], ms[k + 1]) for ms in order.values() for k in range(len(ms) - 1)
         if pub_ok[ms[k]] < pub_inv[ms[k + 1]]),
        None,
    )  # fmt: skip
    if pair is None:
        return
    a, b = pair
    token_a = by_msg[a][0][1]["value"]["token"]
    token_b = by_msg[b][0][1]["value"]["token"]
    # the queue handed out b where it handed out a, and a where it handed out b
    for ev in events:
        v = ev["value"]
        if ev["process"] != "nemesis" and isinstance(v, dict) and "token" in v:
            if v["token"] == token_a:
                v["msg"] = b
            elif v["token"] == token_b:
                v["msg"] = a
    assert check(events)["anomalies"]["fifo-violation"]["count"] >= 1


@PROPERTY
@given(histories(), st.randoms(use_true_random=False))
def test_a_claim_after_an_ack_returned_is_delivered_after_ack(events: list[dict], rnd: Any) -> None:
    events = copy.deepcopy(events)
    acks = [e for e in events if e["f"] == "ack" and e["type"] == "ok"]
    if not acks:
        return
    ack = rnd.choice(acks)
    p = new_process(events)
    t = ack["time"] + 0.001
    lease = {"group": ack["value"]["group"], "msg": ack["value"]["msg"],
             "seq": ack["value"]["seq"], "token": "late", "visibility": 1.0}  # fmt: skip
    claim = {"index": -1, "time": t, "process": p, "type": "invoke", "f": "claim",
             "value": {"visibility": 1.0, "min_priority": 0}}  # fmt: skip
    done = {"index": -1, "time": t + 0.001, "process": p, "type": "ok", "f": "claim",
            "value": lease}  # fmt: skip
    mutated = insert(events, [claim, done])
    dal = check(mutated)["anomalies"]["delivered-after-ack"]
    assert dal["count"] == 1
    assert dal["examples"][0][2:] == [claim["index"], done["index"]]


@PROPERTY
@given(histories(), st.randoms(use_true_random=False))
def test_a_second_copy_of_a_publish_is_duplicated_and_nothing_else(
    events: list[dict], rnd: Any
) -> None:
    """A publish applied twice: its message, already leased and acked, leased again at the
    end under a seq no lease named (and acked). That is one ``duplicated`` and no other
    anomaly; the same lease under the first copy's seq is ``delivered-after-ack``."""
    events = copy.deepcopy(events)
    leased = {ok["value"]["msg"]: ok["value"] for _, ok in leases(events)}
    acked = {e["value"]["msg"] for e in events if e["f"] == "ack" and e["type"] == "ok"}
    if not acked:
        return
    m = rnd.choice(sorted(acked & set(leased)))
    first = leased[m]
    fresh = 1 + max(ok["value"]["seq"] for _, ok in leases(events))
    copy2 = {**first, "seq": fresh, "token": "second-copy"}
    t, p = events[-1]["time"] + 0.1, new_process(events)
    vis = {"visibility": 1.0, "min_priority": 0}
    new = [
        {"index": -1, "time": t, "process": p, "type": "invoke", "f": "claim", "value": vis},
        {"index": -1, "time": t + 0.01, "process": p, "type": "ok", "f": "claim",
         "value": copy2},
        {"index": -1, "time": t + 0.02, "process": p, "type": "invoke", "f": "ack",
         "value": {k: copy2[k] for k in ("group", "msg", "seq", "token")}},
        {"index": -1, "time": t + 0.03, "process": p, "type": "ok", "f": "ack",
         "value": {k: copy2[k] for k in ("group", "msg", "seq", "token")}},
    ]  # fmt: skip
    mutated = insert(events, new)
    result = check(mutated)
    assert counts(result) == {"duplicated": 1}, counts(result)
    [example] = result["anomalies"]["duplicated"]["examples"]
    assert mutated[example[0]]["f"] == "publish" and mutated[example[0]]["value"]["msg"] == m
    assert example[-2:] == [new[0]["index"], new[1]["index"]]
    # the same copy leased again after its ack is no duplicate: delivered-after-ack
    new[1]["value"] = {**copy2, "seq": first["seq"]}
    for ev in new[2:]:
        ev["value"]["seq"] = first["seq"]
    assert set(counts(check(mutated))) == {"delivered-after-ack"}


@PROPERTY
@given(histories(), st.randoms(use_true_random=False))
def test_an_ack_accepted_after_another_claim_past_expiry_is_stale(
    events: list[dict], rnd: Any
) -> None:
    events = copy.deepcopy(events)
    # leases acked (ok) by their holder after they expired: workers that stalled
    late = []
    for inv, ok in leases(events):
        expiry = ok["time"] + ok["value"]["visibility"]
        for e in events:
            if (e["process"] == inv["process"] and e["f"] == "ack" and e["type"] == "ok"
                    and e["value"]["token"] == ok["value"]["token"]):  # fmt: skip
                ack_ok = e
                break
        else:
            continue
        ack_inv = max(
            e["time"] for e in events
            if e["process"] == inv["process"] and e["type"] == "invoke"
            and e["time"] <= ack_ok["time"]
        )  # fmt: skip
        extended = any(
            e["process"] == inv["process"] and e["f"] == "extend" and e["time"] < ack_inv
            and e["value"]["token"] == ok["value"]["token"]
            for e in events
        )  # fmt: skip
        if not extended and ack_inv - expiry > 0.01:
            late.append((ok, expiry, ack_inv))
    if not late:
        return
    ok, expiry, ack_inv = rnd.choice(late)
    p = new_process(events)
    claim = {"index": -1, "time": expiry + 0.002, "process": p, "type": "invoke", "f": "claim",
             "value": {"visibility": 1.0, "min_priority": 0}}  # fmt: skip
    done = {"index": -1, "time": expiry + 0.004, "process": p, "type": "ok", "f": "claim",
            "value": {**ok["value"], "token": "usurper"}}  # fmt: skip
    mutated = insert(events, [claim, done])
    stale = check(mutated)["anomalies"]["stale-ack-accepted"]
    assert stale["count"] >= 1
    assert any(ex[2:4] == [claim["index"], done["index"]] for ex in stale["examples"])


def as_batches(events: list[dict]) -> list[dict]:
    """Every claim as a ``claim-many`` of its lease (if any), every ack as an
    ``ack-many`` of its lease: the same calls, recorded as batches of one."""
    out = copy.deepcopy(events)
    for ev in out:
        if ev["process"] == "nemesis":
            continue
        v = ev["value"]
        if ev["f"] == "claim":
            ev["f"] = "claim-many"
            if ev["type"] == "invoke":
                ev["value"] = {**v, "max_messages": 1}
            elif ev["type"] == "ok":
                ev["value"] = {"leases": [] if v is None else [v]}
        elif ev["f"] == "ack":
            ev["f"] = "ack-many"
            ev["value"] = {"leases": [v]}
            if ev["type"] == "ok":
                ev["value"]["outcomes"] = ["ok"]
    return out


@PROPERTY
@given(histories(), st.booleans())
def test_batches_of_one_check_as_the_single_calls(events: list[dict], lost: bool) -> None:
    if lost:  # an ack ok that becomes a batch ack whose one outcome is "fail"
        events = copy.deepcopy(events)
        for ev in events:
            if ev["f"] == "ack" and ev["type"] == "ok":
                ev["type"] = "fail"
    single, batched = check(events), check(as_batches(events))
    assert counts(batched) == counts(single)
    for k in ("published", "acked", "leases", "redeliveries", "empty_claims"):
        assert batched["stats"][k] == single["stats"][k], k


def first_leases(events: list[dict]) -> dict[str, float]:
    """Each message's earliest claim ok time."""
    first: dict[str, float] = {}
    for _, ok in leases(events):
        first.setdefault(ok["value"]["msg"], ok["time"])
    return first


@PROPERTY
@given(histories(), st.randoms(use_true_random=False))
def test_delays_up_to_the_first_delivery_are_valid_and_longer_ones_early(
    events: list[dict], rnd: Any
) -> None:
    """A delay that ends by the first lease (plus the clock tolerance) is kept; one that
    ends beyond it makes that lease an early delivery."""
    events = copy.deepcopy(events)
    first = first_leases(events)
    pubs = [e for e in events if e["f"] == "publish" and e["type"] == "invoke"]
    leased = [e for e in pubs if e["value"]["msg"] in first]
    if not leased:
        return
    for e in leased:
        slack = first[e["value"]["msg"]] - e["time"]
        e["value"]["delay"] = round(max(0.0, slack + 0.99 * CLOCK_TOLERANCE * rnd.random()), 6)
    result = check(events)
    assert result["valid"], counts(result)
    assert result["stats"]["delayed"] == len(
        {e["value"]["msg"] for e in leased if e["value"]["delay"]}
    )
    victim = rnd.choice(leased)
    m = victim["value"]["msg"]
    for e in leased:
        if e["value"]["msg"] == m:
            e["value"]["delay"] = first[m] - e["time"] + CLOCK_TOLERANCE + 0.01
    early = check(events)["anomalies"]["early-delivery"]
    assert early["count"] >= 1
    assert all(events[ex[0]]["value"]["msg"] == m for ex in early["examples"])
