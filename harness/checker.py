"""Check a queue history for the anomalies the history format defines.

The format and the definitions are the project's public contract
(``docs/history-format.md``); this module follows it.

:func:`check` is a pure function of the events: it pairs operations, builds the leases
and each message's publishes and acks, runs one finder per anomaly and adds statistics.
Every finder sorts once and sweeps (or binary-searches), so a history of n events is
checked in O(n log n). :func:`main_check` is ``python -m harness check FILE``.

Definitions, in short (the document is the authority):

* a lease's *certain window* is ``[claim.ok, claim.invoke + visibility]``, cut at the
  invoke of the holder's own ack/nack of it, stretched by each ``ok`` extend to
  ``extend.invoke + visibility``; its *expiry* (for stale acks: when it has certainly
  expired) is ``claim.ok + visibility``, stretched by each ``ok`` extend to
  ``extend.ok + visibility`` and by each extend whose outcome is unknown to
  ``extend.invoke + visibility``;
* ``ok`` and ``info`` acks (and dead-letters) count as possible acknowledgements, an
  operation still open at the end of the history as ``info``; a dead-letter by a lease's
  holder cuts that lease's window (and counts for stale acks) exactly as its ack would.
"""

from __future__ import annotations

import json
import math
import sys
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

from . import deadletters, divergence
from .history import (
    CLIENT_FS,
    HistoryFormatError,
    completion_error,
    fault_intervals,
    gc_paused,
    invoke_error,
    read_history,
)

ANOMALIES = (
    "lost",
    "duplicate-group-lease",
    "fifo-violation",
    "delivered-after-ack",
    "unexpected",
    "stale-ack-accepted",
    *deadletters.ANOMALIES,
    divergence.NAME,  # from the replicas' tables (replicas.json), not from the history
)
MAX_EXAMPLES = 10
INF = math.inf
_first = itemgetter(0)
_ci, _co = attrgetter("ci"), attrgetter("co")


