"""The checker on dead-lettering: claims' ``dead_lettered``, ``read-dead-letters`` and the
three anomalies of docs/history-format.md, on small hand-written histories."""

from __future__ import annotations

from typing import Any

from harness.checker import check

LIMIT = 3


class H:
    """A history written step by step: ``op(process, f, invoke value, ok value)``."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.t = 0.0

    def _add(self, p: int, typ: str, f: str, value: Any) -> int:
        self.t += 0.1
        i = len(self.events)
        self.events.append(
            {
                "index": i,
                "time": round(self.t, 3),
                "process": p,
                "type": typ,
                "f": f,
                "value": value,
            }
        )
        return i

    def op(self, p: int, f: str, inv: Any, out: Any = None, typ: str = "ok") -> None:
        self._add(p, "invoke", f, inv)
        self._add(p, typ, f, out if typ == "ok" else inv)

    def publish(self, msg: str, group: str = "g", poison: bool = False) -> None:
        v = {"group": group, "msg": msg, "priority": 0, **({"poison": True} if poison else {})}
        self.op(0, "publish", v, v)

    def claim(self, p: int, msg: str | None, dead: tuple[str, ...] = (), typ: str = "ok") -> None:
        inv = {"visibility": 5.0, "min_priority": 0, "max_deliveries": LIMIT}
        out: dict[str, Any] | None = None
        if msg is not None:
            out = {"group": "g", "msg": msg, "seq": 1, "token": f"{p}-{len(self.events)}"}
        if dead:
            listed = [{"group": "g", "msg": m, "seq": 1, "deliveries": LIMIT} for m in dead]
            out = {**(out or {}), "dead_lettered": listed}
        self.op(p, "claim", inv, out, typ)

    def settle(self, p: int, f: str, msg: str) -> None:
        v = {"group": "g", "msg": msg, "delay": 0}
        self.op(p, f, v, v)

    def counts(self) -> dict[str, int]:
        result = check(self.events)
        return {k: v["count"] for k, v in result["anomalies"].items() if v["count"]}


def poisoned(deliveries: int) -> H:
    """Poison ``a`` delivered and nacked ``deliveries`` times, then ``b`` of its group."""
    h = H()
    h.publish("a", poison=True)
    h.publish("b")
    for _ in range(deliveries):
        h.claim(1, "a")
        h.settle(1, "nack", "a")
    return h


def test_dead_lettered_after_exactly_max_deliveries_and_the_group_carries_on() -> None:
    h = poisoned(LIMIT)
    h.claim(2, "b", dead=("a",))
    h.settle(2, "ack", "b")
    assert h.counts() == {}


def test_dead_lettered_early() -> None:
    h = poisoned(LIMIT - 1)
    h.claim(2, "b", dead=("a",))
    h.settle(2, "ack", "b")
    assert h.counts() == {"early-dead-letter": 1}


def test_a_claim_of_unknown_outcome_may_have_been_a_delivery() -> None:
    h = poisoned(LIMIT - 1)
    h.claim(3, None, typ="info")
    h.claim(2, "b", dead=("a",))
    h.settle(2, "ack", "b")
    assert h.counts() == {}


def test_delivered_once_too_often() -> None:
    h = poisoned(LIMIT + 1)
    h.claim(2, "b", dead=("a",))
    h.settle(2, "ack", "b")
    assert h.counts() == {"over-delivered": 1}


def test_the_next_message_before_the_dead_lettering_is_a_fifo_violation() -> None:
    h = poisoned(LIMIT)
    h.claim(2, "b")
    h.claim(3, None, dead=("a",))
    h.settle(2, "ack", "b")
    assert h.counts() == {"fifo-violation": 1}


def test_dead_lettering_a_live_lease() -> None:
    h = poisoned(LIMIT - 1)
    h.claim(1, "a")  # the last delivery, still held (5 s)
    h.claim(2, "b", dead=("a",))
    h.settle(2, "ack", "b")
    # b leased while a was held is also a second lease on the group
    assert h.counts() == {"dead-letter-while-leased": 1, "duplicate-group-lease": 1}


def test_a_dead_letter_only_the_final_read_saw_needs_a_claim_of_unknown_outcome() -> None:
    def history(unknown_claim: bool, read: bool) -> H:
        h = poisoned(LIMIT)
        if unknown_claim:
            h.claim(3, None, typ="info")  # it may have moved "a", unseen
        h.claim(2, "b")
        h.settle(2, "ack", "b")
        if read:
            dlq = [{"group": "g", "msg": "a", "seq": 1, "deliveries": LIMIT}]
            h.op(4, "read-dead-letters", {}, {"messages": dlq})
        return h

    assert history(unknown_claim=True, read=True).counts() == {}
    # without the read, nothing says "a" was dead-lettered: lost
    assert history(unknown_claim=True, read=False).counts() == {"lost": 1, "fifo-violation": 1}
    # a dead letter that no claim can have moved before "b" was leased: b broke FIFO
    assert history(unknown_claim=False, read=True).counts() == {"fifo-violation": 1}


def test_stats_count_the_dead_letters() -> None:
    h = poisoned(LIMIT)
    h.claim(2, None, dead=("a",))
    h.claim(2, "b")
    h.settle(2, "ack", "b")
    result = check(h.events)
    assert result["valid"]
    assert result["stats"]["dead_lettered"] == 1
    assert result["stats"]["empty_claims"] == 1


def test_a_claim_that_outlasted_its_visibility_may_have_been_a_delivery() -> None:
    h = poisoned(LIMIT - 1)
    h.op(3, "claim", {"visibility": 0.5, "min_priority": 0, "max_deliveries": LIMIT})
    h.events[-1]["time"] = h.t = h.events[-1]["time"] + 1.0  # returned 1.1 s after it began
    h.claim(2, "b", dead=("a",))
    h.settle(2, "ack", "b")
    assert h.counts() == {}


def test_a_claim_whose_invoke_value_is_not_an_object_says_nothing_of_its_visibility() -> None:
    """It once crashed the check (``AttributeError``) once the claims declared a limit.
    Such a claim that leased nothing, quickly, cannot have delivered ``a``: dead-lettered
    after LIMIT - 1 leases, ``a`` went early."""
    h = poisoned(LIMIT - 1)
    h.op(3, "claim", "claim without arguments")
    h.claim(2, "b", dead=("a",))
    h.settle(2, "ack", "b")
    assert h.counts() == {"early-dead-letter": 1}
