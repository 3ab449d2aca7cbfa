"""``ack_and_claim`` in the harness: one call, two overlapping history operations.

The pure parts (outcome mapping, release choice, process bookkeeping, recording into a
real history file) run without a cluster; the subjects and one short run use a real one.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import time
from collections.abc import Iterator

import pytest

from harness.checker import check
from harness.cli import main
from harness.history import HistoryRecorder, pairs, read_history
from harness.subjects import SUBJECT_NAMES, get_subject
from harness.subjects.seed_reference import SeedLease, _acked
from harness.workload import (
    Fused,
    Ops,
    Plan,
    Processes,
    Single,
    fused_kinds,
    lease_value,
    release_action,
)
from rqueue import (
    LeaseLost,
    OutcomeUnknown,
    ProtocolError,
    RqueueError,
    StatementError,
    TransportClosed,
    Unavailable,
)


def acked(exc: RqueueError) -> RqueueError:
    exc.acked = True
    return exc


def ev(msg: str) -> str:
    return json.dumps({"msg": msg})


def msg(lease) -> str | None:
    return None if lease is None else json.loads(lease.event)["msg"]


# -- pure: how a fused call completes --------------------------------------------------------
@pytest.mark.parametrize(
    ("exc", "kinds"),
    [
        (None, ("ok", "ok")),  # returned a lease or None
        (LeaseLost("x"), ("fail", "fail")),  # the ack's definite errors: nothing happened
        (Unavailable("x"), ("fail", "fail")),
        (StatementError("x"), ("fail", "fail")),
        (TransportClosed("x"), ("fail", "fail")),
        (OutcomeUnknown("x"), ("info", "info")),  # the ack's unknown outcome: both unknown
        (ProtocolError("x"), ("info", "info")),
        (RuntimeError("boom"), ("info", "info")),  # unexpected: unknown, like a plain call
        (acked(Unavailable("x")), ("ok", "fail")),  # acked: the claim's definite errors
        (acked(LeaseLost("x")), ("ok", "fail")),
        (acked(StatementError("x")), ("ok", "fail")),
        (acked(TransportClosed("x")), ("ok", "fail")),
        (acked(OutcomeUnknown("x")), ("ok", "info")),  # acked: the claim's unknown outcome
        (acked(ProtocolError("x")), ("ok", "info")),
    ],
)
def test_each_outcome_maps_to_an_ack_and_a_claim_type(exc, kinds):
    assert fused_kinds(exc) == kinds


def test_release_action_fuses_only_running_acks():
    spec_rng = random.Random(3)
    ack, nack, stall = Plan("ack", 0.1), Plan("nack", 0.1), Plan("ack", 5.0, stalled=True)
    assert release_action(nack, False, spec_rng, 1.0) == "nack"
    assert release_action(nack, True, spec_rng, 1.0) == "ack"  # a stopping claimer acks
    assert release_action(ack, True, spec_rng, 1.0) == "ack"
    assert release_action(stall, False, spec_rng, 1.0) == "ack_and_claim"
    state = spec_rng.getstate()
    assert release_action(ack, False, spec_rng, 0.0) == "ack"
    assert spec_rng.getstate() == state  # no draw: runs without it keep their streams
    share = [release_action(ack, False, spec_rng, 0.3) for _ in range(4000)]
    assert 0.27 < share.count("ack_and_claim") / 4000 < 0.33


def test_processes_hand_the_new_lease_to_the_spare_and_retire_after_info():
    ops = Ops(recorder=None)
    procs = Processes(ops)
    main_, spare = procs.main, procs.spare
    assert main_ != spare and procs.spare == spare  # created once, on first use
    procs.after_fused("ok", "ok", leased=True)
    assert (procs.main, procs.spare) == (spare, main_)  # the claimer now holds it there
    procs.after_fused("ok", "ok", leased=False)
    assert (procs.main, procs.spare) == (spare, main_)
    procs.after_fused("info", "info", leased=False)
    assert procs.main not in (main_, spare) and procs.spare not in (main_, spare, procs.main)
    kept = procs.main
    procs.after_fused("ok", "info", leased=False)
    assert procs.main == kept and procs.spare not in (main_, spare, kept)


# -- recording into a real history file ------------------------------------------------------
class Ticks:
    """A clock that advances 1 ms per reading, so each event has its own time."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.001
        return self.t


def seed_lease(n: int) -> SeedLease:
    return SeedLease(n, "g", ev(f"m{n}"), f"w:{n}")


