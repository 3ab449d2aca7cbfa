"""``report.md``: one readable page per run, from the files in its folder.

Sections: the verdict (:func:`harness.verdict.decide`, also in the summary table); the
scenario (``scenario.json``), the subject and versions (``run.json``, ``versions.json``)
when present; the summary table; every anomaly found, with the sentence saying why its
examples are anomalies (:mod:`harness.explanations`) and its example operations printed
as the actual history lines; the calls the queue refused on purpose, in its own words;
statistics and availability; the plots that exist. Works on any folder holding a
``history.jsonl``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.wording import plural

from . import divergence
from .checker import ANOMALIES as ANOMALY_KINDS
from .checker.stalls import describe as describe_stall
from .explanations import explain
from .history import NEMESIS, HistoryFormatError
from .judgement import Judgement, judge_run
from .store import (
    ANOMALY_TIMELINE,
    LATENCY,
    REPLICAS,
    REPORT,
    SCENARIO,
    THROUGHPUT,
    VERSIONS,
    RunStore,
)
from .verdict import ANOMALIES, INCONCLUSIVE, NO_VERDICT, NOT_JUDGED, Verdict

REPORT_EXAMPLES = 5
#: each plot's file and title: the plot draws this title, the report uses it as caption
PLOTS = (
    (THROUGHPUT, "Throughput: successful operations per second, faults shaded"),
    (LATENCY, "Latency of every operation by outcome, p50 and p99 of the successful ones"),
    (ANOMALY_TIMELINE, "Leases around the first anomalies"),
)
#: the summary table's rows in the order of the run's closing table (nested keys sorted),
#: whether the summary comes from the runner or from run.json (stored with sorted keys)
SUMMARY_ORDER = (
    "scenario", "verdict", "subject", "engine", "backend", "nodes", "seed", "duration",
    "ops", "refused", "faults", "worker_disruptions", "dropped", "skipped_faults", "drain",
    "replicas", "anomalies",
    "nemesis_errors", "inconclusive",
    "warning", "error", "exit", "run_dir",
)  # fmt: skip


@dataclass(frozen=True)
class ReportParts:
    """What ``report.md`` and ``report.html`` show of a run, judged once for both.

    ``verdict``, ``setup`` (scenario, subject and options, versions), ``summary`` and
    ``tail`` (refusals, statistics, fault mechanisms) are Markdown lines; the anomalies
    and plots each page renders its own way, from ``judgement.result``, ``history`` (the
    history's lines, by index) and the folder.
    """

    store: RunStore
    run: dict[str, Any]
    history: list[str]
    #: why the history could not be checked (None: it was, or it had not to be)
    error: str | None
    judgement: Judgement
    verdict: list[str]
    setup: list[str]
    summary: list[str]
    tail: list[str]

    @property
    def head(self) -> list[str]:
        """What report.md shows before the anomalies."""
        return [*self.verdict, *self.setup, *self.summary]

    @property
    def title(self) -> str:
        return f"Run report: {self.store.root.resolve().name}"


def report_parts(
    run_dir: str | Path, summary: dict | None = None, run: dict | None = None
) -> ReportParts:
    """Judge the run in ``run_dir`` and lay out its report's sections (see
    :func:`write_report` for ``summary`` and ``run``)."""
    store = RunStore(run_dir)
    record = run if run is not None else store.run_info()  # None: the run never finished
    run = record if isinstance(record, dict) else {}
    summary = summary if summary is not None else run.get("summary")
    history_lines, error = _history_lines(store.history)
    judged, error = _judged(store, record, error)
    result, verdict = judged.result, judged.verdict
    setup = _scenario(store.json_or_none(SCENARIO))
    setup += _setup(run, store.json_or_none(VERSIONS))
    table: list[str] = []
    if summary:
        if "verdict" in summary:  # the one verdict, also where the run's summary said it
            summary = {**summary, "verdict": verdict.label}
        table = ["## Summary", "", *_table(_flatten(ordered_summary(summary))), ""]
    tail: list[str] = []
    if result is not None:
        tail += _refusals((result.get("stats") or {}).get("refusals"))
        tail += _statistics(result.get("stats", {}))
    tail += _mechanisms(history_lines)
    verdict_lines = _verdict(verdict, result, error, run)
    return ReportParts(store, run, history_lines, error, judged, verdict_lines, setup, table, tail)


def write_report(
    run_dir: str | Path,
    summary: dict | None = None,
    run: dict | None = None,
    parts: ReportParts | None = None,
) -> Path:
    """Write ``run_dir/report.md`` and return its path.

    ``run`` is the run's record (the runner passes it as it wrote it; else ``run.json``'s
    is read). ``summary`` (the runner's summary) is shown as a table; without it the
    record's ``summary`` is used, if any. The run is judged by
    :func:`harness.judgement.judge_run`: the check result comes from ``check.json``, or
    from checking ``history.jsonl`` when there is none. ``parts``: the run judged and laid
    out already (:func:`report_parts`, shared with ``report.html``).
    """
    parts = parts if parts is not None else report_parts(run_dir, summary, run)
    lines: list[str] = [f"# {parts.title}", "", *parts.head]
    result = parts.judgement.result
    if result is not None:
        lines += _anomalies(result, parts.history)
    lines += parts.tail
    lines += _plots(parts.store)
    return parts.store.write_text(REPORT, "\n".join(lines).rstrip() + "\n")


def _judged(store: RunStore, run: Any, error: str | None) -> tuple[Judgement, str | None]:
    """The run judged as its folder says, from ``check.json`` when it has one (then not
    checked again, unless it lacks the run's coverage), and why the history could not be
    checked, if so (``error``: it cannot even be read)."""
    stored = store.stored_check()
    if error is None:
        try:
            return judge_run(store, run, stored), None
        except HistoryFormatError as e:
            error = f"line {e.line}: {e.reason}"
        except divergence.SnapshotFormatError as e:
            error = f"{REPLICAS}: {e}"
    return judge_run(store, run, stored, history=False), error


def ordered_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` in :data:`SUMMARY_ORDER` (other keys after, sorted), nested keys sorted:
    the same table from the runner's dict as from the sorted copy in run.json."""
    rank = {k: i for i, k in enumerate(SUMMARY_ORDER)}
    keys = sorted(summary, key=lambda k: (rank.get(k, len(rank)), k))
    return {k: _sorted(summary[k]) for k in keys}


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value, key=str)}
    return value


