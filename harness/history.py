"""Histories: record a run's operations as JSON Lines, read them back, pair them up.

The format is a public contract (docs/history-format.md): one JSON object per line
with ``index``, ``time``, ``process``, ``type``, ``f`` and ``value`` (and an optional
``error``). Client processes are integers; faults use the process ``"nemesis"``. A
completion (``ok``/``fail``/``info``) closes the most recent ``invoke`` of its process,
and a process that got ``info`` issues nothing afterwards.

:class:`HistoryRecorder` writes such a file (thread-safe, callable from asyncio code),
:func:`read_history` reads one back and raises :class:`HistoryFormatError` naming the
line and what is wrong, :func:`pairs` walks a history's client operations as
``(invoke, completion)`` and :func:`fault_intervals` turns nemesis events into the faults'
``[start, end]`` intervals.
"""

from __future__ import annotations

import gc
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .errors import HarnessError

NEMESIS = "nemesis"
INVOKE = "invoke"
COMPLETIONS = frozenset({"ok", "fail", "info"})
TYPES = frozenset({INVOKE, *COMPLETIONS})
#: the operation that reads the whole dead-letter queue once, after the drain
READ_DEAD_LETTERS = "read-dead-letters"
#: a batch claim (several leases, of distinct groups, in one call) and a batch ack
CLAIM_MANY, ACK_MANY = "claim-many", "ack-many"
CLIENT_FS = frozenset(
    {
        "publish",
        "claim",
        CLAIM_MANY,
        "ack",
        ACK_MANY,
        "nack",
        "extend",
        "dead-letter",
        READ_DEAD_LETTERS,
    }
)
REQUIRED = ("index", "time", "process", "type", "f")
INF = math.inf

#: Nemesis ``f`` names that end a fault, and the fault kind each one ends.
FAULT_ENDS = {
    "restart": "kill",
    "start": "kill",
    "resume": "pause",
    "heal": "partition",
    "clock-reset": "clock-skew",
    "reset-clock": "clock-skew",
    "clock-skew-end": "clock-skew",
    "disk-free": "disk-full",
}


