"""The reductions a shrink tries, as pure functions of a scenario's plain data.

A scenario here is the dict ``scenario.json`` holds (``Scenario.to_json()``): absolute
fault times, every workload key. Each reduction returns a smaller scenario or nothing
when it does not apply; :func:`candidates` lists them biggest saving first, and
:func:`to_toml` writes one as a scenario file ``python -m harness run`` reads back.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..scenario import Scenario

#: no candidate runs shorter than this (seconds of workload)
MIN_DURATION = 5.0
#: no fault lasts less than this (seconds)
MIN_FAULT = 1.0
#: after the last fault window, this long of workload stays (the fault's effects land)
TAIL = 2.0

Data = dict[str, Any]


@dataclass(frozen=True)
class Candidate:
    """One reduction of the current scenario: what changed, and the result."""

    change: str
    data: Data


def plain(data: Data) -> Data:
    """``data`` as JSON would give it back (tuples as lists), which is what files hold."""
    return json.loads(json.dumps(data))


def validate(data: Data) -> Scenario:
    """Parse ``data`` as the run command would (``ScenarioError`` if it is not runnable)."""
    return Scenario.from_json(plain(data), f"candidate {data.get('name')}", name="shrunk")


def size(data: Data) -> tuple:
    """An order on scenarios: fewer fault windows, then shorter, fewer workers, groups."""
    w = data["workload"]
    return (
        fault_windows(data),
        data["duration"],
        sum(f["duration"] for f in data["faults"]),
        _last_end(data),
        w["publishers"] + w["sync_claimers"] + w["async_claimers"],
        w["groups_per_publisher"] * w["publishers"],
        data["nodes"],
    )


def fault_windows(data: Data) -> int:
    """How many fault windows the schedule opens within the run."""
    n = 0
    for f in data["faults"]:
        t = f["start"]
        while t < data["duration"]:
            n += 1
            if not f.get("every"):
                break
            t += f["every"]
    return n


def describe(data: Data) -> str:
    """One line: nodes, duration, faults (kind start+length), workers and groups."""
    w = data["workload"]
    faults = (
        ", ".join(
            f"{f['kind']} {round(f['start'], 2):g}+{round(f['duration'], 2):g}s"
            + (f" every {round(f['every'], 2):g}s" if f.get("every") else "")
            for f in data["faults"]
        )
        or "no faults"
    )
    return (
        f"{data['nodes']} nodes, {data['duration']:g} s; {faults}; "
        f"{w['publishers']} pub x {w['groups_per_publisher']} groups, "
        f"{w['sync_claimers']}+{w['async_claimers']} claimers"
    )


def _r(x: float) -> float:
    """Times rounded to 0.1 s (a shrunk file should read like a hand-written one)."""
    return round(x, 1)


def _with(data: Data, fn: Callable[[Data], None]) -> Data:
    out = copy.deepcopy(data)
    fn(out)
    return out


def _last_end(data: Data) -> float:
    """Where the last single (non-repeating) fault window ends; 0 without faults."""
    return max((f["start"] + f["duration"] for f in data["faults"]), default=0.0)


def cut_to(data: Data, duration: float) -> Data | None:
    """The run cut at ``duration`` s: faults starting later dropped, the rest clipped."""
    duration = _r(max(MIN_DURATION, duration))
    if duration >= data["duration"]:
        return None

    def fn(d: Data) -> None:
        d["duration"] = duration
        kept = []
        for f in d["faults"]:
            if f["start"] >= duration - MIN_FAULT:
                continue
            f["duration"] = _r(min(f["duration"], duration - f["start"]))
            if f.get("every") and f["start"] + f["every"] >= duration:
                f.pop("every")
            kept.append(f)
        d["faults"] = kept

    return _with(data, fn)


def scale_to(data: Data, duration: float) -> Data | None:
    """The run shortened to ``duration`` s with the whole fault schedule scaled to match."""
    duration = _r(max(MIN_DURATION, duration))
    if duration >= data["duration"]:
        return None
    k = duration / data["duration"]

    def fn(d: Data) -> None:
        d["duration"] = duration
        for f in d["faults"]:
            f["start"] = _r(f["start"] * k)
            f["duration"] = _r(max(MIN_FAULT, f["duration"] * k))
            if f.get("every"):
                f["every"] = _r(max(f["duration"], f["every"] * k))

    return _with(data, fn)


def _durations(data: Data) -> Iterator[tuple[str, Data | None]]:
    d = data["duration"]
    if not data["faults"]:
        yield f"cut the run to {MIN_DURATION:g} s (the shortest)", cut_to(data, MIN_DURATION)
    elif not any(f.get("every") for f in data["faults"]):
        fit = max(math.ceil(_last_end(data) + TAIL), MIN_DURATION)
        if fit < d:
            why = f"the faults' end + {TAIL:g} s"
            yield f"cut the run to {fit:g} s ({why})", cut_to(data, fit)
    for target in (d / 2, d * 3 / 4):
        yield f"cut the run to {_r(max(target, MIN_DURATION)):g} s", cut_to(data, target)
        yield f"scale the run to {_r(max(target, MIN_DURATION)):g} s", scale_to(data, target)


def _faults(data: Data) -> Iterator[tuple[str, Data | None]]:
    faults = data["faults"]
    for i, f in enumerate(faults):
        yield (
            f"drop fault {i} ({f['kind']})",
            _with(data, lambda d, i=i: d["faults"].pop(i)),
        )
    for i, f in enumerate(faults):
        if f.get("every"):
            yield (
                f"fault {i} ({f['kind']}) once, not every {f['every']:g} s",
                _with(data, lambda d, i=i: d["faults"][i].pop("every")),
            )
    for i, f in enumerate(faults):
        if f["duration"] / 2 >= MIN_FAULT:

            def half(d: Data, i: int = i) -> None:
                g = d["faults"][i]
                g["duration"] = _r(g["duration"] / 2)

            yield f"fault {i} ({f['kind']}) lasts {_r(f['duration'] / 2):g} s", _with(data, half)
    for i, f in enumerate(faults):
        if f["start"] >= 1.0:

            def early(d: Data, i: int = i) -> None:
                g = d["faults"][i]
                g["start"] = _r(g["start"] / 2)

            yield f"fault {i} ({f['kind']}) starts at {_r(f['start'] / 2):g} s", _with(data, early)


def _workers(data: Data) -> Iterator[tuple[str, Data | None]]:
    w = data["workload"]

    def set_(key: str, value: int) -> Data:
        return _with(data, lambda d: d["workload"].__setitem__(key, value))

    if w["publishers"] > 1:
        yield "1 publisher", set_("publishers", 1)
    for key, other in (("async_claimers", "sync_claimers"), ("sync_claimers", "async_claimers")):
        n = w[key]
        if n > 0 and w[other] > 0:
            yield f"no {key.replace('_', ' ')}", set_(key, 0)
        if n > 1:
            yield f"{n // 2} {key.replace('_', ' ')}", set_(key, n // 2)
    if w["groups_per_publisher"] > 1:
        n = w["groups_per_publisher"] // 2
        yield f"{n} groups per publisher", set_("groups_per_publisher", n)
    if data["nodes"] > 3:
        yield "3 nodes", _with(data, lambda d: d.__setitem__("nodes", 3))


def candidates(data: Data) -> list[Candidate]:
    """Every runnable reduction of ``data``, biggest saving first, each strictly smaller."""
    data = plain(data)
    out: list[Candidate] = []
    seen: set[str] = set()
    for gen in (_durations, _faults, _workers):
        for change, new in gen(data):
            if new is None or size(new) >= size(data):
                continue
            try:
                validate(new)
            except ValueError:
                continue
            key = to_toml(new)
            if key in seen:
                continue
            seen.add(key)
            out.append(Candidate(change, new))
    return out


# -- scenario files ----------------------------------------------------------------------
def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return f"{v!r}" if isinstance(v, int) else f"{round(v, 6)!r}"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, str):
        escaped = v.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    raise TypeError(f"cannot write {v!r} to a scenario file")


def to_toml(data: Data, header: str = "") -> str:
    """``data`` as a scenario file (``header`` lines become comments at the top)."""
    lines = [f"# {h}".rstrip() for h in header.splitlines()]
    lines += [f"description = {_value(data['description'])}"]
    lines += [f"nodes = {data['nodes']}", f"duration = {_value(float(data['duration']))}", ""]
    lines.append("[workload]")
    lines += [f"{k} = {_value(v)}" for k, v in sorted(data["workload"].items())]
    for f in data["faults"]:
        lines += ["", "[[faults]]", f"kind = {_value(f['kind'])}"]
        lines += [f"{k} = {_value(v)}" for k, v in f.items() if k != "kind" and v is not None]
    return "\n".join(lines) + "\n"