class Lease:
    """A claim that returned a message, with what its holder did with it."""

    __slots__ = (
        "ci",
        "co",
        "cut",
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

    def __init__(self, inv: dict, ok: dict, group: Any, msg: Any, token: Any, vis: float) -> None:
        self.process = inv["process"]
        self.i_inv, self.i_ok = inv["index"], ok["index"]
        self.ci, self.co = inv["time"], ok["time"]
        self.group, self.msg, self.token = group, msg, token
        self.stretch = self.ci + vis  # certain end before the cut: ok extends only
        # for stale acks: the latest the lease can end (it may apply as late as claim ok)
        self.expiry = self.co + vis
        self.cut = INF  # invoke of the holder's first ack/nack
        self.releases: list[tuple[float, int, int]] = []  # ok acks/nacks: (invoke, i, i)

    @property
    def end(self) -> float:
        """End of the certain validity window."""
        return min(self.stretch, self.cut)


class History:
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
        self.settled: dict[Any, tuple[float, int, int]] = {}  # msg -> first ok/info ack invoke
        self.acked: dict[Any, tuple[float, int, int]] = {}  # msg -> earliest ack ok
        self.dead_lettered: set[Any] = set()
        self.dead_reads: list[tuple[dict, dict]] = []  # ok reads of the dead-letter queue
        claims: list[tuple[dict, dict | None, str]] = []  # every claim, for deadletters
        self.leases: list[Lease] = []
        self.empty_claims = 0
        self.nemesis: list[dict] = []
        self.duration = events[-1]["time"] if events else 0.0
        self._holding: dict[tuple[int, Any], Lease] = {}
        open_ops: dict[int, dict] = {}
        retired: dict[int, int] = {}
        ops, latencies = self.ops, self.latencies
        publish, claim, release, extend = self._publish, self._claim, self._release, self._extend
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
            elif f == deadletters.READ_F:
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
            elif f == "claim":
                claims.append((inv, None, "open"))
            elif f != deadletters.READ_F:
                release(inv, None, "open")
        deadletters.absorb(self, claims)

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
        t = inv["time"]
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
        lease = Lease(inv, comp, group, msg, value.get("token"), vis)
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


def _is_number(x: Any) -> bool:
    return (type(x) is int or type(x) is float) and math.isfinite(x) and x >= 0


# -- anomaly finders: each returns the examples (lists of indices) of every instance --------
def find_lost(h: History) -> list[list[int]]:
    """Published ``ok`` and never acknowledged by an ``ok``/``info`` ack or dead-letter."""
    settled = h.settled
    return [[i, j] for msg, (_, i, j) in h.pub_ok.items() if msg not in settled]


def find_unexpected(h: History) -> list[list[int]]:
    """A claim returned a ``msg`` that no publish ever invoked."""
    published = h.pub_inv
    return [[x.i_inv, x.i_ok] for x in h.leases if x.msg not in published]


def find_delivered_after_ack(h: History) -> list[list[int]]:
    """A claim invoked after an ack of its ``msg`` had returned ``ok``."""
    acked = h.acked
    found = []
    for x in h.leases:
        a = acked.get(x.msg)
        if a is not None and x.ci > a[0]:
            found.append([a[1], a[2], x.i_inv, x.i_ok])
    return found


def find_duplicate_group_leases(h: History) -> list[list[int]]:
    """A claim took effect inside another lease's certain window on the same group.

    Per group, sweep the claims by invoke time while adding, in ok-time order, every
    lease that completed before; the lease with the latest window end is the only one
    that can contain the claim's ok (the second best stands in when that is itself).
    """
    found = []
    for leases in _by(h.leases, lambda x: x.group).values():
        if len(leases) < 2:
            continue
        by_ok = sorted(leases, key=_co)
        best: Lease | None = None
        second: Lease | None = None
        k = 0
        for x in sorted(leases, key=_ci):
            while k < len(by_ok) and by_ok[k].co <= x.ci:
                y = by_ok[k]
                k += 1
                end = y.end
                if best is None or end > best.end:
                    best, second = y, best
                elif second is None or end > second.end:
                    second = y
            other = second if best is x else best
            if other is not None and other.end >= x.co:
                found.append([other.i_inv, other.i_ok, x.i_inv, x.i_ok])
    return found


def find_fifo_violations(h: History) -> list[list[int]]:
    """``b`` leased while an earlier-published ``a`` of its group was certainly unacked.

    Per group, one sweep over the messages in order of first publish invoke (as ``b``)
    against those in order of first ``ok`` publish (as ``a``) gives each ``b`` the latest
    "first possible ack invoke" (infinite if none) of any ``a`` published before it; a
    lease of ``b`` violates FIFO when that reaches the lease's claim ok.
    """
    settled, pub_ok, pub_group = h.settled, h.pub_ok, h.pub_group
    groups: dict[Any, tuple[list, list]] = {}
    for msg, (t_inv, _) in h.pub_inv.items():
        as_a, as_b = groups.setdefault(pub_group[msg], ([], []))
        as_b.append((t_inv, msg))
        done = pub_ok.get(msg)
        if done is not None:
            s = settled.get(msg)
            as_a.append((done[0], INF if s is None else s[0], msg))
    worst: dict[Any, tuple[float, Any]] = {}  # b -> (latest first-ack invoke, its a)
    for as_a, as_b in groups.values():
        if not as_a:
            continue
        as_a.sort(key=_first)
        as_b.sort(key=_first)
        k, running = 0, (-INF, None)
        for t_inv, msg in as_b:
            while k < len(as_a) and as_a[k][0] < t_inv:
                if as_a[k][1] > running[0]:
                    running = (as_a[k][1], as_a[k][2])
                k += 1
            if running[1] is not None:
                worst[msg] = running
    found = []
    for x in h.leases:
        w = worst.get(x.msg)
        if w is not None and w[0] >= x.co:
            _, ai, aj = pub_ok[w[1]]
            found.append([ai, aj, h.pub_inv[x.msg][1], x.i_inv, x.i_ok])
    return found


def find_stale_acks(h: History) -> list[list[int]]:
    """An ack/nack/dead-letter returned ``ok`` after its lease expired and another process
    leased the msg.

    Per message, leases sorted by claim invoke carry suffix minima of claim-ok time (the
    best two from distinct processes), so each ack asks "did another process's claim
    invoked at or after my expiry complete by my invoke?" with one binary search.
    """
    found = []
    for leases in _by(h.leases, lambda x: x.msg).values():
        if len(leases) < 2 or not any(x.releases for x in leases):
            continue
        leases.sort(key=_ci)
        starts = [x.ci for x in leases]
        suffix: list[tuple[Lease | None, Lease | None]] = [(None, None)] * (len(leases) + 1)
        for i in range(len(leases) - 1, -1, -1):
            suffix[i] = _best_two(leases[i], *suffix[i + 1])
        for x in leases:
            for t_inv, i_inv, i_ok in x.releases:
                best, second = suffix[bisect_left(starts, x.expiry)]
                other = second if best is not None and best.process == x.process else best
                if other is not None and other.co <= t_inv:
                    found.append([x.i_inv, x.i_ok, other.i_inv, other.i_ok, i_inv, i_ok])
    return found


def _best_two(x: Lease, best: Lease | None, second: Lease | None) -> tuple:
    """Earliest-ok lease and earliest-ok lease of a different process, given x joins."""
    if best is None or x.co < best.co:
        if best is not None and best.process != x.process:
            return x, best
        return x, second
    if best.process != x.process and (second is None or x.co < second.co):
        return best, x
    return best, second


FINDERS: dict[str, Callable[[History], list[list[int]]]] = {
    "lost": find_lost,
    "duplicate-group-lease": find_duplicate_group_leases,
    "fifo-violation": find_fifo_violations,
    "delivered-after-ack": find_delivered_after_ack,
    "unexpected": find_unexpected,
    "stale-ack-accepted": find_stale_acks,
    **deadletters.FINDERS,
}


def _by(items: Iterable[Lease], key: Callable[[Lease], Any]) -> dict[Any, list[Lease]]:
    out: dict[Any, list[Lease]] = {}
    for x in items:
        out.setdefault(key(x), []).append(x)
    return out


# -- statistics -----------------------------------------------------------------------------
def statistics(h: History, events: Sequence[dict]) -> dict[str, Any]:
    """Counts, latencies and availability (time from each fault to the next lease)."""
    ops: dict[str, dict[str, int]] = {}
    for (f, typ), n in sorted(h.ops.items()):
        if f not in ops:
            ops[f] = {"ok": 0, "fail": 0, "info": 0, "open": 0}

        ops[f][typ] = n
    leased = {x.msg for x in h.leases}
    return {
        "published": len(h.pub_ok),
        "acked": len(h.acked),
        "redeliveries": len(h.leases) - len(leased),
        "leases": len(h.leases),
        "empty_claims": h.empty_claims,
        "dead_lettered": len(h.dead_lettered),
        "events": len(events),
        "duration": h.duration,
        "ops": ops,
        "latency": {f: _percentiles(v) for f, v in sorted(h.latencies.items()) if v},
        "availability": availability(h.leases, fault_intervals(h.nemesis)),
    }


def _percentiles(values: list[float]) -> dict[str, float]:
    values.sort()
    n = len(values)
    return {
        "p50": round(values[(n - 1) // 2], 6),
        "p99": round(values[min(n - 1, math.ceil(0.99 * n) - 1)], 6),
        "max": round(values[-1], 6),
    }


def availability(leases: list[Lease], faults: list) -> list[dict[str, Any]]:
    """For each fault, the first lease whose claim was invoked once the fault was in
    place (its start action completed), and how long after the fault's start it
    returned: claims sent in the moments before a partition's rules bite do not count."""
    ordered = sorted(leases, key=_ci)
    starts = [x.ci for x in ordered]
    first_ok = [INF] * (len(ordered) + 1)
    for i in range(len(ordered) - 1, -1, -1):
        first_ok[i] = min(ordered[i].co, first_ok[i + 1])
    out = []
    for fault in faults:
        in_effect = fault.start if fault.in_effect is None else fault.in_effect
        t = first_ok[bisect_left(starts, in_effect)]
        out.append(
            {
                "kind": fault.kind,
                "label": fault.label,
                "index": fault.start_index,
                "start": fault.start,
                "end": fault.end,
                "next_lease": None if t == INF else t,
                "recovery": None if t == INF else round(t - fault.start, 6),
            }
        )
    return out


# -- entry points ---------------------------------------------------------------------------
def check(events: Sequence[dict], replicas: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check a history (a list of events as :func:`read_history` returns); check.json shape.

    ``replicas`` is the run's record of every node's tables (``replicas.json``): a row
    not the same on every node is a ``replica-divergence``; without it that count is 0
    and ``stats["replicas"]`` says the replicas were not compared.

    Raises :class:`HistoryFormatError` when operations do not pair up or a value lacks
    what a check needs, :class:`~harness.divergence.SnapshotFormatError` for a
    malformed ``replicas``.
    """
    with gc_paused():
        h = History(events)
        anomalies = {}
        for name, finder in FINDERS.items():
            found = finder(h)
            found.sort(key=lambda ex: (max(ex), ex))
            anomalies[name] = {"count": len(found), "examples": found[:MAX_EXAMPLES]}
        stats = statistics(h, events)
    anomalies[divergence.NAME], stats["replicas"] = divergence.compare(replicas)
    anomalies = {name: anomalies[name] for name in ANOMALIES}
    valid = all(a["count"] == 0 for a in anomalies.values())
    return {"valid": valid, "anomalies": anomalies, "stats": stats}


def history_path(path: str | Path) -> Path:
    """The history file named by ``path``: the file itself, or a run folder's history.jsonl."""
    p = Path(path)
    return p / "history.jsonl" if p.is_dir() else p


def main_check(path: str | Path) -> int:
    """``python -m harness check FILE``: check, write check.json beside it, print a summary.

    The replicas' tables are compared too when ``replicas.json`` (a run's record) is
    beside the history, and in a run folder the run's coverage is recomputed. Returns
    the verdict's exit status (:mod:`harness.verdict`): 0 valid, 1 anomalies, 3 a run
    that did not test what it planned, 2 a run that failed or a file that cannot be read
    (the message names the line and what is wrong).
    """
    from .verdict import decide, run_coverage, run_failure  # a run folder's verdict

    source = history_path(path)
    try:
        replicas = divergence.read(source.with_name(divergence.FILE))
        with gc_paused():
            events = read_history(source)
            result = check(events, replicas)
            coverage = run_coverage(source.parent, events, result)
        if coverage is not None:
            result["coverage"] = coverage
    except HistoryFormatError as e:
        print(f"{source}:{e.line}: {e.reason}", file=sys.stderr)
        return 2
    except divergence.SnapshotFormatError as e:
        print(f"{source.with_name(divergence.FILE)}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(
            f"{getattr(e, 'filename', None) or source}: cannot read: {e.strerror or e}",
            file=sys.stderr,
        )
        return 2
    out = source.with_name("check.json")
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    verdict = decide(result, run_failure(source.parent))
    history_says = verdict.label in ("valid", "ANOMALIES")  # else the run's own verdict
    print_check(result, source, out, None if history_says else verdict.line())
    return verdict.exit_code


def print_check(
    result: dict[str, Any], source: Path, out: Path | None = None, verdict: str | None = None
) -> None:
    """Print a readable summary of a check result (rich tables); ``verdict``: the run's,
    when it is not simply the history's (:func:`harness.verdict.decide`)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    stats = result["stats"]
    table = Table(title=f"check: {source}", title_justify="left")
    table.add_column("anomaly")
    table.add_column("count", justify="right")
    table.add_column("examples (event indices)")
    for name, a in result["anomalies"].items():
        style = "bold red" if a["count"] else "green"
        shown = "; ".join(_example_text(ex) for ex in a["examples"][:3])
        table.add_row(name, f"[{style}]{a['count']}[/]", shown)
    console.print(table)
    ops = Table(title="operations", title_justify="left")
    for col in ("f", "ok", "fail", "info", "open", "p50 s", "p99 s"):
        ops.add_column(col, justify="left" if col == "f" else "right")
    for f, counts in stats["ops"].items():
        lat = stats["latency"].get(f, {})
        ops.add_row(
            f,
            *(str(counts[k]) for k in ("ok", "fail", "info", "open")),
            *(f"{lat[k]:.4f}" if k in lat else "-" for k in ("p50", "p99")),
        )
    console.print(ops)
    console.print(
        f"published {stats['published']}, acked {stats['acked']}, leases {stats['leases']}, "
        f"redeliveries {stats['redeliveries']}, events {stats['events']}, "
        f"duration {stats['duration']:.1f} s"
    )
    faults = stats["availability"]
    for a in faults[:20]:
        rec = "never" if a["recovery"] is None else f"{a['recovery']:.2f} s"
        console.print(f"  fault {a['label']} at {a['start']:.2f} s: next lease after {rec}")
    if len(faults) > 20:
        console.print(f"  … and {len(faults) - 20} more faults (check.json has them all)")
    if stats.get("replicas"):
        console.print(divergence.summary(stats["replicas"]), markup=False)
    text = "[green]history is valid[/]" if result["valid"] else "[bold red]anomalies found[/]"
    if verdict is not None:  # the run's: inconclusive, or it failed
        text = f"[yellow]{escape(verdict)}[/]"
    console.print(f"{text}" + (f"; wrote {out}" if out else ""))


def _example_text(example: Any) -> str:
    """An example as a short text: event indices, or a replica divergence's row."""
    if isinstance(example, dict):
        from rich.markup import escape

        return escape(divergence.describe(example))
    return " ".join(map(str, example))