class HistoryFormatError(HarnessError, ValueError):
    """A history that breaks the format; ``line`` is 1-based, ``reason`` says what is wrong."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


# -- recording ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Op:
    """An invoked client operation, as returned by :meth:`HistoryRecorder.invoke`."""

    index: int
    time: float
    process: int
    f: str
    value: Any


class HistoryRecorder:
    """Appends events to ``path`` (truncating it), time 0 being the recorder's creation.

    Index assignment, time stamping and writing happen under one lock, so indices are
    0, 1, 2 … and times non-decreasing in file order. Every line is flushed as it is
    written, so a crashed run leaves a checkable file. Misuse that would make the file
    unreadable (a second invoke on a busy process, an operation after ``info``) raises
    ``ValueError`` before anything is written.
    """

    def __init__(self, path: str | Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.Lock()
        self._file: IO[str] | None = self.path.open("w", encoding="utf-8")
        self._t0 = clock()
        self._last_time = 0.0
        self._next_index = 0
        self._open: dict[int, Op] = {}
        self._retired: set[int] = set()

    def invoke(self, process: int, f: str, value: Any) -> Op:
        """Record the start of client operation ``f`` by ``process``; returns its handle."""
        if not isinstance(process, int) or isinstance(process, bool):
            raise TypeError(f"process must be an int, got {process!r}")
        if f not in CLIENT_FS:
            raise ValueError(f"unknown client operation {f!r}; expected one of {_names(CLIENT_FS)}")
        with self._lock:
            if process in self._retired:
                raise ValueError(f"process {process} got 'info' and may not issue operations")
            if process in self._open:
                raise ValueError(f"process {process} still has {self._open[process].f!r} open")
            event = self._write(process, INVOKE, f, value, None)
            op = Op(event["index"], event["time"], process, f, value)
            self._open[process] = op
            return op

    def complete(
        self, op: Op, type: str, value: Any, error: str | None = None, refused: bool = False
    ) -> dict:
        """Record the completion (``ok``/``fail``/``info``) of ``op``; returns the event.
        ``refused``: a ``fail`` the queue chose, for a cause its ``error`` names."""
        if type not in COMPLETIONS:
            raise ValueError(f"completion type must be one of {_names(COMPLETIONS)}, not {type!r}")
        if refused and type != "fail":
            raise ValueError(f"only a fail can be refused, not {type!r}")
        with self._lock:
            if self._open.get(op.process) is not op:
                raise ValueError(f"operation {op.index} of process {op.process} is not open")
            del self._open[op.process]
            if type == "info":
                self._retired.add(op.process)
            return self._write(op.process, type, op.f, value, error, refused)

    def nemesis(self, f: str, value: Any = None, type: str = "info") -> dict:
        """Record a fault event (process ``"nemesis"``); returns the event."""
        if type not in TYPES:
            raise ValueError(f"nemesis type must be one of {_names(TYPES)}, not {type!r}")
        if not f or not isinstance(f, str):
            raise ValueError(f"nemesis f must be a non-empty string, not {f!r}")
        with self._lock:
            return self._write(NEMESIS, type, f, value, None)

    def elapsed(self) -> float:
        """Seconds since the recorder started, on the history's clock."""
        return self._clock() - self._t0

    def rebase(self) -> bool:
        """Make now the history's time 0, if nothing is recorded yet (the workload calls it
        as its clients start work, so that fault times count from there); whether it did."""
        with self._lock:
            if self._next_index:
                return False
            self._t0 = self._clock()
            return True

    def close(self) -> None:
        """Close the file; later calls raise ``ValueError``."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> HistoryRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(
        self,
        process: int | str,
        type: str,
        f: str,
        value: Any,
        error: str | None,
        refused: bool = False,
    ) -> dict:
        if self._file is None:
            raise ValueError(f"history recorder for {self.path} is closed")
        now = max(self._last_time, round(self._clock() - self._t0, 6))
        event: dict[str, Any] = {
            "index": self._next_index,
            "time": now,
            "process": process,
            "type": type,
            "f": f,
            "value": value,
        }
        if error is not None:
            event["error"] = str(error)
        if refused:
            event["refused"] = True
        line = json.dumps(event, ensure_ascii=False, allow_nan=False, default=str)
        self._file.write(line + "\n")
        self._file.flush()
        self._next_index += 1
        self._last_time = now
        return event


# -- reading --------------------------------------------------------------------------------
def read_history(path: str | Path) -> list[dict]:
    """Read and validate a history file; raises :class:`HistoryFormatError` on any defect.

    Checks every line is one JSON object with the required fields of the right types,
    ``index`` counts 0, 1, 2 …, ``time`` never goes backwards, and client operations
    pair up (see :func:`pairs`). ``OSError`` propagates when the file cannot be opened.
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise HistoryFormatError(line, f"not UTF-8: {e.reason} at byte {e.start}") from None
    del data
    with gc_paused():
        objects = _decode_bulk(text) if text else []
        if objects is None:
            lines = text.split("\n")
            if text.endswith("\n"):
                lines.pop()
            objects = [_decode_line(line, i + 1) for i, line in enumerate(lines)]
        return validate(objects)


# Two objects on one line, as "}, {" outside any string would show.
_TWO_ON_A_LINE = re.compile(r"\}[ \t\r]*,[ \t\r]*\{")


def _decode_bulk(text: str) -> list | None:
    """Decode the lines of ``text`` as one JSON array (fast), or None if that proves nothing.

    Joining the lines with commas yields exactly one element per line unless a comma we
    insert lands inside a value (which lowers the count) or a line holds two top-level
    values (which raises it). With no line holding "}, {", all values being objects
    rules out the second, so a matching count means each line decoded as itself. Any
    doubt returns None, and the caller decodes line by line for exact error lines.
    """
    if _TWO_ON_A_LINE.search(text):
        return None
    newlines = text.count("\n")
    if text.endswith("\n"):  # the last newline stays, as whitespace before "]"
        lines, array = newlines, text.replace("\n", ",", newlines - 1)
    else:
        lines, array = newlines + 1, text.replace("\n", ",")
    try:
        objects = json.loads("[" + array + "]")
    except ValueError:
        return None
    if len(objects) != lines or any(type(x) is not dict for x in objects):
        return None
    return objects


