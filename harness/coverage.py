"""Did a run test what it meant to test? A pure function of the history and the plan.

A history with no anomaly proves little when the faults it planned never happened or the
cluster was down for most of it: "valid" would then say more than the run showed. A run
is **inconclusive** (exit status 3) when any of these holds, each named in the verdict:

- **faults missing**: fewer fault windows started than the scenario planned (a fault
  whose start failed, e.g. "no leader to target", is recorded as a nemesis ``fail``);
- **quiet too long**: no client operation completed ``ok`` or was refused on purpose
  for longer than ``max_quiet`` seconds (the cluster had no leader, or nothing answered);
- **fault window starved**: in a fault window plus ``grace`` seconds after it, the
  workload completed fewer than ``min_share`` of the ``ok`` operations it completes
  outside fault windows in the same time (so the fault was injected into an idle run);
  a window observed for less than 5 s (it began near the run's end) is not judged;
- **transition missed**: a ``timezone`` start whose daylight-saving change (its value's
  ``transition``, seconds after its invoke) came before the start completed: its nodes
  were still restarting into the zone, so no change happened while they ran;
- **fault not undone**: a fault's end failed (a node that never rejoined, a partition
  that did not heal), so the cluster did not end as it began and the drain's replica
  comparison covers less than the scenario meant.

A call the queue refused on purpose (a ``fail`` marked ``refused``, with one line saying
why: rqueue refuses timed calls while every node's zone is off UTC) is an answer, not
silence: it counts as answered for both rules, and each window lists its ``refused``.

Anomalies take precedence: a run with anomalies exits 1 whatever its coverage.
``python -m harness check`` on a run folder's history judges it again from the folder's
``scenario.json`` (:func:`harness.judgement.plan_of`); a history alone has no plan.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: the longest stretch without any ok operation that a conclusive run may have (seconds)
MAX_QUIET = 15.0
#: seconds after a fault window still counted as that fault's (recovery is its effect)
GRACE = 10.0
#: the least share of the outside-fault rate of ok operations a fault window must reach
MIN_SHARE = 0.05
#: a fault window observed for less than this (it started near the run's end) is not
#: judged: an election alone can take a few seconds with nothing completing
MIN_JUDGED = 5.0


@dataclass(frozen=True)
class Coverage:
    """What a run exercised, and why it is inconclusive (empty ``reasons``: conclusive)."""

    planned_faults: int
    started_faults: int
    longest_quiet: float
    quiet_from: float
    reasons: list[str] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def conclusive(self) -> bool:
        return not self.reasons

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "conclusive": self.conclusive}


def assess(
    events: Sequence[dict[str, Any]],
    planned: Sequence[tuple[str, float, float]],
    duration: float,
    *,
    errors: Sequence[str] = (),
    max_quiet: float = MAX_QUIET,
    grace: float = GRACE,
    min_share: float = MIN_SHARE,
) -> Coverage:
    """Judge a run's coverage.

    ``events``: the history; ``planned``: the scenario's fault windows as ``(kind, start,
    end)`` in history time; ``duration``: the workload's length in seconds; ``errors``:
    what the nemesis said of faults that failed before they reached the history.
    """
    starts = _start_actions(events)
    happened = [w for w in planned if _started(w, starts)]
    reasons: list[str] = []
    if len(happened) < len(planned):
        failed = [_error_of(e) for e in starts if e.get("type") == "fail"]
        why = "; ".join(dict.fromkeys([*errors, *failed])) or "never started"
        reasons.append(
            f"{len(planned) - len(happened)} of {len(planned)} planned faults did not "
            f"happen ({why})"
        )
    undone = [e for e in events if _is_failed_end(e)]
    if undone:
        listed = "; ".join(
            dict.fromkeys(f"{e['value'].get('fault') or e['f']}: {_error_of(e)}" for e in undone)
        )
        reasons.append(
            f"{len(undone)} fault(s) could not be undone, so the cluster did not end as it "
            f"began ({listed})"
        )
    late = [e for e in starts if _transition_missed(e)]
    if late:
        listed = ", ".join(
            f"{e['value'].get('fault')} at {e['at']:.1f} s (in place after "
            f"{float(e['time']) - e['at']:.1f} s, transition at +{e['value']['transition']:g} s)"
            for e in late
        )
        reasons.append(
            f"{len(late)} time zone change(s) came before their nodes ran in the zone, so "
            f"no transition happened while they ran: {listed}"
        )
    ok_times = sorted(
        float(e["time"]) for e in events if e.get("process") != "nemesis" and e["type"] == "ok"
    )
    refused = sorted(
        float(e["time"])
        for e in events
        if e.get("refused") is True and e["type"] == "fail" and e.get("process") != "nemesis"
    )
    answered = sorted(ok_times + refused) if refused else ok_times
    quiet, quiet_from = _longest_gap(answered, duration)
    if quiet > max_quiet:
        reasons.append(
            f"no operation succeeded for {quiet:.1f} s (from {quiet_from:.1f} s; bound "
            f"{max_quiet:g} s): the cluster was unavailable"
        )
    windows = _windows(ok_times, [(a, b) for _, a, b in happened], duration, grace)
    for w, (kind, _, _) in zip(windows, happened, strict=True):
        w["kind"] = kind
        if refused:
            w["refused"] = sum(1 for t in refused if w["start"] <= t <= w["end"])
    starved = [
        w
        for w in windows
        if w["end"] - w["start"] >= MIN_JUDGED
        and w["expected"] > 0
        and w["ok"] + w.get("refused", 0) < min_share * w["expected"]
    ]
    if starved:
        listed = ", ".join(
            f"{w['kind']} at {w['start']:.1f} s ({w['ok']} ok"
            + (f", {w['refused']} refused" if w.get("refused") else "")
            + ")"
            for w in starved
        )
        reasons.append(
            f"{len(starved)} fault window(s) saw under {min_share:.0%} of the usual ok "
            f"operations: {listed}"
        )
    return Coverage(
        planned_faults=len(planned),
        started_faults=len(happened),
        longest_quiet=round(quiet, 3),
        quiet_from=round(quiet_from, 3),
        reasons=reasons,
        windows=windows,
    )


#: how late after its planned time a fault's start may be recorded (the nemesis waits up
#: to 5 s for a leader to target) and still count as that window's
START_SLACK = 7.0


def _started(window: tuple[str, float, float], starts: Sequence[dict[str, Any]]) -> bool:
    """Whether a start of the window's kind was recorded near its planned time (the time
    of the action's invoke: a fault that restarts nodes, ``timezone``, completes seconds
    later) and completed ``info``."""
    kind, a, _ = window
    return any(
        e.get("type") == "info"
        and e["value"].get("fault") == kind
        and a - 0.5 <= float(e["at"]) <= a + START_SLACK
        for e in starts
    )


def _transition_missed(e: dict[str, Any]) -> bool:
    """Whether a fault start with a ``transition`` (a time zone's daylight-saving change,
    seconds after its invoke) was in place only after that moment: its nodes, restarted
    in the zone, were not yet running when it came."""
    at = e["value"].get("transition")
    if e.get("type") != "info" or isinstance(at, bool) or not isinstance(at, int | float):
        return False
    return float(e["time"]) > e["at"] + at


def _start_actions(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each fault start's completion (``info`` or ``fail``), with ``at``: the time of its
    invoke (of the same ``f``), or its own time when it had none."""
    invoked: dict[str, float] = {}
    out = []
    for e in events:
        if e.get("process") != "nemesis":
            continue
        if e.get("type") == "invoke":
            invoked[e["f"]] = float(e["time"])
        elif _is_fault_start(e):
            out.append({**e, "at": invoked.pop(e["f"], float(e["time"]))})
    return out


