"""One run, start to finish: cluster up → workload + faults → heal → drain → replicas →
check → plots.

After the drain, every node's tables are read once all nodes have applied the same Raft
log (``replicas.json``, see :mod:`harness.replicas`); the check compares them as well
as the history.

:func:`run` always tears down what it started (the workload, the nemesis, the cluster
with its processes, namespaces and rules), also on an exception, Ctrl-C or SIGTERM.
Its :class:`RunResult` carries the exit status the CLI returns: 0 the history is valid,
1 the checker found anomalies, 2 the harness itself failed (``reason`` says why), 3 the
run is inconclusive: no anomaly, but it did not test what it planned (see
:mod:`harness.coverage`; ``check.json``'s ``coverage`` says why). The verdict is
:func:`harness.verdict.decide`'s, as ``check`` and ``report.md`` decide it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.wording import plural

from . import divergence
from .cluster.base import DISK
from .cluster.disk import DISK_MB
from .errors import EXIT_HARNESS, EXIT_INCONCLUSIVE, HarnessError
from .history import read_history
from .interrupts import Terminated, sigterm_unwinds
from .judgement import Judgement, Plan, judge
from .scenario import Scenario, ScenarioError, dropped_count, load_scenario
from .store import CHECK, REPLICAS, RUN, SCENARIO, VERSIONS, RunStore
from .subjects import get_subject
from .verdict import decide
from .versions import engine_of, engine_version, versions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOptions:
    """What ``python -m harness run`` was asked to do."""

    scenario: str
    time: float | None = None
    nodes: int | None = None
    seed: int | None = None
    subject: str = "rqueue"
    engine: str = "embedded"
    rqlited: str | None = None
    backend: str = "local"
    #: the Docker backend's node image (``--image``; None: ``$RQLITE_IMAGE`` or the pinned one)
    image: str | None = None
    out: Path | None = None
    #: the SSH backend's hosts (``--inventory``, a TOML file; docs/ssh.md)
    inventory: Path | None = None
    progress: bool = True
    plots: bool = True
    #: fault kinds to leave out of the scenario (``--skip-fault``)
    skip_faults: tuple[str, ...] = ()
    # 2.5 s, not 5: measured on partition-leader/pause-leader runs, every answer outside
    # a fault came within 0.25 s, and during one a live node answers within ~1.7 s (an
    # isolated leader steps down after 1.5 s; a follower drops a forward once its
    # election timeout, 0.8-1.6 s, shows the leader gone). Only a node that cannot answer
    # at all (SIGSTOP, a dead link to the client) needs the client's timeout, and each
    # second of it was a second of a worker stalled on that node instead of failing over.
    request_timeout: float = 2.5
    cluster_timeout: float = 60.0


@dataclass
class RunResult:
    """How a run ended."""

    exit_code: int
    run_dir: Path | None = None
    check: dict[str, Any] | None = None
    reason: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool | None:
        return None if self.check is None else bool(self.check.get("valid"))


def resolve(opts: RunOptions) -> Scenario:
    """The scenario with ``--skip-fault``, ``--nodes`` and ``--time`` applied
    (``ScenarioError`` if bad)."""
    scenario = load_scenario(opts.scenario)
    if opts.skip_faults:
        scenario = scenario.without(opts.skip_faults)
    if opts.nodes is not None:
        scenario = scenario.with_nodes(opts.nodes)
    if opts.time is not None:
        scenario = scenario.scaled(opts.time)
    return scenario


def preflight(scenario: Scenario, opts: RunOptions) -> bool:
    """Check that this machine can run the scenario on the backend (its entry's
    :meth:`~harness.cluster.backend.Backend.preflight`); returns whether to use netns."""
    from .cluster.backends import backend_of

    chaos_all = scenario.chaos is not None and scenario.chaos.pool is None
    return backend_of(opts.backend).preflight(scenario.name, scenario.needs, chaos_all)


def run(opts: RunOptions) -> RunResult:
    """Run one scenario and return its result (never raises for a harness failure)."""
    try:
        scenario = resolve(opts)
        subject = get_subject(opts.subject)
        netns = preflight(scenario, opts)
        made = opts.out is None or not Path(opts.out).exists()
        store = RunStore.create(scenario.name, opts.out)
    except (ScenarioError, ValueError, HarnessError, FileExistsError, ImportError) as e:
        return RunResult(EXIT_HARNESS, reason=str(e))
    seed = opts.seed if opts.seed is not None else int(time.time()) % 100_000
    store.write_json(SCENARIO, scenario.to_json())
    run_info: dict[str, Any] = {
        "options": {**asdict(opts), "seed": seed},
        "phases": {},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    result = RunResult(EXIT_HARNESS, store.root)
    try:
        with sigterm_unwinds():
            _Run(scenario, subject, opts, store, seed, netns, run_info, result).execute()
    except (KeyboardInterrupt, Terminated) as e:
        result.exit_code, result.reason = EXIT_HARNESS, f"interrupted ({str(e) or 'Ctrl-C'})"
    failed = result.reason if result.exit_code == EXIT_HARNESS else None
    result.summary.update(
        exit=result.exit_code,
        error=result.reason,
        run_dir=str(store.root),
        verdict=decide(result.check, failed).label,  # what report.md and `check` say too
    )
    run_info.update(exit=result.exit_code, reason=result.reason, summary=result.summary)
    if failed and refused_before_start(store):
        # bad input found before anything started (an inventory, a host's preflight):
        # the error says it all, and no folder is left to list as a run
        store.remove(folder=made)
        result.run_dir = None
        result.summary["run_dir"] = None
        return result
    # the run's record, before the plots: it stands if they fail or are interrupted
    # (Ctrl-C, or the matrix's SIGINT, reaches them outside the run's own unwinding)
    store.write_json(RUN, run_info)
    if store.history.is_file():
        _plots_and_report(store, run_info, result, opts.plots)
        store.write_json(RUN, run_info)  # now with what the plots and report wrote
    return result


def refused_before_start(store: RunStore) -> bool:
    """Whether the run in ``store`` ended before anything started: no history, and
    nothing of a cluster (no state, no node's log) in its cluster folder."""
    if store.history.exists():
        return False
    found = store.cluster_dir.rglob("*") if store.cluster_dir.exists() else ()
    return not any(p.is_file() for p in found)


def _plots_and_report(
    store: RunStore, run_info: dict[str, Any], result: RunResult, plots: bool
) -> None:
    """Draw the plots and write report.md (``plots``), and report.html (always: without
    plots it says so), from ``run_info`` as it is (not read back); adds what they wrote,
    or why they failed, to it.

    A failure here leaves the verdict as it is; the summary and run.json say what is missing.
    """
    t = time.monotonic()
    try:
        from .html import write_html
        from .report import report_parts, write_report

        if plots:
            from .plots import plot_run

            run_info["plots"] = [str(p) for p in plot_run(store.root, run_info)]
        parts = report_parts(store.root, result.summary, run_info)
        if plots:
            run_info["report"] = str(write_report(store.root, parts=parts))
        run_info["report_html"] = str(write_html(store.root, parts=parts))
    except Exception as e:
        log.exception("plots or report failed")
        run_info["plots_error"] = f"{type(e).__name__}: {e}"
        result.summary["warning"] = f"plots/report failed: {e}"
    run_info["phases"]["plots"] = round(time.monotonic() - t, 3)


class _Run:
    """The phases of one run (an object only to share their state)."""

    def __init__(self, scenario, subject, opts, store, seed, netns, run_info, result) -> None:
        self.scenario, self.subject, self.opts = scenario, subject, opts
        self.store, self.seed, self.netns = store, seed, netns
        self.info, self.result = run_info, result
        self.cluster: Any = None
        self.workload: Any = None
        self.nemesis: Any = None
        self.recorder: Any = None
        self.progress: Any = None
        self.engine: str | None = None  # what answered (engine_of), once known
        self.proxies: Any = None  # the reply proxies (harness.cluster.reply_proxy), if any

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if self.progress is not None:
            self.progress.set_phase(name)
        t = time.monotonic()
        try:
            yield
        finally:
            self.info["phases"][name] = round(time.monotonic() - t, 3)

    def execute(self) -> None:
        from .progress import Progress

        s = self.scenario
        self.progress = Progress(
            f"{s.name} ({self.opts.subject})",
            s.duration,
            lambda: self.workload.ops.counts if self.workload else {},
            lambda: self.nemesis.current if self.nemesis else "none",
            enabled=self.opts.progress,
        )
        try:
            with self.progress:
                if s.dropped:  # up front: what this run will not test, and why
                    self.progress.note(f"--time {s.duration:g}: {dropped_count(s)}")
                for why in s.dropped:
                    self.progress.note(f"--time {s.duration:g}: dropped {why}")
                for why in s.essential_dropped:  # the run will be inconclusive: say so now
                    self.progress.note(f"--time {s.duration:g}: inconclusive: {why}")
                for window in s.skipped:
                    self.progress.note(f"left out: {window}")
                self._phases()
        except HarnessError as e:
            self.result.exit_code, self.result.reason = EXIT_HARNESS, str(e)
        except Exception as e:
            log.exception("run failed")
            self.result.exit_code = EXIT_HARNESS
            self.result.reason = f"{type(e).__name__}: {e}"
        finally:
            try:
                self._teardown()
            finally:
                self._summarise()  # also when interrupted: run.json keeps what happened

    def _phases(self) -> None:
        from .cluster.base import ClusterError
        from .cluster.factory import make_cluster
        from .cluster.reply_proxy import ReplyProxies
        from .faults.capabilities import params_refusal, refusal
        from .faults.reply_loss import proxied
        from .history import HistoryRecorder
        from .nemesis import Nemesis
        from .workload import Workload

        s, o = self.scenario, self.opts
        with self.phase("cluster-up"):
            try:
                self.cluster = make_cluster(
                    o.backend,
                    engine=o.engine,
                    nodes=s.nodes,
                    directory=self.store.cluster_dir,
                    rqlited=o.rqlited,
                    netns=self.netns,
                    timeout=o.cluster_timeout,
                    image=o.image,
                    disk_mb=DISK_MB if DISK in s.needs else None,
                    inventory=o.inventory,
                )
            except ClusterError as e:
                raise HarnessError(f"cluster did not start: {e}") from None
            # say so before the workload, not as failed faults in the middle of it
            named = s.chaos.names() if s.chaos is not None and s.chaos.pool is not None else ()
            lacking = refusal(s.name, [*named, *(f.kind for f in s.faults)], self.cluster)
            lacking = lacking or params_refusal(s.name, s.faults, self.cluster)
            if lacking is not None:
                raise HarnessError(lacking)
            if s.chaos is not None:
                s = self._draw_schedule(s)
        # the history's time 0 is the moment the workload's clients start work (the
        # workload rebases the recorder then), and the fault schedule counts from there
        self.recorder = HistoryRecorder(self.store.history)
        urls = list(self.cluster.urls)
        self.info["urls"] = urls
        version = engine_version(urls)
        self.engine = engine_of(self.cluster.engine, version)
        self.store.write_json(VERSIONS, versions(self.engine, version))
        leader_url = None
        if proxied(f.kind for f in s.faults):  # the clients connect through the proxies
            nodes = {n.id: n.url for n in self.cluster.nodes()}
            self.proxies = ReplyProxies(nodes, self.seed).start()
            self.info["reply_proxies"] = self.proxies.by_node()
            leader = self.cluster.wait_for_leader(o.cluster_timeout, all_ready=False)
            leader_url = self.proxies.by_node().get(leader.id)
        self.workload = Workload(
            s.workload,
            self.subject,
            self.proxies.urls if self.proxies else urls,
            self.recorder,
            seed=self.seed,
            timeout=o.request_timeout,
            reply_proxies=self.proxies,
            leader_url=leader_url,
        )
        self.nemesis = Nemesis(
            self.cluster, self.recorder, self.workload, s.faults, s.duration, seed=self.seed
        )
        with self.phase("workload"):
            self.workload.start()
            t0 = time.monotonic() - self.recorder.elapsed()  # the history's time 0
            # to compare server epoch times (a claim's expires_at) with the history's times
            self.info["epoch_at_time_0"] = time.time() - self.recorder.elapsed()
            self.nemesis.start(t0)
            while (left := t0 + s.duration - time.monotonic()) > 0:
                if self.workload.errors:
                    e = self.workload.errors[0]
                    raise HarnessError(f"a workload thread died: {type(e).__name__}: {e}")
                self.workload.stop_event.wait(min(0.5, left))
                self.progress.tick()
        with self.phase("heal"):
            self.nemesis.stop()
            self.nemesis.heal_all()
            try:
                self.cluster.wait_for_leader(o.cluster_timeout)
            except ClusterError as e:
                raise HarnessError(f"no leader after healing every fault: {e}") from None
            self.workload.stop()
        with self.phase("drain"):
            drain = self.workload.drain()
            self.info["drain"] = asdict(drain)
            if not drain.complete:
                log.warning("drain incomplete: %s messages left", drain.remaining)
        self.recorder.close()
        with self.phase("replicas"):
            self._snapshot_replicas()
        with self.phase("check"):
            judged = self._check()
        self.result.check = judged.result
        self.result.exit_code = judged.verdict.exit_code

    def _draw_schedule(self, s: Scenario) -> Scenario:
        """A ``[chaos]`` scenario's schedule, drawn from the seed for this cluster; the
        resolved scenario (``scenario.json``) is the drawn one, what shrink reduces."""
        s = s.drawn_from(self.seed, self.cluster.capabilities)
        self.scenario = s
        self.store.write_json(SCENARIO, s.to_json())
        drawn = s.drawn or {}
        self.progress.note(
            f"chaos (seed {self.seed}): {plural(len(s.faults), 'window')} from "
            f"{', '.join(drawn.get('pool', []))}"
        )
        for line in drawn.get("schedule", []):
            self.progress.note(f"chaos: {line}")
        return s

    def _snapshot_replicas(self) -> None:
        """Record every node's tables at one agreed applied index in replicas.json."""
        from .replicas import snapshot

        record = snapshot(self.cluster, self.opts.cluster_timeout, self.opts.request_timeout)
        if record["error"]:
            log.warning("replicas not compared: %s", record["error"])
        self.store.write_json(REPLICAS, record)

    def _check(self) -> Judgement:
        """Judge the run from its history and replicas as written (as ``check`` would),
        with its plan in memory; check.json gets the result."""
        # did the run test what it planned? (``python -m harness check`` recomputes it alike)
        errors = tuple(self.nemesis.errors) if self.nemesis else ()
        events = read_history(self.store.history)
        replicas = divergence.read(self.store.path(REPLICAS))
        judged = judge(events, replicas, Plan(self.scenario, errors))
        self.store.write_json(CHECK, judged.result)
        return judged

    def _teardown(self) -> None:
        """Stop everything this run started; each step runs even if an earlier one fails."""
        steps = [
            ("nemesis", lambda: self.nemesis and self.nemesis.stop(timeout=30)),
            ("fault threads", lambda: self.nemesis and self.nemesis.release()),
            ("workload", lambda: self.workload and self.workload.stop(timeout=30)),
            ("reply proxies", self._stop_proxies),
            ("cluster", lambda: self.cluster and self.cluster.stop()),
            ("history", lambda: self.recorder and self.recorder.close()),
        ]
        interrupted: BaseException | None = None
        for name, step in steps:
            try:
                step()
            except (KeyboardInterrupt, Terminated) as e:  # a second Ctrl-C: finish anyway
                log.warning("interrupted while stopping %s; stopping the rest", name)
                interrupted = interrupted or e
            except Exception as e:
                log.warning("teardown of %s failed: %s", name, e)
                if self.result.reason is None and self.result.exit_code == EXIT_HARNESS:
                    self.result.reason = f"teardown of {name} failed: {e}"
        if interrupted is not None:
            raise interrupted

    def _stop_proxies(self) -> None:
        """Stop the reply proxies; run.json keeps the replies they lost, per outcome."""
        if self.proxies is not None:
            self.proxies.stop()
            self.info["reply_loss"] = self.proxies.counts()
            self.proxies = None

    def _summarise(self) -> None:
        counts = self.workload.ops.counts if self.workload else {}
        ops: dict[str, dict[str, int]] = {}
        for (f, kind), n in sorted(counts.items()):
            ops.setdefault(f, {})[kind] = n
        check = self.result.check or {}
        anomalies = {k: v.get("count", 0) for k, v in (check.get("anomalies") or {}).items()}
        self.result.summary.update(
            scenario=self.scenario.name,
            subject=self.opts.subject,
            engine=self.engine or (self.cluster.engine if self.cluster else self.opts.engine),
            backend=self.opts.backend,
            nodes=self.scenario.nodes,
            seed=self.seed,
            duration=f"{self.scenario.duration:g}s",
            ops=ops,
            faults=dict(self.nemesis.counts) if self.nemesis else {},
            anomalies=anomalies,
        )
        refusals = self.workload.ops.refusals if self.workload else None
        if refusals:  # the queue's own line for why, not a bare count of failures
            self.result.summary["refused"] = refused_lines(refusals)
        disrupted = self.workload.worker_disruptions if self.workload else {}
        if any(disrupted.values()):  # the worker processes the pool killed or stopped
            self.result.summary["worker_disruptions"] = dict(disrupted)
        if self.scenario.dropped:
            self.result.summary["dropped"] = list(self.scenario.dropped)
        if self.scenario.skipped:
            self.result.summary["skipped_faults"] = list(self.scenario.skipped)
        if "drain" in self.info:
            d = self.info["drain"]
            self.result.summary["drain"] = (
                f"{'complete' if d['complete'] else 'INCOMPLETE'}: {d['acked']} acked in "
                f"{d['seconds']:.1f}s, {d['remaining']} left"
            )
        if self.result.exit_code == EXIT_INCONCLUSIVE:
            self.result.summary["inconclusive"] = "; ".join(check["coverage"]["reasons"])
        replicas = check.get("stats", {}).get("replicas")
        if replicas:
            self.result.summary["replicas"] = _replicas_line(replicas)
        if self.nemesis and self.nemesis.errors:
            self.info["nemesis_errors"] = self.nemesis.errors
            self.result.summary["nemesis_errors"] = list(self.nemesis.errors)


#: distinct refusal lines the summary shows (check.json's stats keep more)
SUMMARY_REFUSALS = 3


def refused_lines(refusals: Mapping[str, int]) -> list[str]:
    """The calls the queue refused on purpose, as the summary shows them: the most
    frequent lines, each with its count, and how many others there were."""
    ranked = sorted(refusals.items(), key=lambda kv: -kv[1])
    out = [f"{n} calls: {line}" for line, n in ranked[:SUMMARY_REFUSALS]]
    rest = ranked[SUMMARY_REFUSALS:]
    if rest:
        out.append(f"{sum(n for _, n in rest)} calls with {len(rest)} other lines (check.json)")
    return out


def _replicas_line(stats: dict[str, Any]) -> str:
    from .divergence import summary

    return summary(stats).removeprefix("replicas: ")