def _decode_line(line: str, lineno: int) -> Any:
    """Decode one line, naming the line and the problem when it is not one JSON value."""
    if not line.strip():
        raise HistoryFormatError(lineno, "blank line; every line must hold one event")
    try:
        return json.loads(line)
    except ValueError as e:
        raise HistoryFormatError(lineno, f"malformed JSON: {e}") from None


def validate(objects: list) -> list[dict]:
    """Check decoded lines are well-formed events that pair up; returns them as events.

    Raises :class:`HistoryFormatError` with the 1-based line of the first defect.
    """
    last = 0.0
    open_ops: dict[int, dict] = {}
    retired: dict[int, int] = {}
    for i, ev in enumerate(objects):
        if type(ev) is not dict:
            raise HistoryFormatError(i + 1, f"expected a JSON object, got {_json_kind(ev)}")
        try:
            index, t, process = ev["index"], ev["time"], ev["process"]
            typ, f = ev["type"], ev["f"]
        except KeyError:
            missing = [k for k in REQUIRED if k not in ev]
            raise HistoryFormatError(i + 1, f"missing field(s) {', '.join(missing)}") from None
        if index != i or type(index) is not int:
            raise HistoryFormatError(
                i + 1, f"index is {index!r}, expected {i} (0, 1, 2 … in file order)"
            )
        if (type(t) is not float and type(t) is not int) or t < last or not t < INF:
            raise HistoryFormatError(i + 1, _bad_time(t, last, i))
        last = t
        if type(process) is int:
            if typ not in TYPES or f not in CLIENT_FS:
                raise HistoryFormatError(i + 1, _bad_client(typ, f))
            if typ == INVOKE:
                if process in open_ops or process in retired:
                    raise invoke_error(ev, open_ops.get(process), retired.get(process))
                open_ops[process] = ev
            else:
                inv = open_ops.pop(process, None)
                if inv is None or inv["f"] != f:
                    raise completion_error(ev, inv)
                if typ == "info":
                    retired[process] = i
        elif process == NEMESIS:
            if not typ or not f or type(typ) is not str or type(f) is not str:
                raise HistoryFormatError(i + 1, "nemesis type and f must be non-empty strings")
        else:
            raise HistoryFormatError(
                i + 1, f'process must be an integer or "nemesis", got {process!r}'
            )
        if "error" in ev and ev["error"] is not None and type(ev["error"]) is not str:
            raise HistoryFormatError(i + 1, f"error must be a string, got {ev['error']!r}")
    return objects


def _bad_time(t: Any, last: float, i: int) -> str:
    if type(t) is not float and type(t) is not int:
        return f"time must be a number of seconds, got {t!r}"
    if t < 0:
        return f"time must be non-negative seconds since the run started, got {t!r}"
    if t < last:
        return f"time goes backwards: {t} after {last} on line {i}"
    return f"time must be finite, got {t!r}"