def _history_lines(path: Path) -> tuple[list[str], str | None]:
    try:
        # lines end at "\n" only: str.splitlines() would also split inside a JSON string
        # holding U+2028, U+0085 and the like (a group id can), shifting every index
        text = path.read_text(encoding="utf-8")
        return text.removesuffix("\n").split("\n") if text else [], None
    except FileNotFoundError:
        return [], f"{path.name} is missing"
    except (OSError, UnicodeDecodeError) as e:
        return [], f"{path.name} cannot be read: {e}"


def _verdict(verdict: Verdict, result: dict | None, error: str | None, run: dict) -> list[str]:
    if error is not None:
        return [f"**Verdict: the history could not be checked** ({error}).", ""]
    if verdict.label == NO_VERDICT:
        if not verdict.reasons:
            return ["**Verdict: not checked.**", ""]
        return [f"**No verdict: the run failed:** {'; '.join(verdict.reasons)}", ""]
    if verdict.label == INCONCLUSIVE:
        out = ["**Verdict: INCONCLUSIVE** — no anomaly found, but the run did not test what "
               "it planned:", "", *[f"- {r}" for r in verdict.reasons], ""]  # fmt: skip
    elif verdict.label == ANOMALIES:
        out = [f"**Verdict: ANOMALIES** — {', '.join(verdict.reasons)}.", ""]
    else:
        out = ["**Verdict: valid** — no anomaly found.", ""]
    if run.get("reason"):
        out += [f"Run ended with: {run['reason']}", ""]
    return out


def _scenario(scenario: dict | None) -> list[str]:
    if not isinstance(scenario, dict):
        return []
    out = ["## Scenario", ""]
    omit = ("faults", "workload", "dropped", "skipped", "drawn", "chaos")
    head = {k: v for k, v in scenario.items() if k not in omit}
    out += _table(_flatten(head))
    if isinstance(scenario.get("workload"), dict):
        out += ["", "Workload:", "", *_table(_flatten(scenario["workload"]))]
    out += _drawn(scenario.get("drawn"))
    faults = scenario.get("faults") or []
    if faults:
        out += ["", "Fault schedule:", ""]
        for f in faults:
            if isinstance(f, dict):
                rest = ", ".join(f"{k}={v}" for k, v in f.items() if k != "kind")
                out.append(f"- `{f.get('kind', '?')}` {rest}")
    dropped = scenario.get("dropped") or []
    if dropped:
        out += ["", "Fault windows `--time` dropped (no room left for them in this run):", ""]
        out += [f"- {why}" for why in dropped]
    skipped = scenario.get("skipped") or []
    if skipped:
        out += ["", "Fault windows left out on purpose (`--skip-fault`):", ""]
        out += [f"- {window}" for window in skipped]
    return [*out, ""]


