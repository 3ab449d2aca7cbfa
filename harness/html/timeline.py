"""The timeline's data: every client operation per process and every fault, as columns.

The page draws it on a canvas (``assets/report.js``), so its size is the size of these
arrays, not of a DOM node per operation: one entry per operation in each column, sorted
by invoke time, times rounded to 0.1 ms. Faults are the history's own
(:func:`harness.history.fault_intervals`), whatever their kind: the page gives each kind
a colour of its own, so a fault kind added later is shaded with no change here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..colours import fault_colour
from ..history import HistoryFormatError, fault_intervals, pairs

#: completion type -> the code the page colours by; an operation still open at the end is 3
OUTCOMES = {"ok": 0, "fail": 1, "info": 2}
OPEN = 3


def _t(x: float) -> float:
    return round(x, 4)


def timeline_data(events: Sequence[dict[str, Any]], marked: Iterable[int] = ()) -> dict[str, Any]:
    """The timeline of ``events`` (a history that reads: see :func:`harness.history.pairs`
    for what raises :class:`~harness.history.HistoryFormatError`).

    ``lane[k]`` is the position of the operation's process in ``procs`` (``roles``: what
    each process was, :func:`_role`); ``t0``/``t1`` its
    invoke and completion times (the history's end for one never completed); ``type`` its
    outcome (:data:`OUTCOMES`, :data:`OPEN`); ``f`` its position in ``fs``; ``i``/``j``
    the history indices of its invoke and completion (-1: none); ``mark`` the operations
    with an event among ``marked`` (the anomalies' examples), as positions in the columns.
    """
    end = events[-1]["time"] if events else 0.0
    ops = sorted(pairs(events), key=lambda p: (p[0]["time"], p[0]["index"]))
    procs = sorted({inv["process"] for inv, _ in ops})  # integers (the nemesis has none)
    lanes = {p: k for k, p in enumerate(procs)}
    fs: dict[str, int] = {}
    cols: dict[str, list] = {k: [] for k in ("lane", "t0", "t1", "type", "f", "i", "j")}
    wanted = set(marked)
    mark: list[int] = []
    for k, (inv, done) in enumerate(ops):
        cols["lane"].append(lanes[inv["process"]])
        cols["t0"].append(_t(inv["time"]))
        cols["t1"].append(_t(done["time"] if done else end))
        cols["type"].append(OUTCOMES.get(done["type"], OPEN) if done else OPEN)
        cols["f"].append(fs.setdefault(inv["f"], len(fs)))
        cols["i"].append(inv["index"])
        cols["j"].append(done["index"] if done else -1)
        if wanted and (inv["index"] in wanted or (done and done["index"] in wanted)):
            mark.append(k)
    faults = [
        {
            "kind": f.kind,
            "colour": fault_colour(f.kind),
            "label": f.label,
            "start": _t(f.start),
            "end": _t(end if f.end is None else f.end),
            "open": f.end is None,
            "i": f.start_index,
            "j": f.end_index,
        }
        for f in fault_intervals(events)
    ]
    roles = [_role(p, ops) for p in procs]
    return {
        "end": _t(end),
        "procs": procs,
        "roles": roles,
        "fs": list(fs),
        **cols,
        "mark": mark,
        "faults": faults,
    }


#: what a worker id's first letter says of its client (harness.workload.workers' names)
_CLIENTS = {"s": "sync claimer", "a": "async claimer", "w": "worker"}
_PUBLISHES = ("publish", "publish_many")


def _role(process: Any, ops: Sequence[tuple[dict, dict | None]]) -> str:
    """What a process was, as its operations show: ``publisher``, or the claimer its
    leases' tokens name (``sync claimer``, ``async claimer``: a token starts with its
    worker's id), else ``claimer``."""
    own = [(inv, done) for inv, done in ops if inv["process"] == process]
    if all(inv["f"] in _PUBLISHES for inv, _ in own):
        return "publisher"
    for _, done in own:
        value = (done or {}).get("value")
        token = value.get("token") if isinstance(value, dict) else None
        if isinstance(token, str) and token[:1] in _CLIENTS and ":" in token:
            return _CLIENTS[token[0]]
    return "claimer"


def timeline_or_error(
    events: Sequence[dict[str, Any]] | None, marked: Iterable[int] = ()
) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`timeline_data`, or None and why there is none (no events read, or they do
    not pair up)."""
    if events is None:
        return None, "the history could not be read"
    try:
        return timeline_data(events, marked), None
    except HistoryFormatError as e:
        return None, f"line {e.line}: {e.reason}"