def _bad_client(typ: Any, f: Any) -> str:
    if typ not in TYPES:
        return f"type {typ!r} is not one of {_names(TYPES)}"
    return f"client f {f!r} is not one of {_names(CLIENT_FS)}"


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC: building a million small dicts otherwise triggers it constantly."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def pairs(events: Iterable[dict]) -> Iterator[tuple[dict, dict | None]]:
    """Yield each client operation as ``(invoke, completion)``, in completion order.

    Operations still open at the end come last with ``completion`` None (their outcome
    is unknown, like ``info``). Nemesis events are skipped. Raises
    :class:`HistoryFormatError` (line = index + 1) for a completion with no open invoke,
    a completion whose ``f`` differs from its invoke's, a second invoke while one is open,
    and any operation by a process after it received ``info``.
    """
    open_ops: dict[int, dict] = {}
    retired: dict[int, int] = {}
    for ev in events:
        p = ev["process"]
        if p == NEMESIS:
            continue
        if ev["type"] == INVOKE:
            if p in open_ops or p in retired:
                raise invoke_error(ev, open_ops.get(p), retired.get(p))
            open_ops[p] = ev
            continue
        inv = open_ops.pop(p, None)
        if inv is None or inv["f"] != ev["f"]:
            raise completion_error(ev, inv)
        if ev["type"] == "info":
            retired[p] = ev["index"]
        yield inv, ev
    for inv in sorted(open_ops.values(), key=lambda e: e["index"]):
        yield inv, None


def invoke_error(ev: dict, open_invoke: dict | None, info_index: int | None) -> HistoryFormatError:
    """The error for an invoke on a busy process, or on one that already got ``info``."""
    p = ev["process"]
    if open_invoke is not None:
        return HistoryFormatError(
            ev["index"] + 1,
            f"process {p} invokes {ev['f']!r} while its {open_invoke['f']!r} "
            f"from line {open_invoke['index'] + 1} is still open",
        )
    where = "" if info_index is None else f" on line {info_index + 1}"
    return HistoryFormatError(
        ev["index"] + 1, f"process {p} issues {ev['f']!r} after receiving 'info'{where}"
    )


def completion_error(ev: dict, open_invoke: dict | None) -> HistoryFormatError:
    """The error for a completion with no open invoke, or one closing another ``f``."""
    p = ev["process"]
    if open_invoke is None:
        return HistoryFormatError(
            ev["index"] + 1, f"{ev['type']!r} for process {p} with no open invoke"
        )
    return HistoryFormatError(
        ev["index"] + 1,
        f"{ev['type']!r} of {ev['f']!r} closes process {p}'s open {open_invoke['f']!r} "
        f"from line {open_invoke['index'] + 1}",
    )


# -- faults ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ObservedFault:
    """One fault as the history shows it: ``kind`` from ``start`` to ``end`` (None if never
    ended), with its events (the scheduled one is :class:`harness.scenario.Fault`)."""

    kind: str
    label: str
    start: float
    end: float | None
    start_index: int
    end_index: int | None
    #: when the fault was in place: the completion of its start action (its invoke
    #: time when the action had no completion)
    in_effect: float | None = None
    #: a ``timezone`` fault's daylight-saving change: the start plus the ``transition``
    #: seconds its value names (None: no transition)
    transition: float | None = None


def fault_intervals(events: Iterable[dict]) -> list[ObservedFault]:
    """Turn nemesis events into fault intervals, in start order.

    A nemesis ``invoke`` and the next completion with the same ``f`` form one action
    (timed at the invoke, its completion only confirming); a lone event is an action by
    itself; an action that failed did nothing. A value with ``"phase": "start"``
    or ``"end"`` says what the action does to the fault named by its ``"fault"`` (the
    harness's nemesis writes these). Otherwise an action ends a fault when its ``f`` is
    in :data:`FAULT_ENDS`, starts ``stop-``/``end-`` (ending ``start-…``), or is a
    ``clock-skew`` to offset 0; every other action starts a fault of kind ``f``.
    An end closes the open faults of its kind that share a target (``node``/``nodes``/
    ``target`` in the value, or a string value) or, when none does, all of them.
    """
    actions: list[tuple[dict, str, float]] = []
    pending: dict[str, int] = {}
    for ev in events:
        if ev["process"] != NEMESIS:
            continue
        typ, f = ev["type"], ev["f"]
        if typ == INVOKE:
            pending[f] = len(actions)
            actions.append((ev, INVOKE, ev["time"]))
            continue
        slot = pending.pop(f, None)
        if slot is None:
            actions.append((ev, typ, ev["time"]))
        else:
            actions[slot] = (actions[slot][0], typ, ev["time"])
    faults: list[list] = []
    for ev, outcome, done in actions:
        if outcome == "fail":
            continue
        f, value = ev["f"], ev.get("value")
        kind, ending = _classify(f, value)
        targets = _targets(value)
        if not ending:
            label = _fault_label(kind, value, targets)
            moved = _transition(ev["time"], value)
            faults.append([kind, label, ev["time"], None, ev["index"], None, targets, done, moved])
            continue
        open_ = [x for x in faults if x[0] == kind and x[3] is None]
        chosen = [x for x in open_ if targets & x[6]] or open_
        for x in chosen:
            x[3], x[5] = ev["time"], ev["index"]
    return [
        ObservedFault(k, lab, s, e, si, ei, done, moved)
        for k, lab, s, e, si, ei, _, done, moved in faults
    ]


