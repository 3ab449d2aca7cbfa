"""The model a history is checked against: its operations paired, its leases, each
message's publishes and acknowledgements, and its dead-letterings, built in one pass.

Every field the finders read is declared in :class:`HistoryModel`, as a typed record of
:mod:`.records`; nothing is added to it from outside. Each paired operation goes to the
one handler :data:`HANDLERS` names for it.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Sequence
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
from .records import INF, Call, Dead, Form, Lease, OpStamp, Sighting, Stamp

__all__ = ["CLOCK_TOLERANCE", "HANDLERS", "INF", "Dead", "HistoryModel", "Lease"]

#: Seconds by which two readings of the queue's clock may disagree with the real time
#: elapsed between them: rqueue's default ``clock_tolerance`` (0.25 s, how far apart the
#: nodes' clocks may be) plus the rounding of its server timestamps (0.0864 s), rounded
#: up. A delayed message counts as delivered early only beyond it.
CLOCK_TOLERANCE = 0.35


class HistoryModel:
    """What the finders need, built in one pass that also pairs the operations.

    Raises :class:`HistoryFormatError` (line = index + 1) where operations do not pair
    up as :func:`harness.history.pairs` requires, or a value lacks what a check needs.
    """

    def __init__(self, events: Sequence[dict]) -> None:
        self.ops: Counter[tuple[str, str]] = Counter()
        self.latencies: dict[str, list[float]] = {f: [] for f in CLIENT_FS}
        self.pub_inv: dict[Any, Stamp] = {}  # msg -> earliest publish invoke
        self.pub_ok: dict[Any, OpStamp] = {}  # msg -> earliest publish ok (its time)
        self.pub_group: dict[Any, Any] = {}
        #: msg -> how many of its publishes may have stored it (``ok``, ``info`` or open)
        self.pub_tries: Counter[Any] = Counter()
        #: msg -> each stored copy of it (a ``seq``) that a dead-lettering showed (by a
        #: claim, or seen by a read) -> where it was first seen; the leases name theirs
        self.dead_copies: dict[Any, dict[Any, Sighting]] = {}
        #: msg -> the distinct forms (group as text, body digest or None) of its publishes
        self.pub_forms: dict[Any, list[Form]] = {}
        #: msg -> earliest publish invoke + its delay, with that publish's invoke index
        self.ready: dict[Any, Stamp] = {}
        self.delayed: set[Any] = set()  # messages with a publish of positive ``delay``
        #: msg -> its first ok/info ack (its invoke time)
        self.settled: dict[Any, OpStamp] = {}
        self.acked: dict[Any, OpStamp] = {}  # msg -> earliest ack ok (its time)
        #: msg -> the seq an ok acknowledgement named (None: it named none) -> the
        #: earliest such acknowledgement's ok (its time)
        self.acked_seqs: dict[Any, dict[Any, OpStamp]] = {}
        self.dead_lettered: set[Any] = set()
        self.dead_reads: list[Call] = []  # ok reads of the dead-letter queue
        self.dead: list[Dead] = []  # every dead-lettering, by a claim or seen by a read
        self.max_deliveries: int | None = None  # the queue's limit, if the claims say one
        #: invoke times of the claims that may have delivered unseen (unknown outcome, or
        #: as long as their visibility): only when ``max_deliveries`` is known
        self.unseen_claims: list[float] = []
        #: invoke times of the claims of unknown outcome: only when the queue was read
        self.unknown_claims: list[float] = []
        self.leases: list[Lease] = []
        self.empty_claims = 0
        self.nemesis: list[dict] = []
        self.duration = events[-1]["time"] if events else 0.0
        self._claims: list[Call] = []  # every claim, for dead letters
        self._holding: dict[tuple[int, Any], Lease] = {}
        open_ops: dict[int, dict] = {}
        retired: dict[int, int] = {}
        ops, latencies = self.ops, self.latencies
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
            HANDLERS[f](self, inv, ev, typ)
        for inv in sorted(open_ops.values(), key=lambda e: e["index"]):
            f = inv["f"]
            ops[f, "open"] += 1
            HANDLERS[f](self, inv, None, "open")
        self._absorb_dead_letters()

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
        form = Form(_text(group), _digest(value, inv))
        forms = self.pub_forms.get(msg)
        if forms is None:
            self.pub_forms[msg] = [form]
        elif form not in forms:
            forms.append(form)
        t, i = inv["time"], inv["index"]
        delay = value.get("delay", 0)  # type: ignore[union-attr]
        if delay is None:
            delay = 0
        elif not _is_number(delay):
            raise HistoryFormatError(
                i + 1, f"publish 'delay' must be a number of seconds, got {delay!r}"
            )
        elif delay > 0:
            self.delayed.add(msg)
        invoked = Stamp(t, i)
        ready = self.ready.get(msg)
        if ready is None or t + delay < ready.time:
            self.ready[msg] = Stamp(t + delay, i) if delay else invoked
        first = self.pub_inv.get(msg)
        if first is None:
            self.pub_inv[msg] = invoked
            self.pub_group[msg] = group
        elif t < first.time:
            self.pub_inv[msg] = invoked
        if typ != "fail":
            self.pub_tries[msg] += 1
        if typ == "ok":
            done = self.pub_ok.get(msg)
            if done is None or comp["time"] < done.time:  # type: ignore[index]
                self.pub_ok[msg] = OpStamp(comp["time"], i, comp["index"])  # type: ignore[index]

    def _claim(self, inv: dict, comp: dict | None, typ: str) -> None:
        self._claims.append(Call(inv, comp, typ))
        if typ != "ok":
            return
        value = comp.get("value")  # type: ignore[union-attr]
        if value is None or (type(value) is dict and value.keys() == {"dead_lettered"}):
            self.empty_claims += 1  # nothing leased (perhaps some dead-lettered)
            return
        if type(value) is not dict:
            raise HistoryFormatError(comp["index"] + 1, "claim ok value must be an object or null")  # type: ignore[index]
        self._lease(inv, comp, value)  # type: ignore[arg-type]

    def _claim_many(self, inv: dict, comp: dict | None, typ: str) -> None:
        """Each lease of a batch claim is a lease, as a claim's would be."""
        self._claims.append(Call(inv, comp, typ))
        if typ != "ok":
            return
        value = comp.get("value")  # type: ignore[union-attr]
        leases = value.get("leases") if type(value) is dict else None
        if type(leases) is not list:
            raise HistoryFormatError(
                comp["index"] + 1,  # type: ignore[index]
                "claim-many ok value must be an object with a 'leases' list",
            )
        if not leases:
            self.empty_claims += 1
        for lease in leases:
            if type(lease) is not dict:
                raise HistoryFormatError(
                    comp["index"] + 1,  # type: ignore[index]
                    f"claim-many lease must be an object, got {lease!r}",
                )
            self._lease(inv, comp, lease)  # type: ignore[arg-type]

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
        ci, co = inv["time"], comp["time"]
        token, digest, seq = value.get("token"), _digest(value, comp), value.get("seq")
        if seq is not None and type(seq) is not int and type(seq) is not str:
            _check_key(seq, "seq", comp)
        i, j, p = inv["index"], comp["index"], inv["process"]
        lease = Lease(p, i, j, ci, co, group, msg, token, digest, ci + vis, co + vis, seq=seq)
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
            token = value.get("token")  # type: ignore[union-attr]
            if token is not None and lease.token is not None and token != lease.token:
                lease = None
        return msg, lease

    def _release(self, inv: dict, comp: dict | None, typ: str) -> None:
        """An ack, nack or dead-letter (or one lease of a batch ack, with its outcome)."""
        f = inv["f"]
        if f == "dead-letter":
            _key(inv.get("value"), "msg", inv, nullable=True)  # names what is missing
        msg, lease = self._holder_lease(inv)
        seq = inv["value"].get("seq")  # the copy it names, if any
        if seq is not None and type(seq) is not int and type(seq) is not str:
            _check_key(seq, "seq", inv)
        t = inv["time"]
        done = OpStamp(t, inv["index"], -1 if comp is None else comp["index"])
        if lease is not None:  # the holder's own ack, nack or dead-letter ends its window
            if t < lease.cut:
                lease.cut = t
            if typ == "ok":
                lease.releases.append(done)
        if f == "nack":
            return
        if f == "dead-letter" and typ == "ok":
            self.dead_lettered.add(msg)
        if typ == "fail":
            return
        first = self.settled.get(msg)
        if first is None or t < first.time:
            self.settled[msg] = done
        if typ == "ok":
            self._acked(msg, seq, OpStamp(comp["time"], done.i_inv, done.i_ok))  # type: ignore[index]

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
        vis = inv["value"].get("visibility")
        if not _is_number(vis):
            raise HistoryFormatError(inv["index"] + 1, "extend needs a numeric 'visibility'")
        until = inv["time"] + vis
        latest = (comp["time"] if typ == "ok" else inv["time"]) + vis  # type: ignore[index]
        if latest > lease.expiry:
            lease.expiry = latest
        if typ == "ok" and until > lease.stretch:
            lease.stretch = until

    def _read_dead_letters(self, inv: dict, comp: dict | None, typ: str) -> None:
        if typ == "ok":
            self.dead_reads.append(Call(inv, comp, typ))

    def _absorb_dead_letters(self) -> None:
        """Turn the claims' ``dead_lettered`` lists and the reads into acknowledgements.

        A claim's dead letter is an ``ok`` dead-letter operation spanning the claim. A message
        only a read saw was moved by a claim of unknown outcome: its possible acknowledgement
        starts at the earliest such claim invoked after its first publish (the read's own
        invoke if there is none), and it is certainly acknowledged by the read's ``ok``.
        """
        claims = self._claims
        for call in claims:
            value = call.value
            if type(value) is dict and "max_deliveries" in value:
                limit = value["max_deliveries"]
                if type(limit) is int and limit > 0:
                    self.max_deliveries = limit
            if call.outcome != "ok":
                continue
            done = call.done.get("value")
            if type(done) is not dict or "dead_lettered" not in done:
                continue
            for d in done["dead_lettered"] or ():
                if isinstance(d, dict) and "msg" in d:
                    seq = self._dead_seq(d, call)
                    self._acknowledge(d["msg"], seq, call.t_inv, call)
                    self.dead.append(Dead.by(d["msg"], call, by_claim=True))
        if self.max_deliveries is not None:  # only the dead-letter checks need these
            self.unseen_claims = sorted(c.t_inv for c in claims if _unseen(c))
        if self.dead_reads:
            self.unknown_claims = sorted(c.t_inv for c in claims if c.outcome in ("info", "open"))
        seen = {d.msg for d in self.dead}
        for call in self.dead_reads:
            for d in call.done.get("value", {}).get("messages") or ():
                msg = d.get("msg") if isinstance(d, dict) else None
                if msg is None:
                    continue
                seq = self._dead_seq(d, call)
                if msg in seen:
                    continue
                seen.add(msg)
                published = self.pub_inv.get(msg, Stamp(call.t_inv, -1)).time
                k = bisect_left(self.unknown_claims, published)
                start = self.unknown_claims[k] if k < len(self.unknown_claims) else call.t_inv
                self._acknowledge(msg, seq, start, call)
                self.dead.append(Dead.by(msg, call, by_claim=False))

    def _acknowledge(self, msg: Any, seq: Any, t_inv: float, call: Call) -> None:
        """``msg`` (its copy ``seq``) dead-lettered by ``call``: possibly from ``t_inv``,
        certainly by its ok."""
        self.dead_lettered.add(msg)
        first = self.settled.get(msg)
        if first is None or t_inv < first.time:
            self.settled[msg] = OpStamp(t_inv, call.i_inv, call.i_ok)
        self._acked(msg, seq, OpStamp(call.t_ok, call.i_inv, call.i_ok))

    def _acked(self, msg: Any, seq: Any, done: OpStamp) -> None:
        """An acknowledgement of ``msg`` (naming its copy ``seq``, or None) returned ok."""
        acked = self.acked.get(msg)
        if acked is None or done.time < acked.time:
            self.acked[msg] = done
        per_seq = self.acked_seqs.setdefault(msg, {})
        acked = per_seq.get(seq)
        if acked is None or done.time < acked.time:
            per_seq[seq] = done

    def _dead_seq(self, d: dict, call: Call) -> Any:
        """The ``seq`` of a dead letter that ``call`` reported, seen as a stored copy."""
        seq = d.get("seq")
        _check_key(seq, "seq", call.done)
        _check_key(d["msg"], "msg", call.done)
        if seq is not None:
            copies = self.dead_copies.setdefault(d["msg"], {})
            first = copies.get(seq)
            if first is None or call.i_ok < first.i_ok:
                copies[seq] = Sighting(call.i_inv, call.i_ok)
        return seq