def _is_fault_start(e: dict[str, Any]) -> bool:
    value = e.get("value")
    return (
        e.get("process") == "nemesis"
        and e.get("type") in ("info", "fail")
        and isinstance(value, dict)
        and value.get("phase") == "start"
    )


def _is_failed_end(e: dict[str, Any]) -> bool:
    """A fault's end (its undo) that the nemesis recorded as failed."""
    value = e.get("value")
    return (
        e.get("process") == "nemesis"
        and e.get("type") == "fail"
        and isinstance(value, dict)
        and value.get("phase") == "end"
    )


def _error_of(e: dict[str, Any]) -> str:
    value = e.get("value") or {}
    return str(e.get("error") or value.get("error") or "failed")


def _longest_gap(times: Sequence[float], duration: float) -> tuple[float, float]:
    """The longest stretch of ``[0, duration]`` without a time in ``times``, and its start."""
    edges = [0.0, *[t for t in times if t <= duration], duration]
    best, at = 0.0, 0.0
    for a, b in itertools.pairwise(edges):
        if b - a > best:
            best, at = b - a, a
    return best, at


def _windows(
    ok_times: Sequence[float],
    planned: Iterable[tuple[float, float]],
    duration: float,
    grace: float,
) -> list[dict[str, Any]]:
    spans = [(s, min(duration, e + grace)) for s, e in planned]
    inside = sum(1 for t in ok_times if any(a <= t <= b for a, b in spans))
    covered = _union_length(spans)
    outside_time = max(0.0, duration - covered)
    # the usual rate: outside every fault's span, or over the whole run if faults cover
    # nearly all of it
    if outside_time >= MIN_JUDGED:
        rate = (len(ok_times) - inside) / outside_time
    else:
        rate = len(ok_times) / duration if duration > 0 else 0.0
    out = []
    for a, b in spans:
        n = sum(1 for t in ok_times if a <= t <= b)
        expected = round(rate * (b - a), 1)
        out.append({"start": round(a, 3), "end": round(b, 3), "ok": n, "expected": expected})
    return out


def _union_length(spans: Iterable[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total
