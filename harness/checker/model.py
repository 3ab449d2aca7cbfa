"""The model a history is checked against: its operations paired, its leases, each
message's publishes and acknowledgements, and its dead-letterings, built in one pass.

Every field the finders read is declared in :class:`HistoryModel`; nothing is added to
it from outside.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..history import (
    ACK_MANY,
    CLAIM_MANY,
    CLIENT_FS,
    READ_DEAD_LETTERS,
    HistoryFormatError,
    completion_error,
    invoke_error,
)

INF = math.inf
#: Seconds by which two readings of the queue's clock may disagree with the real time
#: elapsed between them: rqueue's default ``clock_tolerance`` (0.25 s, how far apart the
#: nodes' clocks may be) plus the rounding of its server timestamps (0.0864 s), rounded
#: up. A delayed message counts as delivered early only beyond it.
CLOCK_TOLERANCE = 0.35


class Lease:
    """A claim that returned a message, with what its holder did with it."""

    __slots__ = (
        "ci",
        "co",
        "cut",
        "digest",
        "expiry",
        "group",
        "i_inv",
        "i_ok",
        "msg",
        "process",
        "releases",
        "stretch",
        "token",
    )

    def __init__(
        self,
        inv: dict,
        ok: dict,
        group: Any,
        msg: Any,
        token: Any,
        vis: float,
        digest: str | None = None,
    ) -> None:
        self.process = inv["process"]
        self.i_inv, self.i_ok = inv["index"], ok["index"]
        self.ci, self.co = inv["time"], ok["time"]
        self.group, self.msg, self.token = group, msg, token
        self.digest = digest  # of the delivered body, when the history records it
        self.stretch = self.ci + vis  # certain end before the cut: ok extends only
        # for stale acks: the latest the lease can end (it may apply as late as claim ok)
        self.expiry = self.co + vis
        self.cut = INF  # invoke of the holder's first ack/nack
        self.releases: list[tuple[float, int, int]] = []  # ok acks/nacks: (invoke, i, i)

    @property
    def end(self) -> float:
        """End of the certain validity window."""
        return min(self.stretch, self.cut)


class Dead:
    """One dead-lettering: by a claim (``ci``/``co``, its process) or seen by a read."""

    __slots__ = ("ci", "co", "i_inv", "i_ok", "msg", "process")

    def __init__(self, msg: Any, inv: dict, ok: dict, by_claim: bool) -> None:
        self.msg = msg
        self.ci, self.co = inv["time"], ok["time"]
        self.i_inv, self.i_ok = inv["index"], ok["index"]
        self.process = inv["process"] if by_claim else None


class HistoryModel:
    """What the finders need, built in one pass that also pairs the operations.

    Raises :class:`HistoryFormatError` (line = index + 1) where operations do not pair
    up as :func:`harness.history.pairs` requires, or a value lacks what a check needs.
    """

    def __init__(self, events: Sequence[dict]) -> None:
        self.ops: Counter[tuple[str, str]] = Counter()
        self.latencies: dict[str, list[float]] = {f: [] for f in CLIENT_FS}
        self.pub_inv: dict[Any, tuple[float, int]] = {}  # msg -> earliest publish invoke
        self.pub_ok: dict[Any, tuple[float, int, int]] = {}  # msg -> earliest publish ok
        self.pub_group: dict[Any, Any] = {}
        #: msg -> the distinct (group as text, body digest or None) of its publishes
        self.pub_forms: dict[Any, list[tuple[str, str | None]]] = {}
        #: msg -> (earliest publish invoke + its delay, that publish's invoke index)
        self.ready: dict[Any, tuple[float, int]] = {}
        self.delayed: set[Any] = set()  # messages with a publish of positive ``delay``
        self.settled: dict[Any, tuple[float, int, int]] = {}  # msg -> first ok/info ack invoke
        self.acked: dict[Any, tuple[float, int, int]] = {}  # msg -> earliest ack ok
        self.dead_lettered: set[Any] = set()
        self.dead_reads: list[tuple[dict, dict]] = []  # ok reads of the dead-letter queue
        self.dead: list[Dead] = []  # every dead-lettering, by a claim or seen by a read
        self.max_deliveries: int | None = None  # the queue's limit, if the claims say one
        #: invoke times of the claims that may have delivered unseen (unknown outcome, or
        #: as long as their visibility): only when ``max_deliveries`` is known
        self.unseen_claims: list[float] = []
        #: invoke times of the claims of unknown outcome: only when the queue was read
        self.unknown_claims: list[float] = []
        claims: list[tuple[dict, dict | None, str]] = []  # every claim, for dead letters
        self.leases: list[Lease] = []
        self.empty_claims = 0
        self.nemesis: list[dict] = []
        self.duration = events[-1]["time"] if events else 0.0
        self._holding: dict[tuple[int, Any], Lease] = {}
        open_ops: dict[int, dict] = {}
        retired: dict[int, int] = {}
        ops, latencies = self.ops, self.latencies
        publish, claim, release, extend = self._publish, self._claim, self._release, self._extend
        claim_many, ack_many = self._claim_many, self._ack_many
        for ev in events:
            p = ev["process"]
            typ = ev["type"]
            if type(p) is not int:  # "nemesis"
                self.nemesis.append(ev)
                continue
            if typ == "invoke":
                if p in open_ops or p in retired:
                    raise invoke_error(ev, open_ops.get(p), retired.get(p))
                open_ops[p] = ev
                continue
            inv = open_ops.pop(p, None)
            f = ev["f"]
            if inv is None or inv["f"] != f:
                raise completion_error(ev, inv)
            if typ == "info":
                retired[p] = ev["index"]
            elif typ == "ok":
                latencies[f].append(ev["time"] - inv["time"])
            ops[f, typ] += 1
            if f == "claim":
                claim(inv, ev, typ)
                claims.append((inv, ev, typ))
            elif f == CLAIM_MANY:
                claim_many(inv, ev, typ)
                claims.append((inv, ev, typ))
            elif f == ACK_MANY:
                ack_many(inv, ev, typ)
            elif f == READ_DEAD_LETTERS:
                if typ == "ok":
                    self.dead_reads.append((inv, ev))
            elif f == "publish":
                publish(inv, ev, typ)
            elif f == "extend":
                extend(inv, ev, typ)
            else:
                release(inv, ev, typ)
        for inv in sorted(open_ops.values(), key=lambda e: e["index"]):
            f = inv["f"]
            ops[f, "open"] += 1
            if f == "publish":
                publish(inv, None, "open")
            elif f == "extend":
                extend(inv, None, "open")
            elif f == "claim" or f == CLAIM_MANY:
                claims.append((inv, None, "open"))
            elif f == ACK_MANY:
                ack_many(inv, None, "open")
            elif f != READ_DEAD_LETTERS:
                release(inv, None, "open")
        self._absorb_dead_letters(claims)

    def _publish(self, inv: dict, comp: dict | None, typ: str) -> None:
        value = inv.get("value")
        try:
            msg, group = value["msg"], value["group"]  # type: ignore[index]
        except (TypeError, KeyError):
            msg = group = None
        if (type(msg) is not str and type(msg) is not int) or (
            type(group) is not str and type(group) is not int
        ):
            msg, group = _key(value, "msg", inv), _key(value, "group", inv)
        form = (_text(group), _digest(value, inv))
        forms = self.pub_forms.get(msg)
        if forms is None:
            self.pub_forms[msg] = [form]
        elif form not in forms:
            forms.append(form)
        t = inv["time"]
        delay = value.get("delay", 0)  # type: ignore[union-attr]
        if delay is None:
            delay = 0
        elif not _is_number(delay):
            raise HistoryFormatError(
                inv["index"] + 1, f"publish 'delay' must be a number of seconds, got {delay!r}"
            )
        elif delay > 0:
            self.delayed.add(msg)
        ready = self.ready.get(msg)
        if ready is None or t + delay < ready[0]:
            self.ready[msg] = (t + delay, inv["index"])
        first = self.pub_inv.get(msg)
        if first is None:
            self.pub_inv[msg] = (t, inv["index"])
            self.pub_group[msg] = group
        elif t < first[0]:
            self.pub_inv[msg] = (t, inv["index"])
        if typ == "ok":
            done = self.pub_ok.get(msg)
            if done is None or comp["time"] < done[0]:  # type: ignore[index]
                self.pub_ok[msg] = (comp["time"], inv["index"], comp["index"])  # type: ignore[index]

    def _claim(self, inv: dict, comp: dict, typ: str) -> None:
        if typ != "ok":
            return
        value = comp.get("value")
        if value is None or (type(value) is dict and value.keys() == {"dead_lettered"}):
            self.empty_claims += 1  # nothing leased (perhaps some dead-lettered)
            return
        if type(value) is not dict:
            raise HistoryFormatError(comp["index"] + 1, "claim ok value must be an object or null")
        self._lease(inv, comp, value)

    def _claim_many(self, inv: dict, comp: dict, typ: str) -> None:
        """Each lease of a batch claim is a lease, as a claim's would be."""
        if typ != "ok":
            return
        value = comp.get("value")
        leases = value.get("leases") if type(value) is dict else None
        if type(leases) is not list:
            raise HistoryFormatError(
                comp["index"] + 1, "claim-many ok value must be an object with a 'leases' list"
            )
        if not leases:
            self.empty_claims += 1
        for lease in leases:
            if type(lease) is not dict:
                raise HistoryFormatError(
                    comp["index"] + 1, f"claim-many lease must be an object, got {lease!r}"
                )
            self._lease(inv, comp, lease)

    def _lease(self, inv: dict, comp: dict, value: dict) -> None:
        vis = value.get("visibility")
        if vis is None and type(inv.get("value")) is dict:
            vis = inv["value"].get("visibility")
        if (type(vis) is not float and type(vis) is not int) or not 0 <= vis < INF:
            raise HistoryFormatError(
                comp["index"] + 1, "claim needs a numeric 'visibility' in its ok or invoke value"
            )
        msg, group = value.get("msg"), value.get("group")
        if (type(group) is not str and type(group) is not int) or (
            msg is not None and type(msg) is not str and type(msg) is not int
        ):
            _check_key(msg, "msg", comp)
            _key(value, "group", comp)
        lease = Lease(inv, comp, group, msg, value.get("token"), vis, _digest(value, comp))
        self.leases.append(lease)
        self._holding[inv["process"], msg] = lease

    def _holder_lease(self, inv: dict) -> tuple[Any, Lease | None]:
        value = inv.get("value")
        if type(value) is not dict or "msg" not in value:
            _key(value, "msg", inv, nullable=True)  # raises, naming what is missing
        msg = value["msg"]  # type: ignore[index]
        if msg is not None and type(msg) is not str and type(msg) is not int:
            _check_key(msg, "msg", inv)
        lease = self._holding.get((inv["process"], msg))
        if lease is not None:
            token = value.get("token")
            if token is not None and lease.token is not None and token != lease.token:
                lease = None
        return msg, lease

    def _release(self, inv: dict, comp: dict | None, typ: str) -> None:
        f = inv["f"]
        if f == "dead-letter":
            _key(inv.get("value"), "msg", inv, nullable=True)  # names what is missing
        msg, lease = self._holder_lease(inv)
        if lease is not None:  # the holder's own ack, nack or dead-letter ends its window
            if inv["time"] < lease.cut:
                lease.cut = inv["time"]
            if typ == "ok":
                lease.releases.append((inv["time"], inv["index"], comp["index"]))  # type: ignore[index]
        if f == "nack":
            return
        if f == "dead-letter" and typ == "ok":
            self.dead_lettered.add(msg)
        if typ == "fail":
            return
        t = inv["time"]
        first = self.settled.get(msg)
        if first is None or t < first[0]:
            self.settled[msg] = (t, inv["index"], -1 if comp is None else comp["index"])
        if typ == "ok":
            done = self.acked.get(msg)
            if done is None or comp["time"] < done[0]:  # type: ignore[index]
                self.acked[msg] = (comp["time"], inv["index"], comp["index"])  # type: ignore[index]

    def _ack_many(self, inv: dict, comp: dict | None, typ: str) -> None:
        """Each lease of a batch ack is an ack with that lease's outcome: the ok value's
        ``outcomes`` when the call returned, else the call's own (fail, info or open)."""
        value = inv.get("value")
        entries = value.get("leases") if type(value) is dict else None
        if type(entries) is not list or any(type(e) is not dict for e in entries):
            raise HistoryFormatError(
                inv["index"] + 1, "ack-many invoke value must be an object with a 'leases' list"
            )
        kinds = [typ] * len(entries)
        if typ == "ok":
            done = comp.get("value")  # type: ignore[union-attr]
            kinds = done.get("outcomes") if type(done) is dict else None
            if (
                type(kinds) is not list
                or len(kinds) != len(entries)
                or any(k not in ("ok", "fail", "info") for k in kinds)
            ):
                raise HistoryFormatError(
                    comp["index"] + 1,  # type: ignore[index]
                    "ack-many ok value needs 'outcomes': ok, fail or info for each lease",
                )
        for entry, kind in zip(entries, kinds, strict=True):
            self._release({**inv, "f": "ack", "value": entry}, comp, kind)

    def _extend(self, inv: dict, comp: dict | None, typ: str) -> None:
        _, lease = self._holder_lease(inv)
        if lease is None or typ == "fail":
            return
        vis = inv.get("value", {}).get("visibility")
        if not _is_number(vis):
            raise HistoryFormatError(inv["index"] + 1, "extend needs a numeric 'visibility'")
        until = inv["time"] + vis
        latest = (comp["time"] if typ == "ok" and comp is not None else inv["time"]) + vis
        if latest > lease.expiry:
            lease.expiry = latest
        if typ == "ok" and until > lease.stretch:
            lease.stretch = until

    def _absorb_dead_letters(self, claims: list[tuple[dict, dict | None, str]]) -> None:
        """Turn the claims' ``dead_lettered`` lists and the reads into acknowledgements.

        A claim's dead letter is an ``ok`` dead-letter operation spanning the claim. A message
        only a read saw was moved by a claim of unknown outcome: its possible acknowledgement
        starts at the earliest such claim invoked after its first publish (the read's own
        invoke if there is none), and it is certainly acknowledged by the read's ``ok``.
        """
        for inv, comp, typ in claims:
            value = inv.get("value")
            if type(value) is dict and "max_deliveries" in value:
                limit = value["max_deliveries"]
                if type(limit) is int and limit > 0:
                    self.max_deliveries = limit
            if typ != "ok":
                continue
            done = comp.get("value")  # type: ignore[union-attr]
            if type(done) is not dict or "dead_lettered" not in done:
                continue
            for d in done["dead_lettered"] or ():
                if isinstance(d, dict) and "msg" in d:
                    self._acknowledge(
                        d["msg"], inv["time"], inv["index"], comp["time"], comp["index"]
                    )  # type: ignore[index]
                    self.dead.append(Dead(d["msg"], inv, comp, by_claim=True))  # type: ignore[arg-type]
        if self.max_deliveries is not None:  # only the dead-letter checks need these
            self.unseen_claims = sorted(i["time"] for i, c, typ in claims if _unseen(i, c, typ))
        if self.dead_reads:
            self.unknown_claims = sorted(
                i["time"] for i, _, typ in claims if typ in ("info", "open")
            )
        seen = {d.msg for d in self.dead}
        for inv, comp in self.dead_reads:
            for d in comp.get("value", {}).get("messages") or ():
                msg = d.get("msg") if isinstance(d, dict) else None
                if msg is None or msg in seen:
                    continue
                seen.add(msg)
                published = self.pub_inv.get(msg, (inv["time"], -1))[0]
                k = bisect_left(self.unknown_claims, published)
                start = self.unknown_claims[k] if k < len(self.unknown_claims) else inv["time"]
                self._acknowledge(msg, start, inv["index"], comp["time"], comp["index"])
                self.dead.append(Dead(msg, inv, comp, by_claim=False))

    def _acknowledge(self, msg: Any, t_inv: float, i: int, t_ok: float, j: int) -> None:
        self.dead_lettered.add(msg)
        first = self.settled.get(msg)
        if first is None or t_inv < first[0]:
            self.settled[msg] = (t_inv, i, j)
        done = self.acked.get(msg)
        if done is None or t_ok < done[0]:
            self.acked[msg] = (t_ok, i, j)


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