def _drawn(drawn: Any) -> list[str]:
    """What a ``[chaos]`` table drew (harness.chaos.record): from which pool, with which
    seed, each window; and the kinds it left out, with why."""
    if not isinstance(drawn, dict):
        return []
    pool = ", ".join(f"`{k}`" for k in drawn.get("pool") or [])
    out = ["", f"Drawn by `[chaos]` from seed {drawn.get('seed')} out of {pool}:", ""]
    out += [f"- {line}" for line in drawn.get("schedule") or []]
    asked, got = drawn.get("asked"), len(drawn.get("schedule") or [])
    if isinstance(asked, int) and asked > got:
        out.append(
            f"- ({asked - got} of {plural(asked, 'window')} asked for did not fit in the run)"
        )
    left = drawn.get("left_out") or {}
    if isinstance(left, dict) and left:
        out += ["", "Left out of the pool:", ""]
        out += [f"- `{k}`: {why}" for k, why in left.items()]
    return out


def _setup(run: dict, versions: Any) -> list[str]:
    out: list[str] = []
    options = run.get("options") if isinstance(run, dict) else None
    if isinstance(options, dict):
        keep = ("subject", "engine", "backend", "nodes", "seed", "time")
        shown = {k: options[k] for k in keep if options.get(k) is not None}
        if shown:
            out += ["## Subject and options", "", *_table(shown), ""]
    if isinstance(versions, dict) and versions:
        out += ["## Versions", "", *_table(_flatten(versions)), ""]
    return out


def _anomalies(result: dict, history: list[str]) -> list[str]:
    anomalies = result.get("anomalies", {})
    out = ["## Anomalies", "", "| anomaly | count |", "|---|---:|"]
    unjudged = result.get("unjudged") or {}
    out += [f"| {name} | {anomaly_count(name, anomalies, unjudged)} |" for name in ANOMALY_KINDS]
    out.append("")
    for name, body in unjudged.items():
        out += [f"Not judged: {name}: {body.get('why')}.", ""]
    for name in ANOMALY_KINDS:
        body = anomalies.get(name) or {}
        if not body.get("count"):
            continue
        shown = body.get("examples", [])[:REPORT_EXAMPLES]
        out += [f"### {name}: {body['count']}", "", f"Why it is an anomaly: {explain(name)}", ""]
        if name == divergence.NAME:
            out += _divergence_examples(shown)
            continue
        out.append(f"{len(shown)} of the examples, each as the history lines that show it:")
        out.append("")
        for k, example in enumerate(shown, 1):
            out += [f"Example {k} (indices {', '.join(map(str, example))}):", "", "```json"]
            for i in example:
                out.append(history[i] if 0 <= i < len(history) else f"(no line {i})")
            out += ["```", ""]
    return out


def anomaly_count(name: str, anomalies: dict, unjudged: dict) -> str:
    """An anomaly's count as the table shows it: :data:`NOT_JUDGED` when the run could not
    prove it."""
    if name in unjudged:
        return NOT_JUDGED
    return str((anomalies.get(name) or {}).get("count", 0))


def _refusals(refusals: Any) -> list[str]:
    """The calls the queue refused on purpose, each distinct line in its own words."""
    if not isinstance(refusals, dict) or not refusals.get("count"):
        return []
    lines = refusals.get("lines") or {}
    out = [
        "## Refusals",
        "",
        f"The queue refused {refusals['count']} calls on purpose (certainly not applied), "
        "saying why; the coverage counts them as answers. Each line, as the queue wrote it:",
        "",
        "| calls | first s | last s | line |",
        "|---:|---:|---:|---|",
    ]
    for line, seen in lines.items():
        text = str(line).replace("|", "/")
        out.append(f"| {seen['count']} | {seen['first']:.2f} | {seen['last']:.2f} | {text} |")
    shown = sum(seen["count"] for seen in lines.values())
    if shown < refusals["count"]:
        out.append(f"| {refusals['count'] - shown} | | | (other lines) |")
    return [*out, ""]