class Claimer:
    """Drives :class:`Processes` and the recordings as the workload does, by hand."""

    def __init__(self, ops: Ops) -> None:
        self.ops, self.procs, self.publisher = ops, Processes(ops), ops.new_process()
        self.value = {"visibility": 30.0, "min_priority": 0}
        self.published = 0

    def publish(self) -> SeedLease:
        self.published += 1
        lease = seed_lease(self.published)
        value = {"group": "g", "msg": msg(lease), "priority": 0}
        Single(self.ops, self.publisher, "publish", value).done(lease.seq, None)
        return lease

    def claim(self, lease: SeedLease) -> SeedLease:
        return Single.claim(self.ops, self.procs.main, self.value).done(lease, None)[1]

    def ack(self, lease: SeedLease) -> None:
        Single(self.ops, self.procs.main, "ack", lease_value(lease)).done(None, None)

    def fused(self, held: SeedLease, result, exc) -> tuple[tuple[str, str], SeedLease | None]:
        procs = self.procs
        kinds, nxt = Fused(self.ops, procs.main, procs.spare, held, self.value).done(result, exc)
        procs.after_fused(*kinds, leased=nxt is not None)
        return kinds, nxt


def test_fused_calls_record_overlapping_pairs_that_read_back_and_check(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path, clock=Ticks()) as rec:
        w = Claimer(Ops(rec))
        held = w.claim(w.publish())
        second = w.publish()
        outcomes: list[tuple[SeedLease | None, BaseException | None]] = [
            (second, None),  # the group's next message: the spare holds it now
            (None, None),
            (None, acked(Unavailable("claim refused"))),
            (None, acked(OutcomeUnknown("claim lost"))),
            (None, LeaseLost("lapsed")),
            (None, OutcomeUnknown("ack lost")),
        ]
        for result, exc in outcomes:
            kinds, nxt = w.fused(held, result, exc)
            assert kinds == fused_kinds(exc)
            if kinds[0] == "fail":  # nothing happened: the lease is still held
                w.ack(held)
            held = nxt or w.claim(w.publish())
        w.ack(held)
    events = read_history(path)  # the format accepts the overlapping operations
    fused = [
        (a, b)
        for a, b in itertools.pairwise(events)
        if (a["f"], a["type"], b["f"], b["type"]) == ("claim", "invoke", "ack", "invoke")
    ]
    assert len(fused) == len(outcomes)
    for claim_inv, ack_inv in fused:
        assert claim_inv["process"] != ack_inv["process"]
        assert claim_inv["time"] <= ack_inv["time"]  # the claim's window starts no later
    done = {inv["index"]: comp["type"] for inv, comp in pairs(events)}
    got = [(done[a["index"]], done[c["index"]]) for c, a in fused]
    assert got == [fused_kinds(exc) for _, exc in outcomes]
    result = check(events)
    assert result["valid"], result["anomalies"]
    assert main(["check", str(path)]) == 0


def test_an_unexpected_error_of_a_fused_call_is_logged_once(tmp_path, caplog):
    with HistoryRecorder(tmp_path / "history.jsonl", clock=Ticks()) as rec:
        w = Claimer(Ops(rec))
        held = w.claim(w.publish())
        with caplog.at_level("WARNING", logger="harness"):
            kinds, _ = w.fused(held, None, RuntimeError("boom"))
    assert kinds == ("info", "info")
    warned = [r for r in caplog.records if "boom" in r.getMessage()]
    assert len(warned) == 1, [r.getMessage() for r in warned]


def test_seed_marks_errors_after_its_ack_as_acked():
    with pytest.raises(Unavailable) as info, _acked():
        raise Unavailable("claim refused")
    assert info.value.acked is True
    with pytest.raises(ValueError), _acked():  # not an rqueue error: left alone
        raise ValueError("bad")
    assert Unavailable("x").acked is False


# -- subjects against a real cluster ---------------------------------------------------------
#: subject -> (first claim, what ack_and_claim of it returns), group "g" holding a then b
NEXT = {
    "rqueue": ("a", "b"),
    "seed-reference": ("a", "b"),
    "kombu": ("a", "b"),  # rqueue through kombu's channel
    "mutant-no-exclusivity": ("a", "b"),
    "mutant-lifo": ("b", "a"),  # newest first
    "mutant-ack-wrong-row": ("a", "a"),  # b deleted instead, a released and leased again
    "mutant-subquery-now": ("a", "b"),  # right on one node; replicas may disagree
    "mutant-blob-text": ("a", "b"),  # ordinary text: as rqueue
    "mutant-zone-blind": ("a", "b"),  # nodes in UTC: as rqueue
    "mutant-no-idempotency": ("a", "b"),  # each write applied once: as rqueue
}


def test_every_subject_is_listed():
    assert set(NEXT) == set(SUBJECT_NAMES)


