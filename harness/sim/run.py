"""One simulated run, start to finish, written as ``python -m harness run`` writes one.

Phases, all in virtual time: elect a leader; open every worker's client (rqueue's
``open``: schema, queue registry); the workload and the nemesis for the scenario's
duration (time 0 of the history is when they start); heal every fault, stop the
workload; drain; wait until every node applied the whole log and read each node's
tables (``replicas.json``); check. The folder holds ``scenario.json``, ``history.jsonl``,
``replicas.json``, ``check.json``, ``run.json`` and ``report.md``, judged by the same
checker (:func:`harness.judgement.judge`).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import divergence
from ..cluster.base import ClusterError
from ..divergence import VERSION as REPLICAS_VERSION
from ..history import HistoryRecorder, read_history
from ..judgement import Plan, judge
from ..replicas import read_tables
from ..scenario import Scenario, load_scenario
from ..store import CHECK, REPLICAS, RUN, SCENARIO, RunStore
from ..subjects import get_subject
from ..verdict import decide
from .client import FaultPoints, SimClient
from .cluster import CAPABILITIES
from .nemesis import SimNemesis
from .node import EPOCH
from .seed import SimSeedClient
from .subjects import statements_for
from .workload import DRAINERS, SimWorkload
from .world import World, seeded, virtual_time

#: fault kinds the simulation does not model yet (left out of scenarios and [chaos] pools)
UNSUPPORTED = ("remove-node", "grow", "shrink")
#: one request's timeout, as ``harness run``'s default
REQUEST_TIMEOUT = 2.5
#: virtual seconds to wait for a leader, for the workers to stop, for replicas to agree
SETTLE = 60.0


@dataclass(frozen=True)
class SimOptions:
    """What ``python -m harness sim`` was asked to do for one seed."""

    scenario: str
    seed: int = 1
    subject: str = "rqueue"
    time: float | None = None
    out: Path | None = None
    report: bool = True
    #: the probability of a fault point between two steps of an operation: a pause
    #: (this often) or the client dying (a fifth as often); 0: none (docs/simulation.md)
    core_faults: float = 0.0


@dataclass
class SimResult:
    """How a simulated run ended: the exit status, its folder, its check, and costs."""

    exit_code: int
    run_dir: Path | None
    check: dict[str, Any] | None = None
    anomalies: dict[str, int] = field(default_factory=dict)
    virtual: float = 0.0
    seconds: float = 0.0
    events: int = 0
    reason: str | None = None


def resolve(opts: SimOptions) -> Scenario:
    """The scenario as the simulation runs it: ``--time`` applied, kinds it cannot
    model left out (named in ``skipped``), a ``[chaos]`` schedule drawn from the seed."""
    s = load_scenario(opts.scenario).without(UNSUPPORTED)
    if opts.time is not None:
        s = s.scaled(opts.time)
    return s.drawn_from(opts.seed, CAPABILITIES)


class _Unflushed:
    """The history file without a flush per line: a simulated run cannot crash half way
    (the recorder flushes each line so that a real one leaves a checkable file)."""

    def __init__(self, file: Any) -> None:
        self._file = file

    def write(self, text: str) -> int:
        return self._file.write(text)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._file.close()


class _Readable:
    """A node's database as :func:`harness.replicas.read_tables` reads a cluster's."""

    def __init__(self, world: World) -> None:
        self.world = world

    def read_node(self, node_id: str, statements: list[Any], timeout: float) -> list[dict]:
        from ..node.statements import Statement

        stmts = [
            Statement(s[0], list(s[1:])) if isinstance(s, list) else Statement(s)
            for s in statements
        ]
        out = []
        node = self.world.nodes[node_id]
        node.catch_up()
        for r in node.db.query(stmts, False):
            out.append({"columns": r.get("columns", []), "values": r.get("values", [])})
        return out


def simulate(opts: SimOptions) -> SimResult:
    """Run one seed of a scenario in simulation and write its folder. rqueue's own log
    lines (a node refused for its zone, ...) are left out unless its logger asks for
    more than warnings (``-v``): a sweep would print them for every seed."""
    started = time.perf_counter()
    rqueue_log = logging.getLogger("rqueue")
    if rqueue_log.getEffectiveLevel() >= logging.WARNING:
        rqueue_log.setLevel(logging.CRITICAL)
    scenario = resolve(opts)
    subject = get_subject(opts.subject)
    statements = statements_for(opts.subject)
    store = RunStore.create(f"sim-{scenario.name}", opts.out)
    store.write_json(SCENARIO, scenario.to_json())
    with seeded(opts.seed):
        world = World(opts.seed, scenario.nodes)
        options = {**asdict(opts), "out": str(store.root), "backend": "sim", "engine": "sim"}
        info: dict[str, Any] = {"options": options, "phases": {}}
        recorder = HistoryRecorder(store.history, clock=world.loop.clock)
        recorder._file = _Unflushed(recorder._file)  # type: ignore[assignment]
        try:
            with virtual_time(world.loop):
                errors = _run(world, scenario, subject, statements, opts, recorder, info)
        finally:
            recorder.close()
        replicas = _replicas(world)
    store.write_json(REPLICAS, replicas)
    # a task that died is the harness's failure, as a real run's dead workload thread is
    died = info.get("task_errors")
    failed = f"a simulated task died: {died[0]}" if died else None
    events = read_history(store.history)
    replicas_seen = divergence.read(store.path(REPLICAS))
    judged = judge(events, replicas_seen, Plan(scenario, tuple(errors)), failed)
    store.write_json(CHECK, judged.result)
    result = judged.result or {}
    anomalies = {k: v.get("count", 0) for k, v in (result.get("anomalies") or {}).items()}
    summary = {
        "scenario": scenario.name,
        "subject": opts.subject,
        "engine": "sim",
        "backend": "sim",
        "nodes": scenario.nodes,
        "seed": opts.seed,
        "duration": f"{scenario.duration:g}s",
        "anomalies": anomalies,
        "exit": judged.verdict.exit_code,
        "run_dir": str(store.root),
        "verdict": decide(judged.result, failed).label,
    }
    info.update(exit=judged.verdict.exit_code, reason=failed, summary=summary)
    info["virtual_seconds"] = round(world.loop.now, 3)
    store.write_json(RUN, info)
    if opts.report:
        from ..report import write_report

        write_report(store.root, summary, info)
    return SimResult(
        judged.verdict.exit_code,
        store.root,
        judged.result,
        anomalies,
        virtual=world.loop.now,
        seconds=time.perf_counter() - started,
        events=world.loop.events,
        reason=failed,
    )


def _run(
    world: World,
    scenario: Scenario,
    subject: Any,
    statements: Any,
    opts: SimOptions,
    recorder: HistoryRecorder,
    info: dict[str, Any],
) -> list[str]:
    loop, cluster, seed = world.loop, world.cluster, opts.seed
    leader = cluster.wait_for_leader(SETTLE)
    spec = scenario.workload
    left_out = [f"workload.{k}" for k in ("worker_processes", "long_poll") if getattr(spec, k)]
    if left_out:  # what this run's workload asks that the simulation does not model
        info["not_simulated"] = left_out

    def open_client(urls: list[str], name: str) -> Any:
        if statements is None:  # the seed's protocol, on the worker's own clock
            offsets = wl.real.clock_offsets
            clock = lambda: EPOCH + loop.now + offsets.get(name, 0.0)  # noqa: E731
            tokens = random.Random(f"{seed}-{name}-tokens")
            return SimSeedClient(world, urls, clock, REQUEST_TIMEOUT, tokens)
        faults = None
        if opts.core_faults > 0:
            rng = random.Random(f"{seed}-{name}-fault-points")
            rate = opts.core_faults
            faults = FaultPoints(rng, rate, rate / 5, 2 * REQUEST_TIMEOUT)
        limit = spec.max_deliveries or None
        shared = name in ("sync-claimers", "async-claimers")  # group commit between them
        return SimClient(world, urls, statements, REQUEST_TIMEOUT, limit, faults, shared)

    wl = SimWorkload(spec, subject, world.urls, recorder, seed, REQUEST_TIMEOUT, open_client)
    wl.real.reply_proxies = world.proxies  # clients start at followers: writes are forwarded
    wl.real.leader_url = leader.url
    workers = wl.workers()
    clients = list({id(c): c for _, c in workers}.values())  # a shared one opens once
    opening = [loop.spawn(client.open(), _failed(info)) for client in clients]
    loop.run(loop.now + SETTLE, stop=lambda: all(t.done for t in opening))
    # time 0: every client opened, as the real workload rebases its recorder
    recorder.rebase()
    t0 = loop.now
    tasks = [loop.spawn(wl.task(steps, client), _failed(info)) for steps, client in workers]
    nemesis = SimNemesis(cluster, recorder, wl.real, scenario.faults, scenario.duration, seed=seed)
    nemesis.schedule(loop, t0)
    loop.run(t0 + scenario.duration)
    nemesis.heal_all()
    wl.stop()
    try:
        cluster.wait_for_leader(SETTLE)
    except ClusterError as e:
        nemesis.errors.append(f"no leader after healing every fault: {e}")
    loop.run(loop.now + SETTLE, stop=lambda: all(t.done for t in tasks))
    info["phases"]["workload"] = round(loop.now - t0, 3)
    _drain(world, wl, spec.drain_timeout, info)
    loop.run(loop.now + SETTLE, stop=world.settled)
    info["nemesis_counts"] = dict(nemesis.counts)
    if nemesis.errors:
        info["nemesis_errors"] = list(nemesis.errors)
    return list(nemesis.errors)


def _drain(world: World, wl: SimWorkload, bound: float, info: dict[str, Any]) -> None:
    loop = world.loop
    end = loop.now + bound

    def empty() -> bool:
        lead = world.cluster.leader_now()
        if lead is None:
            return False
        world.nodes[lead].catch_up()
        rows = world.nodes[lead].db.query([_count()], False)[0].get("values") or [[None]]
        return rows[0][0] == 0

    stop = lambda: loop.now >= end  # noqa: E731
    drainers = [loop.spawn(wl.drainer(i, empty, stop), _failed(info)) for i in range(DRAINERS)]
    loop.run(end + SETTLE, stop=lambda: all(d.done for d in drainers))
    if wl.spec.max_deliveries:
        read = loop.spawn(wl.read_dead_letters(), _failed(info))
        loop.run(loop.now + SETTLE, stop=lambda: read.done)
    info["drain"] = {"complete": empty(), "seconds": round(loop.now - end + bound, 3)}


def _count() -> Any:
    from ..node.statements import Statement

    return Statement("SELECT COUNT(*) FROM messages")


def _failed(info: dict[str, Any]) -> Any:
    def note(exc: BaseException) -> None:
        info.setdefault("task_errors", []).append(f"{type(exc).__name__}: {exc}")

    return note


def _replicas(world: World) -> dict[str, Any]:
    """Every node's tables once all applied the whole log (``replicas.json``); a node
    whose database image is byte for byte another's has that one's tables."""
    if not world.settled():
        error = "the nodes did not settle on one log"
        return {"version": REPLICAS_VERSION, "error": error, "nodes": []}
    readable = _Readable(world)
    seen: dict[bytes, dict[str, Any]] = {}
    nodes = []
    for url, n in world.by_url.items():
        n.catch_up()
        image = n.db.serialize()
        tables = seen.get(image)
        if tables is None:
            tables = seen[image] = read_tables(readable, n.id, 1.0)
        nodes.append(
            {
                "id": n.id,
                "url": url,
                "applied_index": n.applied,
                "fsm_index": n.applied,
                "tables": tables,
            }
        )
    return {
        "version": REPLICAS_VERSION,
        "error": None,
        "waited_for": "every simulated node applied the whole log",
        "waited": 0.0,
        "nodes": nodes,
    }
