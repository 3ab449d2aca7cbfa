"""Dead-lettering in histories: how the workload records it, and how the checker judges it.

A queue with ``max_deliveries`` moves a message out when a claim reaches it after that
many claims; nobody asks for it. The harness records it on the claim that did it: the
claim's ``ok`` value lists the moved messages in ``dead_lettered`` (the transport's
``on_dead_letter`` callback, collected per claim through a context variable, so
threads and asyncio tasks sharing one transport each see their own claim's). A claim
whose outcome is unknown may have moved messages unseen; so after the drain the
workload reads the whole dead-letter queue once (``read-dead-letters``).

docs/history-format.md defines the operation and the three anomalies found here:

* ``early-dead-letter``: dead-lettered although fewer than ``max_deliveries`` claims
  can have leased it: its ``ok`` leases plus every claim that may have delivered unseen
  (unknown outcome, or ``ok`` after at least its visibility) invoked before the
  dead-lettering returned are still fewer;
* ``over-delivered``: leased (``ok``) more than ``max_deliveries`` times;
* ``dead-letter-while-leased``: a claim dead-lettered a message inside another
  process's certain window on it (fenced like an ack: a live lease is never moved).
"""

from __future__ import annotations

import contextvars
import json
from bisect import bisect_left
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checker import History

READ_F = "read-dead-letters"
ANOMALIES = ("early-dead-letter", "over-delivered", "dead-letter-while-leased")

# -- recording ------------------------------------------------------------------------------
_CURRENT: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar(
    "harness_dead_letters", default=None
)


def begin() -> None:
    """A claim starts in this thread or task: collect what it dead-letters."""
    _CURRENT.set([])


def note(dead: Any) -> None:
    """The transport's ``on_dead_letter``: remember ``dead`` for the current claim."""
    found = _CURRENT.get()
    if found is not None:
        found.append(describe(dead))


def taken() -> list[dict[str, Any]]:
    """What the current claim dead-lettered (and stop collecting)."""
    found = _CURRENT.get() or []
    _CURRENT.set(None)
    return found


def describe(dead: Any) -> dict[str, Any]:
    """A dead letter as the history records it: ``group``, ``msg``, ``seq``, ``deliveries``."""
    try:
        doc = json.loads(dead.event)
    except (TypeError, ValueError):
        doc = None
    msg = doc.get("msg") if isinstance(doc, dict) else None
    return {"group": dead.group_id, "msg": msg, "seq": dead.seq, "deliveries": dead.deliveries}