@pytest.mark.parametrize("name", SUBJECT_NAMES)
def test_every_subject_acks_and_claims_the_next_message(empty_db, name):
    c = get_subject(name).open_sync(empty_db, time.time, 5.0)
    try:
        c.publish("g", ev("a"))
        c.publish("g", ev("b"))
        first = c.claim("w", 30)
        nxt = c.ack_and_claim(first, "w", 30)
        assert (msg(first), msg(nxt)) == NEXT[name]
        assert nxt.token != first.token and nxt.token.startswith("w")
        if name == "mutant-no-exclusivity":
            assert msg(c.claim("w", 30)) == "b"  # it takes the group in flight again
            return
        assert c.claim("w", 30) is None  # the group is in flight again
        assert c.ack_and_claim(nxt, "w", 30) is None  # nothing left to claim
    finally:
        c.close()


@pytest.mark.parametrize("name", ["rqueue", "seed-reference", "kombu"])
def test_async_clients_ack_and_claim_too(empty_db, name):
    async def scenario() -> list[str | None]:
        c = await get_subject(name).open_async(empty_db, time.time, 5.0)
        try:
            await c.publish("g", ev("x1"))
            await c.publish("g", ev("x2"))
            first = await c.claim("w", 30)
            nxt = await c.ack_and_claim(first, "w", 30)
            last = await c.ack_and_claim(nxt, "w", 30)
            return [msg(first), msg(nxt), msg(last)]
        finally:
            await c.close()

    assert asyncio.run(scenario()) == ["x1", "x2", None]


# -- a short real run ------------------------------------------------------------------------
FUSED_RUN = """
description = "every ack is ack_and_claim, with the leader killed and paused"
duration = 10.0

[workload]
ack_and_claim = 1.0
sync_claimers = 3
async_claimers = 3

[[faults]]
kind = "kill-leader"
start = 2.0
duration = 2.0

[[faults]]
kind = "pause-leader"
start = 6.0
duration = 2.0
"""


def claimer_of(value: dict | None) -> str | None:
    """The worker name a token starts with (rqueue and the seed: ``name:...``)."""
    token = (value or {}).get("token")
    return token.split(":", 1)[0] if isinstance(token, str) else None


def fused_pairs(events: list[dict]) -> Iterator[tuple[tuple[dict, dict], tuple[dict, dict]]]:
    """(claim, ack) operations of one claimer on two processes that overlap in time.

    A claimer's own calls are sequential, so only ``ack_and_claim`` makes them overlap.
    Claims are attributed by the token of the lease they returned.
    """
    claims: dict[str, list[tuple[dict, dict]]] = {}
    acks: list[tuple[dict, dict]] = []
    for inv, comp in pairs(events):
        if comp is None:
            continue
        if inv["f"] == "claim" and comp["type"] == "ok" and comp["value"]:
            claims.setdefault(claimer_of(comp["value"]), []).append((inv, comp))
        elif inv["f"] == "ack":
            acks.append((inv, comp))
    for ack in acks:
        for claim in claims.get(claimer_of(ack[0]["value"]), []):
            if claim[0]["time"] <= ack[1]["time"] and ack[0]["time"] <= claim[1]["time"]:
                yield claim, ack


@pytest.mark.slow
def test_a_run_with_ack_and_claim_stays_valid_and_records_fused_pairs(run_scenario, tmp_path):
    path = tmp_path / "fused.toml"
    path.write_text(FUSED_RUN)
    result = run_scenario(str(path), plots=False)
    assert result.exit_code == 0, (result.reason, result.summary, result.check)
    assert result.check["valid"] and result.check["anomalies"]["lost"]["count"] == 0
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["drain"]["complete"], run["drain"]
    history = result.run_dir / "history.jsonl"
    events = read_history(history)
    found = list(fused_pairs(events))
    assert len(found) > 20, len(found)
    for (claim_inv, _), (ack_inv, _) in found:
        assert claim_inv["process"] != ack_inv["process"]
        assert claim_inv["time"] <= ack_inv["time"] and claim_inv["index"] < ack_inv["index"]
    names = {claimer_of(ack_inv["value"]) for _, (ack_inv, _) in found}
    assert any(n.startswith("s") for n in names) and any(n.startswith("a") for n in names)
    assert_fused_leases_are_settled_by_their_claimers_process(events, found)
    assert main(["check", str(history)]) == 0


def assert_fused_leases_are_settled_by_their_claimers_process(events, found) -> None:
    """The first ack/nack/extend of a lease from a fused claim is on the claim's process
    (the checker cuts a lease's window only at its holder's own ack)."""
    holder = {comp["value"]["token"]: inv["process"] for (inv, comp), _ in found}
    first: dict[str, int] = {}
    for e in events:
        token = (e.get("value") or {}).get("token") if e["type"] == "invoke" else None
        if e["f"] in ("ack", "nack", "extend") and token in holder:
            first.setdefault(token, e["process"])
    assert first and all(first[t] == holder[t] for t in first)
