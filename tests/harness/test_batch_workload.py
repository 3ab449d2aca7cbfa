"""Batch claims (``claim_many``/``ack_many``) and delayed publishes in the workload.

The scenario keys and the claimer's batch loop run without a cluster (the loop is a
generator of steps: here a script answers its calls, and the history is a real file);
one short run drives rqueue on the embedded cluster.
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest

from harness.checker import check
from harness.history import HistoryRecorder, pairs, read_history
from harness.scenario import ScenarioError, WorkloadSpec, parse_scenario
from harness.subjects import get_subject
from harness.workload import ClientCall, Processes, Single, Wait, Workload
from harness.workload.record import perform, published
from harness.workload.workers import drawn, takes_batches, takes_delay
from rqueue import LeaseLost, OutcomeUnknown, Unavailable


def _scenario(**workload: Any) -> Any:
    return parse_scenario("t", {"description": "d", "workload": workload}, "t.toml")


def test_batch_and_delay_keys_are_off_by_default_and_checked() -> None:
    d = _scenario().workload
    assert (d.batch, d.batch_size, d.delay, d.delay_range) == (0.0, 10, 0.0, (0.2, 2.0))
    s = _scenario(batch=0.3, batch_size=4, delay=0.1, delay_range=[0.5, 1.5]).workload
    assert (s.batch, s.batch_size, s.delay, s.delay_range) == (0.3, 4, 0.1, (0.5, 1.5))
    for bad in ({"batch": 2}, {"batch_size": 0}, {"delay": -0.1}, {"delay_range": [2, 1]}):
        with pytest.raises(ScenarioError, match=next(iter(bad))):
            _scenario(**bad)


@dataclasses.dataclass
class FakeLease:
    seq: int
    group_id: str
    event: str
    token: str


class Script:
    """Answers a batch claimer's calls: ``claim_many`` hands out the published messages;
    ``ack_many`` acks the first lease, reports the second lost, the third unknown …"""

    OUTCOMES = (None, LeaseLost("lapsed"), OutcomeUnknown("no reply"))

    def __init__(self, leases: list[FakeLease], raises: BaseException | None = None) -> None:
        self.leases, self.raises = leases, raises
        self.calls: list[str] = []

    def __call__(self, step: ClientCall) -> Any:
        def fn(*args: Any) -> Any:
            self.calls.append(step.method)
            if step.method == "claim_many":
                assert step.kwargs["max_messages"] == 10
                return list(self.leases)
            if step.method == "ack_many":
                if self.raises is not None:
                    raise self.raises
                return [self.OUTCOMES[i % 3] for i in range(len(args[0]))]
            return None

        return perform(step.record, fn, *step.args)


def _batch_history(tmp_path: Path, raises: BaseException | None = None) -> tuple:
    spec = WorkloadSpec(
        batch=1.0, stall_probability=0, nack_probability=0, nack_delay_probability=0
    )
    path = tmp_path / "history.jsonl"
    with HistoryRecorder(path) as rec:
        w = Workload(spec, get_subject("rqueue"), [], rec, seed=3)
        leases = []
        for i in range(6):
            value = {"group": f"g{i}", "msg": f"m{i}", "priority": 0}
            Single(w.ops, 0, "publish", value, published).done(i + 1, None)
            leases.append(FakeLease(i + 1, f"g{i}", json.dumps({"msg": f"m{i}"}), f"t{i}"))
        procs = Processes(w.ops)
        first = procs.main
        script = Script(leases, raises)
        steps = w._batch_steps("s0", random.Random(1), procs)
        reply = None
        while True:
            try:
                step = steps.send(reply)
            except StopIteration:
                break
            reply = None if isinstance(step, Wait) else script(step)
    return read_history(path), script, procs.main != first


def test_a_batch_records_every_lease_and_each_ack_outcome(tmp_path: Path) -> None:
    events, script, retired = _batch_history(tmp_path)
    ops = [(inv, comp) for inv, comp in pairs(events) if inv["f"] != "publish"]
    (claim_inv, claim_ok), *rest = ops
    assert claim_inv["value"] == {"visibility": 3.0, "min_priority": 0, "max_messages": 10}
    assert [x["msg"] for x in claim_ok["value"]["leases"]] == [f"m{i}" for i in range(6)]
    assert all(x["visibility"] == 3.0 for x in claim_ok["value"]["leases"])
    singles = [inv["value"]["msg"] for inv, _ in rest if inv["f"] == "ack"]
    [(many_inv, many_ok)] = [(i, c) for i, c in rest if i["f"] == "ack-many"]
    together = [x["msg"] for x in many_inv["value"]["leases"]]
    assert sorted(singles + together) == [f"m{i}" for i in range(6)]  # each let go once
    assert singles and len(together) >= 3  # the seed gives both kinds
    assert (
        many_ok["value"]["outcomes"]
        == ["ok", "fail", "info", "ok", "fail", "info"][: len(together)]
    )
    assert retired  # an unknown outcome retires the process that made the call
    assert {inv["process"] for inv, _ in ops} == {claim_inv["process"]}
    assert script.calls[0] == "claim_many" and script.calls[-1] == "ack_many"
    result = check(events)  # the acks that failed leave their messages unacknowledged
    assert result["anomalies"]["lost"]["count"] == len(together[1::3])
    assert all(v["count"] == 0 for k, v in result["anomalies"].items() if k != "lost")


@pytest.mark.parametrize(
    ("exc", "kind"), [(Unavailable("x"), "fail"), (OutcomeUnknown("x"), "info")]
)
def test_an_ack_many_that_raises_completes_as_one_operation(
    tmp_path: Path, exc: BaseException, kind: str
) -> None:
    events, _, retired = _batch_history(tmp_path, exc)
    [comp] = [c for i, c in pairs(events) if i["f"] == "ack-many"]
    assert comp["type"] == kind and "outcomes" not in comp["value"]
    assert retired == (kind == "info")
    check(events)  # readable by the checker


class NoBatches:
    def publish(self, group_id: str, event: str, priority: int = 0) -> int:
        return 1

    def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> None:
        return None


class Batches(NoBatches):
    def publish(
        self, group_id: str, event: str, priority: int = 0, dedup_id: str | None = None,
        *, delay: float = 0,
    ) -> int:  # fmt: skip
        return 1

    def claim_many(self, worker_id: str, visibility: float, max_messages: int = 10) -> list:
        return []

    def ack_many(self, leases: list) -> list:
        return []


def test_claimers_and_publishes_are_downgraded_when_the_subject_lacks_the_calls(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert takes_batches(Batches()) and takes_delay(Batches())
    assert not takes_batches(NoBatches()) and not takes_delay(NoBatches())
    spec = WorkloadSpec(batch=1.0, long_poll=1.0)
    with HistoryRecorder(tmp_path / "h.jsonl") as rec:
        w = Workload(spec, get_subject("rqueue"), [], rec)
    assert w.batchers == set(w.claimer_names) and not w.long_pollers  # batches win
    w._can_batch("s0", Batches())
    with caplog.at_level("WARNING", logger="harness"):
        w._can_batch("s1", NoBatches())
    assert "s0" in w.batchers and "s1" not in w.batchers
    assert "not batching" in caplog.text
    off = Workload(WorkloadSpec(), get_subject("rqueue"), [], rec)
    assert not off.batchers  # the default: nobody batches


BATCH_RUN = """
description = "every claimer takes batches, some publishes delayed, the leader killed"
duration = 10.0

