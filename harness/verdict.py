"""A run's one verdict, decided in one place from its check result and how it ended.

The runner (its exit status and summary), ``python -m harness check`` and ``report.md``
all call :func:`decide`, so a report cannot say "valid" beside a summary that says
INCONCLUSIVE, and a run that failed or was interrupted never says "valid":

================  ====  ==========================================================
verdict           exit  when
================  ====  ==========================================================
``no verdict``    2     the run failed, was interrupted, or never finished, and the
                        history it left proves no anomaly (``lost`` is said, not
                        judged: a message of a run cut short may just not be acked yet)
``ANOMALIES``     1     the checker found anomalies (in a failed run's history: one that
                        what already happened proves, such as a duplicate group lease)
``INCONCLUSIVE``  3     no anomaly, but the run did not test what it planned
                        (``coverage`` in ``check.json``, see :mod:`harness.coverage`)
``valid``         0     no anomaly, and the run tested what it planned
================  ====  ==========================================================

A run folder (one holding ``scenario.json``) is judged as a run: its coverage is
recomputed from the history and the resolved scenario whenever the check is redone
(:func:`coverage`), and a folder whose ``run.json`` records a failure, or that has no
``run.json`` at all, gets no verdict. A history alone is judged by its anomalies.
:func:`harness.judgement.judge` puts these together; this module decides from what it is
given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .coverage import assess
from .errors import EXIT_ANOMALIES, EXIT_HARNESS, EXIT_INCONCLUSIVE, EXIT_VALID
from .scenario import Scenario

VALID, ANOMALIES, INCONCLUSIVE, NO_VERDICT = "valid", "ANOMALIES", "INCONCLUSIVE", "no verdict"
EXIT_CODES = {
    VALID: EXIT_VALID,
    ANOMALIES: EXIT_ANOMALIES,
    NO_VERDICT: EXIT_HARNESS,
    INCONCLUSIVE: EXIT_INCONCLUSIVE,
}


#: anomalies that only a run that ran to its end (drain included) can prove; every other
#: one is proved by what happened, so it holds in the history of a failed run too
NEEDS_A_FINISHED_RUN = frozenset({"lost"})


#: what a report says of an anomaly that a failed run cannot prove
NOT_JUDGED = "not judged"


def without_unprovable(check: Mapping[str, Any], failed: str) -> dict[str, Any]:
    """``check`` as the report of a run that ``failed`` shows it: the anomalies that need a
    finished run (:data:`NEEDS_A_FINISHED_RUN`) moved from ``anomalies`` to ``unjudged``
    (each with its count and why it cannot be judged), so no page lists them as found."""
    anomalies = dict(check.get("anomalies") or {})
    unjudged = {}
    for name in sorted(NEEDS_A_FINISHED_RUN):
        body = anomalies.pop(name, None) or {}
        unjudged[name] = {
            "count": body.get("count", 0),
            "why": (
                f"the run did not finish ({failed}): it neither healed its faults nor drained "
                "the queue, and only a healed, drained queue proves a message lost"
            ),
        }
    return {**check, "anomalies": anomalies, "unjudged": unjudged}


@dataclass(frozen=True)
class Verdict:
    """The verdict and why: the anomalies found, the coverage reasons, or the failure."""

    label: str
    #: the anomalies found; the coverage's reasons; or why the run failed (then what the
    #: checker found in its history, if anything); empty for "valid" and "not checked"
    reasons: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.label]

    def line(self) -> str:
        """One plain line: the label and why."""
        reasons = "; ".join(self.reasons)
        if self.label == VALID:
            why = "no anomaly found"
        elif self.label == ANOMALIES:
            why = ", ".join(self.reasons)
        elif self.label == INCONCLUSIVE:
            why = f"no anomaly found, but the run did not test what it planned: {reasons}"
        else:
            why = f"the run failed: {reasons}" if self.reasons else "it was not checked"
        return f"{self.label}: {why}"


def decide(check: Mapping[str, Any] | None, failed: str | None = None) -> Verdict:
    """The verdict of a check result (``None``: not checked) of a run that ``failed`` (the
    reason) or not (``None``)."""
    anomalies = (check or {}).get("anomalies") or {}
    found = [f"{n} ({a['count']})" for n, a in anomalies.items() if a.get("count")]
    if failed is not None:  # its history may stop mid-way: a message not yet acked is "lost"
        proved = [f"{n} ({a['count']})" for n, a in anomalies.items()
                  if a.get("count") and n not in NEEDS_A_FINISHED_RUN]  # fmt: skip
        if proved:
            return Verdict(ANOMALIES, (*proved, f"in the history of a run that failed: {failed}"))
        seen = f"in the history it recorded the checker found {', '.join(found)}"
        return Verdict(NO_VERDICT, (failed, seen) if found else (failed,))
    if check is not None and not check.get("valid", True):
        return Verdict(ANOMALIES, tuple(found))
    if check is None:
        return Verdict(NO_VERDICT)
    reasons = (check.get("coverage") or {}).get("reasons") or []
    if reasons:
        return Verdict(INCONCLUSIVE, tuple(reasons))
    return Verdict(VALID)


def planned_windows(scenario: Scenario) -> list[tuple[str, float, float]]:
    """The scenario's fault windows as ``(kind, start, end)`` in history time."""
    return [(f.kind, a, b) for f in scenario.faults for a, b in f.windows(scenario.duration)]


def coverage(
    events: Sequence[dict[str, Any]],
    scenario: Scenario,
    check: Mapping[str, Any],
    errors: Sequence[str] = (),
) -> dict[str, Any]:
    """A run's ``coverage`` (``check.json``): :func:`harness.coverage.assess` of its plan,
    inconclusive too when the replicas were not compared. ``errors``: what the nemesis
    said of faults that failed before they reached the history."""
    result = assess(events, planned_windows(scenario), scenario.duration, errors=errors).to_json()
    if scenario.essential_dropped:
        result["reasons"] += list(scenario.essential_dropped)
        result["conclusive"] = False
    replicas = (check.get("stats") or {}).get("replicas") or {}
    if not replicas.get("compared"):
        result["reasons"].append(f"the replicas were not compared: {replicas.get('reason')}")
        result["conclusive"] = False
    return result
