"""Judging a run: its history checked, its plan's coverage added, its verdict decided.

:func:`judge` is the one way a run is judged, from its history events (with its
replicas' record, its plan and how it ended) to the check result, its coverage and the
verdict: ``run`` (:mod:`harness.runner`) calls it with what it holds in memory; ``check``
(:mod:`harness.check_cli`) and ``report.md`` (:mod:`harness.report`) through
:func:`judge_run`, which reads them from a run folder (:class:`harness.store.RunStore`);
the plots (:mod:`harness.plots.run`) with what they read from the folder. The checker
finds the anomalies (:func:`harness.checker.check`), :mod:`harness.verdict` decides from
what it is given; this module puts them together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import divergence
from .checker import check
from .errors import EXIT_HARNESS
from .history import gc_paused, read_history
from .scenario import Scenario, ScenarioError
from .store import REPLICAS, SCENARIO, RunStore
from .verdict import Verdict, coverage, decide, without_unprovable

#: why a run folder without a readable run.json gets no verdict
NEVER_FINISHED = "it never finished (run.json is missing or unreadable: was it killed?)"


@dataclass(frozen=True)
class Plan:
    """What a run planned to test: its resolved scenario, and what the nemesis said of
    faults that failed before they reached the history; or why the plan is unknown."""

    scenario: Scenario | None
    errors: tuple[str, ...] = ()
    unknown: str = ""

    def coverage(self, events: Sequence[dict[str, Any]], result: Mapping[str, Any]) -> dict:
        """The run's ``coverage`` (``check.json``); inconclusive when the plan is unknown."""
        if self.scenario is None:
            return {"conclusive": False, "reasons": [f"the run's plan is unknown: {self.unknown}"]}
        return coverage(events, self.scenario, result, self.errors)


@dataclass(frozen=True)
class Judgement:
    """A run judged: the check result (``check.json``'s shape; None: not checked) and
    the verdict (:func:`harness.verdict.decide`)."""

    result: dict[str, Any] | None
    verdict: Verdict


def judge(
    events: Sequence[dict[str, Any]] | None,
    replicas: Mapping[str, Any] | None = None,
    plan: Plan | None = None,
    failed: str | None = None,
    result: dict[str, Any] | None = None,
) -> Judgement:
    """Judge a run: check its history ``events`` with its ``replicas`` record unless
    ``result`` is a check made already (a stored ``check.json``), add the coverage of its
    ``plan`` when the result lacks one (a history alone has no plan), and decide the
    verdict of a run that ``failed`` (the reason) or not (``None``).

    ``events`` None: the history is not read (it cannot be, or ``result`` says all), so
    nothing is checked and the verdict is that of ``result`` (None: not checked). Raises
    what :func:`harness.checker.check` raises for a history whose operations do not pair
    up or a malformed record.
    """
    if events is not None:
        if result is None:
            result = check(events, replicas)
        if plan is not None and "coverage" not in result:
            result = {**result, "coverage": plan.coverage(events, result)}
    verdict = decide(result, failed)
    if failed is not None and result is not None:
        result = without_unprovable(result, failed)
    return Judgement(result, verdict)


def failure(run: Any) -> str | None:
    """Why a run failed, from its record (``run.json``'s content, None when there is
    none: it never finished), or None when it ended with a check."""
    if not isinstance(run, dict):
        return NEVER_FINISHED
    if run.get("exit") == EXIT_HARNESS:
        return str(run.get("reason") or "the harness failed")
    return None


def failure_of(store: RunStore, run: Any = None) -> str | None:
    """Why the run in ``store`` failed (:func:`failure` of ``run``, else of ``run.json``),
    or None: it ended, or the folder holds no run."""
    if not store.is_run():
        return None
    return failure(store.run_info() if run is None else run)


def plan_of(store: RunStore, run: Any = None) -> Plan | None:
    """The plan of the run in ``store``: ``scenario.json`` and the nemesis errors of
    ``run`` (else of ``run.json``); None when the folder holds no run. A scenario.json
    that cannot be read makes the plan unknown."""
    if not store.is_run():
        return None
    path = store.path(SCENARIO)
    try:
        scenario = Scenario.from_json(store.read_json(SCENARIO), str(path))
    except (OSError, ValueError) as e:  # ScenarioError is a ValueError
        why = e if isinstance(e, ScenarioError) else f"{path}: cannot read: {e}"
        return Plan(None, unknown=str(why))
    run = store.run_info() if run is None else run
    errors = (run.get("nemesis_errors") if isinstance(run, dict) else None) or []
    return Plan(scenario, tuple(str(e) for e in errors))


def judge_run(
    store: RunStore, run: Any = None, result: dict[str, Any] | None = None, history: bool = True
) -> Judgement:
    """The run in ``store`` judged (:func:`judge`) as its files say, with ``run`` (else
    ``run.json``). ``result`` (a stored check) is kept; the history is read when the
    result or its coverage is missing, and the replicas' record when the result is;
    ``history=False``: it cannot be read, the verdict is ``result``'s.

    Raises ``HistoryFormatError``, ``SnapshotFormatError`` or ``OSError`` for a file
    that cannot be read.
    """
    run = store.run_info() if run is None else run
    failed = failure_of(store, run)
    if not history or (result is not None and "coverage" in result):
        return judge(None, failed=failed, result=result)
    replicas = divergence.read(store.path(REPLICAS)) if result is None else None
    with gc_paused():
        return judge(read_history(store.history), replicas, plan_of(store, run), failed, result)
