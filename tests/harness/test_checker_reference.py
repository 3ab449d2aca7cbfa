"""The checker's sweeps against a brute-force reading of the definitions.

Hypothesis builds random histories of a *wrong* queue (claims hand out any message at
any time, acks succeed or not at random, times on a coarse grid so that ties are
common), and every anomaly count of :func:`harness.checker.check` must equal the one
computed pair by pair, straight from the document's wording.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.checker import CLOCK_TOLERANCE, check
from harness.history import pairs

MSGS = [f"m{i}" for i in range(4)]
GROUP = {m: f"g{i % 2}" for i, m in enumerate(MSGS)}
INF = float("inf")
LIMIT = 2  # the claims' max_deliveries
#: the stored copy a lease, ack or dead letter names: mostly the first, sometimes a second
#: (a publish applied twice), or none
SEQS = st.sampled_from([1, 1, 1, 2, None])


@st.composite
def wrong_histories(draw: st.DrawFn) -> list[dict]:
    rows: list[tuple[float, int, int, str, str, Any]] = []  # time, process, seq, type, f, v
    token = 0
    # a publisher first, so that messages are certainly published one after another
    t = 0.0
    for k, m in enumerate(draw(st.lists(st.sampled_from(MSGS), max_size=4))):
        value = {"group": GROUP[m], "msg": m, "priority": 0, **draw(digests(m))}
        rows.append((t, 99, 2 * k, "invoke", "publish", value))
        t = round(t + 0.1, 1)
        rows.append((t, 99, 2 * k + 1, "ok", "publish", {**value, "seq": 1}))
    for p in range(draw(st.integers(1, 6))):
        t = draw(st.integers(0, 10)) / 10
        held: dict | None = None
        for k in range(draw(st.integers(1, 12))):
            f = draw(st.sampled_from(["publish", "claim", "claim", "ack", "nack", "extend",
                                      "dead-letter", "claim-many", "ack-many"]))  # fmt: skip
            if f in ("ack", "nack", "extend", "ack-many") and held is None:
                f = "claim"
            outcome = draw(st.sampled_from(["ok"] * 6 + ["fail", "info", "open"]))
            duration = draw(st.integers(1, 6)) / 10
            if f == "publish":
                m = draw(st.sampled_from(MSGS))
                inv = {"group": GROUP[m], "msg": m, "priority": 0, **draw(digests(m))}
                delay = draw(st.sampled_from([0, 0, 0.4, 1.0]))
                if delay:
                    inv["delay"] = delay
                done = {**inv, "seq": 1}
            elif f == "claim":
                vis = draw(st.sampled_from([0.3, 0.5, 1.0]))
                inv = {"visibility": vis, "min_priority": 0, "max_deliveries": LIMIT}
                m = draw(st.sampled_from([*MSGS, *MSGS, "ghost", None]))
                token += 1
                g = draw(delivered_group(m))
                lease = {"group": g, "msg": m, "seq": draw(SEQS), "token": f"t{token}",
                         "visibility": vis, **draw(digests(m, wrong=True))}  # fmt: skip
                lease = None if m is None else lease
                done = lease
                if draw(st.integers(0, 3)) == 0:  # the claim also dead-lettered a message
                    d = draw(st.sampled_from(MSGS))
                    dead = [{"group": GROUP[d], "msg": d, "seq": draw(SEQS), "deliveries": LIMIT}]
                    done = {**(lease or {}), "dead_lettered": dead}
                if outcome == "ok" and lease is not None:
                    held = lease
            elif f == "claim-many":  # up to 3 leases, of any groups (a wrong queue)
                vis = draw(st.sampled_from([0.3, 0.5, 1.0]))
                inv = {"visibility": vis, "min_priority": 0, "max_deliveries": LIMIT,
                       "max_messages": 3}  # fmt: skip
                batch = []
                # distinct messages: of two leases of one message in one batch, the format
                # gives the holder's later operations to the second (its next lease of
                # the message), which this reference does not model
                msgs = st.lists(st.sampled_from([*MSGS, "ghost"]), max_size=3, unique=True)
                for m in draw(msgs):
                    token += 1
                    batch.append({"group": draw(delivered_group(m)), "msg": m, "seq": draw(SEQS),
                                  "token": f"t{token}",
                                  **draw(digests(m, wrong=True))})  # fmt: skip
                done = {"leases": batch}
                if outcome == "ok" and batch:
                    held = {**draw(st.sampled_from(batch)), "visibility": vis}
            elif f == "ack-many":  # the held lease, perhaps with another process's
                assert held is not None
                entries = [{k: held[k] for k in ("group", "msg", "seq", "token")}]
                if draw(st.booleans()):
                    m = draw(st.sampled_from(MSGS))
                    other = {"group": GROUP[m], "msg": m, "seq": draw(SEQS), "token": "other"}
                    entries.append(other)
                inv = {"leases": entries}
                kinds = draw(st.lists(st.sampled_from(["ok", "ok", "fail", "info"]),
                                      min_size=len(entries), max_size=len(entries)))  # fmt: skip
                done = {**inv, "outcomes": kinds}
            elif f == "dead-letter":
                m = draw(st.sampled_from(MSGS))
                inv = done = {"group": GROUP[m], "msg": m}
                if held is not None and draw(st.booleans()):  # the holder's, by msg alone
                    inv = done = {"group": held["group"], "msg": held["msg"]}
            else:
                assert held is not None
                inv = {k: held[k] for k in ("group", "msg", "seq", "token")}
                if f == "nack":
                    inv["delay"] = 0
                if f == "extend":
                    inv["visibility"] = draw(st.sampled_from([0.3, 1.0, 2.0]))
                done = inv
            rows.append((t, p, 2 * k, "invoke", f, inv))
            if outcome == "open":
                break
            t = round(t + duration, 1)
            rows.append((t, p, 2 * k + 1, outcome, f, done if outcome == "ok" else inv))
            if outcome == "info":
                break
            t = round(t + draw(st.integers(0, 8)) / 10, 1)
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return [
        {"index": i, "time": t, "process": p, "type": typ, "f": f, "value": v}
        for i, (t, p, _, typ, f, v) in enumerate(rows)
    ]


def digests(m: str, wrong: bool = False) -> st.SearchStrategy[dict]:
    """A body digest of ``m`` (none, its own, or with ``wrong`` another body's)."""
    choices = [{}, {"digest": f"d-{m}"}, {"digest": f"d-{m}"}]
    return st.sampled_from([*choices, {"digest": "d-other"}] if wrong else choices)


def delivered_group(m: str | None) -> st.SearchStrategy[str]:
    """The group a lease of ``m`` names: mostly its own, sometimes a corrupted one."""
    own = GROUP.get(m, "g0")  # type: ignore[arg-type]
    return st.sampled_from([own, own, own, own, "A"])


def reference(events: list[dict]) -> dict[str, int]:
    """Each anomaly's count, by brute force over the definitions."""
    calls = [
        {"f": inv["f"], "p": inv["process"], "inv": inv["time"], "v": inv["value"],
         "type": "open" if c is None else c["type"],
         "done": INF if c is None else c["time"], "out": None if c is None else c["value"]}
        for inv, c in pairs(events)
    ]  # fmt: skip
    # a batch claim is a claim per lease, a batch ack an ack per lease with its outcome
    ops = [o for o in calls if o["f"] not in ("claim-many", "ack-many")]
    same_batch = 0  # a second (third …) lease of one group in one claim-many
    for o in calls:
        if o["f"] == "claim-many" and o["type"] == "ok":
            for x in o["out"]["leases"]:
                ops.append({**o, "f": "claim", "out": {**x, "visibility": o["v"]["visibility"]}})
            groups = [x["group"] for x in o["out"]["leases"]]
            same_batch += len(groups) - len(set(groups))
        elif o["f"] == "ack-many":
            kinds = (
                o["out"]["outcomes"] if o["type"] == "ok" else [o["type"]] * len(o["v"]["leases"])
            )
            for x, kind in zip(o["v"]["leases"], kinds, strict=True):
                ops.append({**o, "f": "ack", "v": x, "type": kind, "out": x})
    pubs = [o for o in ops if o["f"] == "publish"]
    claims = [o for o in ops if o["f"] == "claim"]
    every_claim = [o for o in calls if o["f"] in ("claim", "claim-many")]  # one per call
    # what a claim dead-lettered: an ok dead-letter spanning the claim, by no holder
    dead = [
        {"f": "dead-letter", "p": None, "by": c["p"], "inv": c["inv"], "done": c["done"],
         "v": {"msg": d["msg"], "seq": d["seq"]}, "type": "ok"}
        for c in claims if c["type"] == "ok" and c["out"]
        for d in c["out"].get("dead_lettered", ())
    ]  # fmt: skip
    settles = [o for o in ops if o["f"] in ("ack", "dead-letter") and o["type"] != "fail"]
    acks_ok = [o for o in ops if o["f"] in ("ack", "dead-letter") and o["type"] == "ok"]
    settles, acks_ok = settles + dead, acks_ok + dead
    leases = [c for c in claims if c["type"] == "ok" and c["out"] and "group" in c["out"]]
    unknown = [  # may have delivered unseen: unknown outcome, or outlasted its visibility
        c for c in every_claim if c["type"] in ("info", "open")
        or (c["type"] == "ok" and c["done"] - c["inv"] >= c["v"]["visibility"])
    ]  # fmt: skip

    def holder_of(o: dict) -> dict | None:
        """The lease an ack/nack/extend/dead-letter acts on: its process's latest lease of
        its msg (none if the operation names another token)."""
        mine = [x for x in leases if x["p"] == o["p"] and x["done"] <= o["inv"]
                and x["out"]["msg"] == o["v"]["msg"]]  # fmt: skip
        if not mine:
            return None
        x = max(mine, key=lambda x: x["done"])
        return x if o["v"].get("token", x["out"]["token"]) == x["out"]["token"] else None

    def holder_ops(lease: dict, fs: tuple[str, ...]) -> list[dict]:
        return [o for o in ops if o["f"] in fs and o["p"] == lease["p"] and holder_of(o) is lease]

    def vis(lease: dict) -> float:
        return lease["out"]["visibility"]

    def end(lease: dict) -> float:
        stretched = max([lease["inv"] + vis(lease)] + [
            e["inv"] + e["v"]["visibility"] for e in holder_ops(lease, ("extend",))
            if e["type"] == "ok"])  # fmt: skip
        cut = min([INF] + [a["inv"] for a in holder_ops(lease, ("ack", "nack", "dead-letter"))])
        return min(stretched, cut)

    def expiry(lease: dict) -> float:
        return max([lease["done"] + vis(lease)] + [
            (e["done"] if e["type"] == "ok" else e["inv"]) + e["v"]["visibility"]
            for e in holder_ops(lease, ("extend",)) if e["type"] != "fail"])  # fmt: skip

    msg = lambda o: o["out"]["msg"]  # noqa: E731
    seq = lambda o: o["out"].get("seq")  # noqa: E731
    copies: dict[str, set[int]] = {}  # msg -> the seqs its leases and dead letters name
    for x in leases:
        if msg(x) is not None and seq(x) is not None:
            copies.setdefault(msg(x), set()).add(seq(x))
    for d in dead:
        if d["v"]["seq"] is not None:
            copies.setdefault(d["v"]["msg"], set()).add(d["v"]["seq"])
    duplicated = [
        m for m, seqs in copies.items()
        if any(p["v"]["msg"] == m for p in pubs) and len(seqs) >= 2
        and len(seqs) > len([p for p in pubs if p["v"]["msg"] == m and p["type"] != "fail"])
    ]  # fmt: skip
    lost = {
        p["v"]["msg"] for p in pubs
        if p["type"] == "ok" and not any(a["v"]["msg"] == p["v"]["msg"] for a in settles)
    }  # fmt: skip
    dup = [
        b for b in leases
        if any(a is not b and a["out"]["group"] == b["out"]["group"]
               and b["inv"] >= a["done"] and b["done"] <= end(a) for a in leases)
    ]  # fmt: skip

    def pub_ok(m: str) -> float:
        return min([INF] + [p["done"] for p in pubs if p["v"]["msg"] == m and p["type"] == "ok"])

    def pub_inv(m: str) -> float:
        return min([INF] + [p["inv"] for p in pubs if p["v"]["msg"] == m])

    fifo = [
        b for b in leases
        if pub_inv(msg(b)) < INF and any(  # b published (else it is "unexpected")
            GROUP[a] == GROUP[msg(b)] and pub_ok(a) < pub_inv(msg(b))
            and not any(s["v"]["msg"] == a and s["inv"] < b["done"] for s in settles)
            for a in MSGS)
    ]  # fmt: skip
    dal = [  # an ack of another copy (both name a seq, not the same) does not count
        c for c in leases
        if any(a["v"]["msg"] == msg(c) and c["inv"] > a["done"]
               and (None in (a["v"].get("seq"), seq(c)) or a["v"].get("seq") == seq(c))
               for a in acks_ok)
    ]  # fmt: skip
    unexpected = [c for c in leases if not any(p["v"]["msg"] == msg(c) for p in pubs)]
    corrupted = [
        c for c in leases
        if c not in unexpected and (
            all(str(p["v"]["group"]) != str(c["out"]["group"])
                for p in pubs if p["v"]["msg"] == msg(c))
            or ("digest" in c["out"] and any(
                "digest" in p["v"] for p in pubs if p["v"]["msg"] == msg(c))
                and all(p["v"].get("digest") != c["out"]["digest"]
                        for p in pubs if p["v"]["msg"] == msg(c))))
    ]  # fmt: skip
    stale = [
        a for lease in leases for a in holder_ops(lease, ("ack", "nack", "dead-letter"))
        if a["type"] == "ok" and any(
            o["p"] != lease["p"] and msg(o) == msg(lease) and seq(o) == seq(lease)
            and o["inv"] >= expiry(lease) and o["done"] <= a["inv"] for o in leases)
    ]  # fmt: skip
    early = [
        d for d in dead
        if len([x for x in leases if msg(x) == d["v"]["msg"] and x["inv"] < d["done"]])
        + len([c for c in unknown if c["inv"] < d["done"]]) < LIMIT
    ]  # fmt: skip
    over = {
        (msg(x), seq(x)) for x in leases
        if len([y for y in leases if (msg(y), seq(y)) == (msg(x), seq(x))]) > LIMIT
    }  # fmt: skip
    while_leased = [
        (d, x) for d in dead for x in leases
        if msg(x) == d["v"]["msg"] and x["p"] != d["by"]
        and d["inv"] >= x["done"] and d["done"] <= end(x)
    ]  # fmt: skip
    delayed = {p["v"]["msg"] for p in pubs if p["v"].get("delay", 0) > 0}
    early_delivery = [
        c for c in leases
        if msg(c) in delayed and c["done"] + CLOCK_TOLERANCE < min(
            p["inv"] + p["v"].get("delay", 0) for p in pubs if p["v"]["msg"] == msg(c))
    ]  # fmt: skip
    return {
        "lost": len(lost),
        "duplicated": len(duplicated),
        "duplicate-group-lease": len(dup) + same_batch,
        "fifo-violation": len(fifo),
        "delivered-after-ack": len(dal),
        "unexpected": len(unexpected),
        "corrupted": len(corrupted),
        "stale-ack-accepted": len(stale),
        "early-delivery": len(early_delivery),
        "early-dead-letter": len(early),
        "over-delivered": len(over),
        "dead-letter-while-leased": len(while_leased),
        "replica-divergence": 0,  # compared from replicas.json, never from a history
    }


@settings(max_examples=300, deadline=None)
@given(wrong_histories())
def test_counts_match_the_definitions(events: list[dict]) -> None:
    result = check(events)
    got = {k: v["count"] for k, v in result["anomalies"].items()}
    assert got == reference(events)
    assert result["valid"] == (not any(got.values()))