def _key(value: Any, name: str, ev: dict, nullable: bool = False) -> Any:
    """``value[name]``: a string or integer (or null if ``nullable``, e.g. the ``msg`` of
    an ack of a leased event that carried none)."""
    if type(value) is not dict:
        raise HistoryFormatError(
            ev["index"] + 1, f"{ev['f']} {ev['type']} value must be an object with {name!r}"
        )
    key = value.get(name)
    _check_key(key, name, ev)
    if key is None and not (nullable and name in value):
        raise HistoryFormatError(ev["index"] + 1, f"{ev['f']} {ev['type']} value lacks {name!r}")
    return key


def _check_key(key: Any, name: str, ev: dict) -> None:
    if key is not None and type(key) is not str and type(key) is not int:
        raise HistoryFormatError(
            ev["index"] + 1, f"{name!r} must be a string or an integer, got {key!r}"
        )


def _text(key: Any) -> str:
    """A group (or msg) as text: a string as it is, an integer as its decimal digits."""
    return key if type(key) is str else str(key)


def _digest(value: Any, ev: dict) -> str | None:
    """The body's ``digest`` in an event's value: a string, or None when it has none."""
    digest = value.get("digest") if type(value) is dict else None
    if digest is not None and type(digest) is not str:
        raise HistoryFormatError(
            ev["index"] + 1, f"'digest' must be a string (of hex digits), got {digest!r}"
        )
    return digest


def _is_number(x: Any) -> bool:
    return (type(x) is int or type(x) is float) and math.isfinite(x) and x >= 0