def _transition(start: float, value: Any) -> float | None:
    """When a fault's ``transition`` (seconds after its start) falls, if it names one."""
    at = value.get("transition") if isinstance(value, dict) else None
    if isinstance(at, int | float) and not isinstance(at, bool) and math.isfinite(at):
        return start + at
    return None


def _classify(f: str, value: Any) -> tuple[str, bool]:
    """(fault kind, whether the action ends it) for one nemesis action."""
    if isinstance(value, dict) and value.get("phase") in ("start", "end"):
        kind = value.get("fault")
        return (kind if isinstance(kind, str) and kind else f), value["phase"] == "end"
    ends = _ends_kind(f, value)
    return (f, False) if ends is None else (ends, True)


def _ends_kind(f: str, value: Any) -> str | None:
    if f in FAULT_ENDS:
        return FAULT_ENDS[f]
    for prefix in ("stop-", "end-"):
        if f.startswith(prefix):
            return "start-" + f[len(prefix) :]
    if f == "clock-skew":
        offset = value.get("offset", value.get("seconds")) if isinstance(value, dict) else value
        if isinstance(offset, int | float) and not isinstance(offset, bool) and offset == 0:
            return "clock-skew"
    return None


def _fault_label(kind: str, value: Any, targets: frozenset[str]) -> str:
    """The fault's name and whom it hit: its target nodes (``kill-leader n2``) or, for a
    partition, its sides, the smallest (the node cut off) first
    (``partition-leader n1 | n2,n3``); after the nodes, a timezone fault's ``zone`` or
    another fault's ``detail`` (``lossy-link n1 30%``)."""
    zone = value.get("zone") if isinstance(value, dict) else None
    if targets and isinstance(zone, str) and zone:  # a timezone fault: whom, and the zone
        return f"{kind} {','.join(sorted(targets))} {zone}"
    detail = value.get("detail") if isinstance(value, dict) else None
    if targets and isinstance(detail, str) and detail:
        return f"{kind} {','.join(sorted(targets))} {detail}"
    if targets:
        return f"{kind} {','.join(sorted(targets))}"
    sides = _components(value)
    if sides:
        return f"{kind} {' | '.join(','.join(side) for side in sides)}"
    return kind


def _components(value: Any) -> list[list[str]]:
    """A partition's sides (``"components"`` in the value, or the value itself as a list
    of node lists), each sorted, the smallest first; empty when it names none."""
    raw = value.get("components") if isinstance(value, dict) else value
    if not isinstance(raw, list) or not all(isinstance(c, list) for c in raw):
        return []
    sides = [sorted(x for x in c if isinstance(x, str)) for c in raw]
    return sorted((c for c in sides if c), key=lambda c: (len(c), c))


def _targets(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset({value})
    if not isinstance(value, dict):
        return frozenset()
    found: set[str] = set()
    for key in ("node", "nodes", "target", "targets"):
        v = value.get(key)
        if isinstance(v, str):
            found.add(v)
        elif isinstance(v, list):
            found.update(x for x in v if isinstance(x, str))
    return frozenset(found)


def _names(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def _json_kind(v: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number"
    )