def is_poison(event: str) -> bool:
    try:
        doc = json.loads(event)
    except (TypeError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("poison") is True


def read_queue(client: Any, call: Any, process: int) -> None:
    """Record the whole dead-letter queue once (``read-dead-letters``) and close ``client``;
    ``call`` is the workload's ``_call(process, f, value, fn, ok_value)``."""

    def read_all() -> list[Any]:
        found: list[Any] = []
        while True:
            page = client.dead_letters(after=found[-1].seq if found else 0, limit=1000)
            found.extend(page)
            if len(page) < 1000:
                return found

    def ok_value(_value: Any, found: list[Any]) -> dict[str, Any]:
        return {"messages": [describe(d) for d in found]}

    try:
        call(process, READ_F, {}, read_all, ok_value)
    finally:
        client.close()


# -- checking -------------------------------------------------------------------------------
class Dead:
    """One dead-lettering: by a claim (``ci``/``co``, its process) or seen by a read."""

    __slots__ = ("ci", "co", "i_inv", "i_ok", "msg", "process")

    def __init__(self, msg: Any, inv: dict, ok: dict, by_claim: bool) -> None:
        self.msg = msg
        self.ci, self.co = inv["time"], ok["time"]
        self.i_inv, self.i_ok = inv["index"], ok["index"]
        self.process = inv["process"] if by_claim else None


def absorb(h: History, claims: list[tuple[dict, dict | None, str]]) -> None:
    """Turn the claims' ``dead_lettered`` lists and the reads into acknowledgements.

    A claim's dead letter is an ``ok`` dead-letter operation spanning the claim. A message
    only a read saw was moved by a claim of unknown outcome: its possible acknowledgement
    starts at the earliest such claim invoked after its first publish (the read's own
    invoke if there is none), and it is certainly acknowledged by the read's ``ok``.
    """
    h.dead = []
    h.max_deliveries = None
    h.unknown_claims = h.unseen_claims = []
    for inv, comp, typ in claims:
        value = inv.get("value")
        if type(value) is dict and "max_deliveries" in value:
            limit = value["max_deliveries"]
            if type(limit) is int and limit > 0:
                h.max_deliveries = limit
        if typ != "ok":
            continue
        done = comp.get("value")  # type: ignore[union-attr]
        if type(done) is not dict or "dead_lettered" not in done:
            continue
        for d in done["dead_lettered"] or ():
            if isinstance(d, dict) and "msg" in d:
                _acknowledge(h, d["msg"], inv["time"], inv["index"], comp["time"], comp["index"])  # type: ignore[index]
                h.dead.append(Dead(d["msg"], inv, comp, by_claim=True))  # type: ignore[arg-type]
    if h.max_deliveries is not None:  # only the dead-letter checks need these
        h.unseen_claims = sorted(i["time"] for i, c, typ in claims if _unseen(i, c, typ))
    if h.dead_reads:
        h.unknown_claims = sorted(i["time"] for i, _, typ in claims if typ in ("info", "open"))
    seen = {d.msg for d in h.dead}
    for inv, comp in h.dead_reads:
        for d in comp.get("value", {}).get("messages") or ():
            msg = d.get("msg") if isinstance(d, dict) else None
            if msg is None or msg in seen:
                continue
            seen.add(msg)
            published = h.pub_inv.get(msg, (inv["time"], -1))[0]
            k = bisect_left(h.unknown_claims, published)
            start = h.unknown_claims[k] if k < len(h.unknown_claims) else inv["time"]
            _acknowledge(h, msg, start, inv["index"], comp["time"], comp["index"])
            h.dead.append(Dead(msg, inv, comp, by_claim=False))


def _unseen(inv: dict, comp: dict | None, typ: str) -> bool:
    """Whether the claim may have delivered a message the history does not show: its
    outcome is unknown, or it took at least its visibility. (A claim retried inside the
    queue after an unknown outcome may have leased a message that then lapsed and went to
    another worker before the retry: possible only when the claim outlasted a lease.)"""
    if typ in ("info", "open"):
        return True
    if typ != "ok" or comp is None:
        return False
    vis = (comp.get("value") or {}).get("visibility")
    if vis is None:
        vis = (inv.get("value") or {}).get("visibility")
    return isinstance(vis, int | float) and comp["time"] - inv["time"] >= vis


def _acknowledge(h: History, msg: Any, t_inv: float, i: int, t_ok: float, j: int) -> None:
    h.dead_lettered.add(msg)
    first = h.settled.get(msg)
    if first is None or t_inv < first[0]:
        h.settled[msg] = (t_inv, i, j)
    done = h.acked.get(msg)
    if done is None or t_ok < done[0]:
        h.acked[msg] = (t_ok, i, j)


def find_early(h: History) -> list[list[int]]:
    """Dead-lettered before ``max_deliveries`` claims can have leased it."""
    limit = getattr(h, "max_deliveries", None)
    if limit is None:
        return []
    if not h.dead:
        return []
    found = []
    leases = _leases_by_msg(h)
    for d in h.dead:
        before = [x for x in leases.get(d.msg, ()) if x.ci < d.co]
        unknown = bisect_left(h.unseen_claims, d.co)
        if len(before) + unknown < limit:
            found.append([x for y in before for x in (y.i_inv, y.i_ok)] + [d.i_inv, d.i_ok])
    return found


def find_over_delivered(h: History) -> list[list[int]]:
    """A message leased more than ``max_deliveries`` times."""
    limit = getattr(h, "max_deliveries", None)
    if limit is None:
        return []
    found = []
    for leases in _leases_by_msg(h).values():
        if len(leases) > limit:
            leases.sort(key=lambda x: x.co)
            found.append([i for x in leases[: limit + 1] for i in (x.i_inv, x.i_ok)])
    return found


def find_while_leased(h: History) -> list[list[int]]:
    """A claim dead-lettered a message inside another process's certain window on it."""
    if not h.dead:
        return []
    found = []
    leases = _leases_by_msg(h)
    for d in h.dead:
        if d.process is None:
            continue
        for x in leases.get(d.msg, ()):
            if x.process != d.process and d.ci >= x.co and d.co <= x.end:
                found.append([x.i_inv, x.i_ok, d.i_inv, d.i_ok])
    return found


def _leases_by_msg(h: History) -> dict[Any, list]:
    out: dict[Any, list] = {}
    for x in h.leases:
        out.setdefault(x.msg, []).append(x)
    return out


FINDERS = {
    "early-dead-letter": find_early,
    "over-delivered": find_over_delivered,
    "dead-letter-while-leased": find_while_leased,
}