#: The one dispatch on an operation's name: the handler of each client operation, called
#: once per operation (completed, or still open at the end of the history).
HANDLERS: dict[str, Callable[[HistoryModel, dict, dict | None, str], None]] = {
    "publish": HistoryModel._publish,
    "claim": HistoryModel._claim,
    CLAIM_MANY: HistoryModel._claim_many,
    "ack": HistoryModel._release,
    ACK_MANY: HistoryModel._ack_many,
    "nack": HistoryModel._release,
    "extend": HistoryModel._extend,
    "dead-letter": HistoryModel._release,
    READ_DEAD_LETTERS: HistoryModel._read_dead_letters,
}


def _unseen(claim: Call) -> bool:
    """Whether the claim may have delivered a message the history does not show: its
    outcome is unknown, or it took at least its visibility. (A claim retried inside the
    queue after an unknown outcome may have leased a message that then lapsed and went to
    another worker before the retry: possible only when the claim outlasted a lease.)"""
    if claim.outcome in ("info", "open"):
        return True
    if claim.outcome != "ok":
        return False
    vis = _field(claim.done.get("value"), "visibility")
    if vis is None:
        vis = _field(claim.value, "visibility")
    return isinstance(vis, int | float) and claim.t_ok - claim.t_inv >= vis


def _field(value: Any, name: str) -> Any:
    """``value[name]`` when ``value`` is an object, else None (a value of another shape
    says nothing about ``name``)."""
    return value.get(name) if type(value) is dict else None


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