def _divergence_examples(shown: list) -> list[str]:
    out = [
        f"{len(shown)} of the examples, each a row (or table) as each node held it, read "
        f"from that node alone once all had applied the same Raft index ({REPLICAS} "
        "has every row):",
        "",
    ]
    for k, example in enumerate(shown, 1):
        if not isinstance(example, dict):
            continue
        out += [f"Example {k}: {divergence.describe(example)}", "", "```text"]
        per_node = example.get("rows", example.get("columns")) or {}
        out += [f"{node}: {json.dumps(row)}" for node, row in per_node.items()]
        out += ["```", ""]
    return out


def _statistics(stats: dict) -> list[str]:
    if not stats:
        return []
    out = ["## Statistics", ""]
    plain = {k: v for k, v in stats.items() if not isinstance(v, dict | list)}
    if isinstance(stats.get("replicas"), dict):
        plain["replicas"] = divergence.summary(stats["replicas"]).removeprefix("replicas: ")
    out += _table(plain)
    ops = stats.get("ops") or {}
    latency = stats.get("latency") or {}
    if ops:
        out += ["", "| operation | ok | fail | info | open | p50 ms | p99 ms |",
                "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for f, c in ops.items():
            lat = latency.get(f, {})
            ms = [f"{lat[k] * 1000:.1f}" if k in lat else "-" for k in ("p50", "p99")]
            row = [str(c.get(k, 0)) for k in ("ok", "fail", "info", "open")]
            out.append(f"| {f} | {' | '.join(row)} | {' | '.join(ms)} |")
    found = stats.get("stalls") or []
    if found:
        out += [
            "",
            "Stalls: a second or more outside every fault window in which no client "
            "operation completed, and what the clients were waiting on:",
            "",
            *[f"- {describe_stall(s)}" for s in found],
        ]
    faults = stats.get("availability") or []
    if faults:
        out += [
            "",
            "Availability: for each fault, the time from its start to the next "
            "successful claim invoked after it.",
            "",
            "| fault | start s | end s | next lease after s |",
            "|---|---:|---:|---:|",
        ]
        for a in faults:
            end = "-" if a.get("end") is None else f"{a['end']:.2f}"
            rec = "never" if a.get("recovery") is None else f"{a['recovery']:.3f}"
            out.append(f"| {a.get('label', a.get('kind'))} | {a['start']:.2f} | {end} | {rec} |")
    return [*out, ""]


def _mechanisms(history: list[str]) -> list[str]:
    """How the faults that name a ``mechanism`` (``lossy-link``: ``iptables-statistic``,
    ``slow-link``: ``tbf``, ...) were made, as their completed starts record it."""
    seen: dict[tuple[str, str], int] = {}
    for line in history:
        if '"mechanism"' not in line:
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        value = ev.get("value") if isinstance(ev, dict) else None
        if (
            ev.get("process") != NEMESIS
            or ev.get("type") != "info"
            or not isinstance(value, dict)
            or value.get("phase", "start") != "start"
            or "mechanism" not in value
        ):
            continue
        key = (str(value.get("fault", ev.get("f"))), str(value["mechanism"]))
        seen[key] = seen.get(key, 0) + 1
    if not seen:
        return []
    out = ["## Fault mechanisms", "", "| fault | mechanism | windows |", "|---|---|---:|"]
    out += [f"| {fault} | {how} | {n} |" for (fault, how), n in sorted(seen.items())]
    return [*out, ""]


def _plots(store: RunStore) -> list[str]:
    out: list[str] = []
    for name, caption in PLOTS:
        if store.path(name).exists():
            out += [f"### {caption}", "", f"![{caption}]({name})", ""]
    return ["## Plots", "", *out] if out else []


def _flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v and len(v) <= 12:
            flat.update(_flatten(v, key + "."))
        else:
            flat[key] = v
    return flat


def _table(data: dict[str, Any]) -> list[str]:
    out = ["| | |", "|---|---|"]
    for k, v in data.items():
        if isinstance(v, float):  # seconds and rates: to the millisecond, not 62.241777
            v = f"{v:.3f}".rstrip("0").rstrip(".")
        text = v if isinstance(v, str) else json.dumps(v, default=str)
        out.append(f"| {k} | {str(text).replace('|', '/')} |")
    return out