[workload]
batch = 1.0
batch_size = 5
delay = 0.2
delay_range = [0.2, 1.0]

[[faults]]
kind = "kill-leader"
start = 3.0
duration = 3.0
"""


@pytest.mark.slow
def test_a_run_with_batches_stays_valid(run_scenario: Any, tmp_path: Path) -> None:
    path = tmp_path / "batch.toml"
    path.write_text(BATCH_RUN)
    result = run_scenario(str(path), plots=False)
    assert result.exit_code == 0, (result.reason, result.summary, result.check)
    ops = result.check["stats"]["ops"]
    assert ops["claim-many"]["ok"] > 10 and ops["ack-many"]["ok"] > 5, ops
    events = read_history(result.run_dir / "history.jsonl")
    sizes = [
        len(c["value"]["leases"])
        for i, c in pairs(events)
        if i["f"] == "claim-many" and c is not None and c["type"] == "ok"
    ]
    assert max(sizes) > 1, sizes  # some batch held several leases at once


def test_a_share_above_zero_draws_at_least_one_batch_claimer() -> None:
    names = [f"s{i}" for i in range(6)]
    assert drawn(names, 0.0, "7-{}-batch") == set()
    assert drawn(names, 1.0, "7-{}-batch") == set(names)
    for seed in range(50):  # 0.7 ** 6: about one seed in eight draws nobody at 0.3
        assert drawn(names, 0.3, f"{seed}-{{}}-batch")
