"""``python -m harness bench``: a smoke run on tiny sizes, and its pure parts.

The smoke run checks that the command measures every item end to end on a real
3-node cluster and writes bench.json and bench.png; it checks no speed (figures are
for the benchmark itself to print, not for a test to time).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from harness.bench import BenchSettings, command_line
from harness.bench.load import Load, LoadError, percentile_ms, run_tasks, run_threads
from harness.bench.report import targets
from harness.cli import build_parser, main
from tests.locks import held, session_dir

TINY = [
    "--seconds", "0.3", "--warmup", "0.1", "--concurrency", "1,8", "--async-concurrency", "4",
    "--samples", "10", "--small-backlog", "50", "--big-backlog", "2000", "--big-groups", "40",
    "--claim-backlog", "400", "--cycle-backlog", "300", "--cycle-groups", "30",
    "--publish-batch", "10", "--quiet",
]  # fmt: skip


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    """The smoke run, made once per session: the first pytest-xdist worker to need it runs
    it while holding a lock, the others wait and read its folder and exit status."""
    shared = session_dir(tmp_path_factory)
    out, status = shared / "bench-smoke" / "run", shared / "bench-smoke" / "exit"
    with held(shared / "bench-smoke.lock", "another worker's bench smoke run", 240.0):
        if not status.exists():
            out.parent.mkdir(exist_ok=True)
            status.write_text(str(main(["bench", "--out", str(out), *TINY])))
    return int(status.read_text()), out


@pytest.mark.slow
def test_bench_measures_every_item_and_writes_its_files(bench_run):
    code, out = bench_run
    assert code in (0, 1), "2 means the benchmark itself failed"
    doc = json.loads((out / "bench.json").read_text())
    assert (out / "bench.png").stat().st_size > 0
    md = (out / "bench.md").read_text()
    assert "| rqueue claim+ack, shared transport |" in md
    assert "| rqueue ack_and_claim cycle, shared transport |" in md
    assert "| target | ratio | required | met |" in md
    assert doc["cluster"]["engine"] == "embedded" and doc["cluster"]["nodes"] == 3
    series = (
        "rqueue_claim_shared",
        "rqueue_claim",
        "rqueue_cycle_shared",
        "rqueue_cycle",
        "rqueue_cycle_folded",
    )
    for key in ("store_insert", *series, "seed_cycle"):
        assert [r["concurrency"] for r in doc[key]] == [1, 8], key
        for row in doc[key]:
            assert row["ops"] > 0 and row["errors"] == 0, (key, row)
            if key != "store_insert":  # each compared with INSERTs measured just before
                assert row["insert_per_second"] > 0, (key, row)
    assert {(r["concurrency"], r["batch"]) for r in doc["publish"]} == {
        (1, 1), (1, 10), (8, 1), (8, 10),
    }  # fmt: skip
    batched = [r for r in doc["publish"] if r["batch"] == 10]
    assert all(
        r["messages_per_second"] == pytest.approx(r["per_second"] * 10, rel=0.01) for r in batched
    )
    assert [r["backlog"] for r in doc["claim_latency"]] == [50, 2000]
    assert all(r["samples"] == 10 and r["p50_ms"] > 0 for r in doc["claim_latency"])
    assert [(r["mode"], r["shared"], r["concurrency"]) for r in doc["sync_vs_async"]] == [
        ("threads", True, 4),
        ("tasks", True, 4),
        ("threads", False, 4),
        ("tasks", False, 4),
    ]
    assert all(r["ops"] > 0 and r["errors"] == 0 for r in doc["sync_vs_async"])
    assert all(r["windows"] == 2 for r in doc["sync_vs_async"])
    assert len(doc["targets"]) == 6
    assert (code == 0) == all(t["met"] for t in doc["targets"])
    assert doc["command"].startswith("python -m harness bench --out ")


def test_bench_leaves_no_node_running(bench_run):
    _, out = bench_run
    state = json.loads((out / "cluster" / "cluster.json").read_text())
    for node in state["nodes"]:
        with pytest.raises(ProcessLookupError):
            os.kill(node["pid"], 0)


def test_bench_refuses_a_used_output_folder(tmp_path, capsys):
    (tmp_path / "x").write_text("")
    assert main(["bench", "--out", str(tmp_path), "--quiet"]) == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err


def test_bench_rejects_levels_without_the_target_concurrency(tmp_path, capsys):
    assert main(["bench", "--out", str(tmp_path / "o"), "--concurrency", "1,4"]) == 2
    assert "targets are checked at concurrency 8" in capsys.readouterr().err


def test_bench_parser_rejects_bad_levels(capsys):
    with pytest.raises(SystemExit):
        build_parser("bench").parse_args(["bench", "--concurrency", "1,x"])
    assert "comma-separated integers" in capsys.readouterr().err


def test_settings_validation_names_the_problem():
    with pytest.raises(ValueError, match="seconds must be > 0"):
        BenchSettings(seconds=0)
    with pytest.raises(ValueError, match="at least as many messages as groups"):
        BenchSettings(big_backlog=10, big_groups=20)


def test_command_line_lists_only_changed_options():
    args = build_parser("bench").parse_args(["bench", "--seconds", "2", "--concurrency", "1,8"])
    assert command_line(args) == "python -m harness bench --seconds 2.0 --concurrency 1,8"


def test_percentile():
    values = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    assert percentile_ms(values, 50) == pytest.approx(50.5)
    assert percentile_ms(values, 99) == pytest.approx(99.0, abs=0.1)
    assert percentile_ms([], 50) is None
    assert percentile_ms([0.002], 99) == 2.0
    with pytest.raises(ValueError):
        percentile_ms(values, 100)


def test_run_threads_counts_only_steps_inside_the_window():
    calls = []
    lock = threading.Lock()

    def open_worker(i):
        def step():
            time.sleep(0.01)
            with lock:
                calls.append(i)
            return i == 0  # worker 1 always finds nothing

        return step, lambda: None

    load = run_threads(open_worker, 2, seconds=0.3, warmup=0.1)
    assert 0 < load.ops < len(calls)  # warm-up steps are not counted
    assert load.empty > 0 and load.errors == 0
    assert load.rate == pytest.approx(load.ops / 0.3)


def test_two_windows_of_a_load_add_up():
    a = Load(8, 2.0, [0.001] * 100, empty=1)
    b = Load(8, 3.0, [0.002] * 200, errors=2, first_error="boom")
    both = a + b
    assert (both.ops, both.seconds, both.rate) == (300, 5.0, 60.0)
    assert (both.empty, both.errors, both.first_error) == (1, 2, "boom")
    with pytest.raises(ValueError, match="concurrency 8 and 4"):
        a + Load(4, 1.0)


def test_run_threads_closes_workers_and_reports_total_failure():
    closed = []

    def open_worker(i):
        def step():
            raise RuntimeError("node gone")

        return step, lambda: closed.append(i)

    with pytest.raises(LoadError, match="node gone"):
        run_threads(open_worker, 3, seconds=0.05, warmup=0)
    assert sorted(closed) == [0, 1, 2]


def test_run_tasks_runs_on_one_loop():
    threads = set()

    async def open_task(i):
        async def step():
            import asyncio

            threads.add(threading.get_ident())
            await asyncio.sleep(0.005)
            return True

        async def close():
            return None

        return step, close

    load = run_tasks(open_task, 4, seconds=0.2, warmup=0)
    assert load.ops > 4 and len(threads) == 1


def _doc(insert=1000.0, claim=850.0, cycle=420.0, small=2.0, big=2.9, tasks=110.0, threads=100.0):
    def rows(rate):
        return [{"concurrency": 8, "per_second": rate}]

    return {
        "store_insert": rows(insert),
        "rqueue_claim": rows(claim),
        "rqueue_cycle": rows(cycle),
        "claim_latency": [
            {"backlog": 1000, "p50_ms": small},
            {"backlog": 1_000_000, "p50_ms": big},
        ],
        "publish": [
            {"concurrency": 8, "batch": 1, "messages_per_second": 500.0},
            {"concurrency": 8, "batch": 100, "messages_per_second": 4000.0},
        ],
        "sync_vs_async": [
            {"mode": "threads", "concurrency": 64, "per_second": threads},
            {"mode": "tasks", "concurrency": 64, "per_second": tasks},
        ],
    }


def test_targets_are_ratios_of_one_run():
    found = {t.name: t for t in targets(_doc())}
    assert len(found) == 5
    met = {name: t.met for name, t in found.items()}
    assert met == {
        "claims/s vs INSERTs/s at concurrency 8": True,
        "claim+ack cycles/s vs INSERTs/s at concurrency 8": True,
        "claim p50 with 1,000,000 queued vs with 1,000": True,
        "batched vs single publish, messages/s at concurrency 8": False,  # 8x
        "64 async tasks vs 64 threads, claim+ack cycles/s": True,
    }
    assert found["claim p50 with 1,000,000 queued vs with 1,000"].value == pytest.approx(1.45)


def test_targets_compare_with_the_paired_insert_figure():
    doc = _doc(claim=850.0)
    doc["rqueue_claim"][0]["insert_per_second"] = 1100.0  # the load rose meanwhile
    found = {t.name: t for t in targets(doc)}
    assert found["claims/s vs INSERTs/s at concurrency 8"].value == pytest.approx(850 / 1100)
    assert found["claim+ack cycles/s vs INSERTs/s at concurrency 8"].value == pytest.approx(0.42)


def test_targets_check_the_shared_transport_figures_when_the_run_has_them():
    doc = _doc(claim=500.0, cycle=200.0, tasks=50.0)
    doc["rqueue_claim_shared"] = [{"concurrency": 8, "per_second": 1200.0}]
    doc["rqueue_cycle_shared"] = [{"concurrency": 8, "per_second": 600.0}]
    for row in doc["sync_vs_async"]:
        row["shared"] = False
    doc["sync_vs_async"] += [
        {"mode": "threads", "shared": True, "concurrency": 64, "per_second": 900.0},
        {"mode": "tasks", "shared": True, "concurrency": 64, "per_second": 1000.0},
    ]
    found = {t.name: t for t in targets(doc)}
    claims = found["claims/s vs INSERTs/s at concurrency 8"]
    assert claims.value == pytest.approx(1.2) and "shared transport" in claims.detail
    assert found["claim+ack cycles/s vs INSERTs/s at concurrency 8"].value == pytest.approx(0.6)
    tasks = found["64 async tasks vs 64 threads, claim+ack cycles/s"]
    assert tasks.value == pytest.approx(1000 / 900) and "sharing one transport" in tasks.detail


def test_the_cycle_target_checks_folded_cycles_and_shows_the_two_call_figure():
    doc = _doc()
    doc["rqueue_cycle_shared"] = [{"concurrency": 8, "per_second": 390.0}]
    doc["rqueue_cycle_folded"] = [
        {"concurrency": 8, "per_second": 780.0, "insert_per_second": 975.0}
    ]
    cycles = {t.name: t for t in targets(doc)}["claim+ack cycles/s vs INSERTs/s at concurrency 8"]
    assert cycles.value == pytest.approx(0.8) and cycles.met
    assert "each ack folded into the next claim" in cycles.detail
    assert "as two calls (claim, then ack): 390 cycles/s, ratio 0.39" in cycles.detail


def test_a_figure_taken_on_a_queue_that_ran_dry_is_not_counted():
    doc = _doc(cycle=900.0)
    doc["rqueue_cycle"][0]["empty"] = 1234  # claims found nothing: the backlog ran out
    found = {t.name: t for t in targets(doc)}
    cycles = found["claim+ack cycles/s vs INSERTs/s at concurrency 8"]
    assert cycles.value is None and not cycles.met
    assert "queue ran dry (1,234 claims found nothing)" in cycles.detail
    assert found["claims/s vs INSERTs/s at concurrency 8"].met


def test_targets_missed():
    found = {t.name: t for t in targets(_doc(claim=700.0, big=3.1, tasks=99.0))}
    assert not found["claims/s vs INSERTs/s at concurrency 8"].met
    assert not found["claim p50 with 1,000,000 queued vs with 1,000"].met
    assert not found["64 async tasks vs 64 threads, claim+ack cycles/s"].met


def test_sigterm_stops_the_cluster_and_exits_2(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "bench", "--out", str(out), *TINY[:-1]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        for line in proc.stderr:  # progress lines; the cluster is up at the first measurement
            lines.append(line)
            if "store: single-statement INSERTs" in line:
                break
        else:
            pytest.fail(f"the bench never started measuring: {''.join(lines)}")
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2
    assert "interrupted (signal 15); cluster stopped" in rest
    state = json.loads((out / "cluster" / "cluster.json").read_text())
    for node in state["nodes"]:
        with pytest.raises(ProcessLookupError):
            os.kill(node["pid"], 0)


# -- the cost breakdown and engines side by side (pure parts, and the smoke run's) ----------
#: how late the bench's meter may read the wire on a loaded machine (s); measured: 0.03
LATE = 0.05


def edges(concurrency: int, cost: dict, floor: float, per_op: int = 1) -> float:
    """How far a per-operation figure of a 0.3 s window may stray from the exact one.

    An operation counts only when it starts and ends inside the window, but the wire is
    read at the window's edges: each worker's operation that straddles an edge sends its
    requests (``per_op`` statements each) without being counted, ``2 * concurrency`` of
    them at most. And the meter's thread reads when it gets the CPU: on a loaded machine
    up to :data:`LATE` s after the edge, which leaves that long of operations counted
    and their requests not, or the other way round. The exact figures per call are
    checked request by request in ``tests/rqueue/test_requests_per_call.py``."""
    slack = 2 * concurrency / cost["ops"] + LATE / cost["seconds"]
    return max(floor, per_op * slack)


def test_every_measured_load_has_its_cost_breakdown(bench_run):
    _, out = bench_run
    doc = json.loads((out / "bench.json").read_text())
    for key in ("store_insert", "rqueue_claim_shared", "rqueue_claim", "rqueue_cycle_folded"):
        for row in doc[key]:
            cost = row["cost"]
            assert cost["client_cpu_ms"] > 0 and cost["nodes_cpu_ms"] > 0, (key, cost)
            assert cost["leader_cpu_ms"] <= cost["nodes_cpu_ms"]
            assert cost["bytes_out_per_op"] > 0 and cost["bytes_in_per_op"] > 0
    store = {r["concurrency"]: r["cost"] for r in doc["store_insert"]}
    assert store[8]["requests_per_op"] == pytest.approx(1.0, abs=edges(8, store[8], 0.05))
    assert store[8]["statements_per_op"] == pytest.approx(1.0, abs=edges(8, store[8], 0.05))
    lone = {r["concurrency"]: r["cost"] for r in doc["rqueue_claim"]}
    # a claim alone: one request, its time stamp and one statement (UPDATE ... RETURNING
    # of the group row), or one more request when nothing was left to claim
    assert lone[1]["requests_per_op"] == pytest.approx(1.0, abs=edges(1, lone[1], 0.05))
    assert lone[1]["statements_per_op"] == pytest.approx(2.0, abs=edges(1, lone[1], 0.1, 2))
    assert lone[1]["opcodes_per_op"] > 100  # the stamp's and the claim's programs
    row = next(r for r in doc["rqueue_claim_shared"] if r["concurrency"] == 8)
    # per claim sent (a claim that found the queue empty was sent too, but is no op)
    per_sent = row["ops"] / (row["ops"] + row["empty"])
    assert row["cost"]["requests_per_op"] * per_sent < 1.0  # merged: several per request
    # ... sharing one time stamp and, merged, one claim statement
    assert row["cost"]["statements_per_op"] * per_sent < 2.0
    assert "Where the time goes" in (out / "bench.md").read_text()


def test_comparison_puts_engines_side_by_side(bench_run):
    from harness.bench.breakdown import comparison_cells, comparison_markdown

    _, out = bench_run
    doc = json.loads((out / "bench.json").read_text())
    other = json.loads(json.dumps(doc))
    other["cluster"] = {**other["cluster"], "engine": "rqlited", "version": "v8.36.18"}
    rows = dict(comparison_cells([doc, other]))
    assert rows["store INSERT"][0].endswith("/s") and len(rows["store INSERT"]) == 4
    assert rows["rqueue claim, shared transport"][:2] == rows["rqueue claim, shared transport"][2:]
    md = comparison_markdown([doc, other])
    assert (
        "| operation | embedded, 1 client | embedded, 8 clients | rqlited v8.36.18, 1 client" in md
    )


def test_only_some_parts_are_measured_and_checked(tmp_path):
    out = tmp_path / "only"
    code = main(["bench", "--out", str(out), "--only", "store,claims", *TINY])
    assert code in (0, 1)
    doc = json.loads((out / "bench.json").read_text())
    assert doc["parts"] == ["store", "claims"]
    assert doc["rqueue_claim_shared"] and not doc["publish"] and not doc["claim_latency"]
    assert [t["name"] for t in doc["targets"]] == ["claims/s vs INSERTs/s at concurrency 8"]
    assert "--only store,claims" in doc["command"]
    # recorded beside the run's folder, with nothing earlier to compare with
    kept = [json.loads(line) for line in (tmp_path / "bench-ledger.jsonl").read_text().splitlines()]
    assert len(kept) == 1 and kept[0]["parts"] == ["store", "claims"]
    assert "rqueue claim, shared transport at 8, ratio to INSERT/s" in kept[0]["figures"]
    assert doc["ledger"]["lines"] == [
        "no earlier run on this machine with these settings to compare with"
    ]
    assert "Against earlier runs on this machine" in (out / "bench.md").read_text()


def test_bench_parser_rejects_unknown_parts_and_engines(capsys):
    with pytest.raises(SystemExit):
        build_parser("bench").parse_args(["bench", "--only", "claims,nope"])
    assert "unknown part(s) nope" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser("bench").parse_args(["bench", "--engines", "embedded,embedded"])
    assert "distinct engines" in capsys.readouterr().err


def test_opcodes_count_each_statement_s_program_on_rqueue_s_schema():
    from harness.bench.opcodes import rqueue_opcodes
    from rqueue import Statements
    from rqueue._models import Claim

    s = Statements(server_clock=True, clock=lambda: 0.0)
    ops = rqueue_opcodes()
    one = ops.of(s.claim_returning("t", 30.0, 0).sql)
    four = ops.of(s.claim_batch([Claim(f"t{i}", 30.0) for i in range(4)], 0).sql)
    assert one is not None and four is not None and 0 < one < four < 4 * one
    body = json.dumps([[s.stamp().sql], [s.claim_returning("t", 30.0, 0).sql, "t"]])
    assert ops.of_body(body.encode()) == one + ops.of(s.stamp().sql)
    assert ops.of("SELECT x FROM nowhere") is None


def test_wire_counter_counts_requests_statements_and_bytes():
    from harness.bench.cost import WireCounter, process_cpu

    counter = WireCounter()
    body = json.dumps([["INSERT INTO t VALUES (?)", '["not a statement"]'], ["SELECT 1"]])
    counter.add(body.encode(), 40)
    assert counter.reading() == (1, 2, len(body), 40, 1)
    assert counter.opcodes(0, 1) is None  # table t is not rqueue's
    assert process_cpu(os.getpid()) > 0
    assert process_cpu(2**22 + 12345) is None  # no such process


def test_a_batch_step_counts_its_items():
    def open_worker(i):
        def step():
            time.sleep(0.01)
            return 10 if i == 0 else 0  # worker 1 always finds nothing

        return step, lambda: None

    load = run_threads(open_worker, 2, seconds=0.2, warmup=0)
    assert load.ops > 0 and load.items == 10 * load.ops and load.empty > 0
    assert load.item_rate == pytest.approx(10 * load.rate)
    assert (load + load).items == 2 * load.items


def test_bench_batch_measures_both_ways_on_one_cluster(tmp_path):
    """A smoke run on tiny sizes: both ways measured, their files written (no speed)."""
    out = tmp_path / "batch"
    # a window long enough for whole claim-and-ack cycles on a loaded machine (CI saw none
    # complete inside 0.3 s)
    tiny = ["--seconds", "1", "--warmup", "0.2", "--messages", "2000", "--groups", "200"]
    code = main(["bench-batch", "--out", str(out), "--quiet", *tiny])
    assert code in (0, 1), "2 means the benchmark itself failed"
    doc = json.loads((out / "batch.json").read_text())
    assert [r["way"] for r in doc["rows"]] == ["single", "batched"]
    single, batched = doc["rows"]
    for row in doc["rows"]:
        assert row["messages_per_second"] > 0 and row["errors"] == 0, row
        assert row["requests_per_message"] > 0 and row["nodes_cpu_ms_per_message"] > 0, row
    assert single["messages_per_cycle"] == 1.0 and 1.0 <= batched["messages_per_cycle"] <= 10
    assert doc["ratio"] == pytest.approx(
        batched["messages_per_second"] / single["messages_per_second"], rel=0.01
    )
    assert (code == 0) == doc["target"]["met"]
    assert "| batched |" in (out / "batch.md").read_text()
    state = json.loads((out / "cluster" / "cluster.json").read_text())
    for node in state["nodes"]:  # the cluster is stopped
        with pytest.raises(ProcessLookupError):
            os.kill(node["pid"], 0)


def test_bench_batch_rejects_bad_sizes(tmp_path, capsys):
    args = ["bench-batch", "--out", str(tmp_path / "o"), "--groups", "10", "--messages", "5"]
    assert main(args) == 2
    assert "--groups 10 > --messages 5" in capsys.readouterr().err
    assert main([*args[:3], "--batch", "101"]) == 2
    assert "--batch 101: claim_many takes at most 100" in capsys.readouterr().err


def _store_and_claims_doc() -> dict:
    """What `bench --only store,claims` writes: no publish, latency or threads/tasks."""
    cost = {
        "client_cpu_ms": 0.5, "nodes_cpu_ms": 1.3, "leader_cpu_ms": 0.6,
        "requests_per_op": 0.25, "statements_per_op": 0.5, "opcodes_per_op": 102.0,
        "bytes_out_per_op": 400.0, "bytes_in_per_op": 195.0, "busy_cores": 1.21,
    }  # fmt: skip

    def row(rate: float, insert: float | None = None) -> dict:
        out = {"concurrency": 8, "per_second": rate, "p50_ms": 11.0, "p99_ms": 28.0}
        out.update({"empty": 0, "errors": 0, "cost": cost})
        return out if insert is None else {**out, "insert_per_second": insert}

    doc = {
        "settings": {"seconds": 1.0},
        "machine": {"cpus": 2, "load_before": [5.0], "load_after": [5.0]},
        "started": "2026-12-04T18:49:41Z",
        "cluster": {"engine": "embedded", "nodes": 3},
        "store_insert": [row(1107.0)],
        "rqueue_claim_shared": [row(665.0, insert=1122.0)],
        "publish": [],
        "claim_latency": [],
        "sync_vs_async": [],
    }
    doc["targets"] = [t.to_json() for t in targets(doc)]
    return doc


def test_a_partial_run_shows_only_what_it_measured():
    """`--only store,claims`: no empty tables, Markdown sections or plot panels."""
    from harness.bench.report import figure, markdown, tables

    doc = _store_and_claims_doc()
    titles = [str(t.title) for t in tables(doc)]
    assert [t.split(",")[0].split(" (")[0] for t in titles] == [
        "Throughput",
        "Latency of those operations",
        "Targets",
    ]
    md = markdown(doc)
    for empty in ("| publish |", "| claim latency, one claimer |", "| claim+ack cycles ("):
        assert empty not in md
    fig = figure(doc)
    assert [ax.get_title() for ax in fig.axes] == ["Throughput"]


def test_each_ratio_shows_the_insert_figure_it_is_taken_against():
    """The INSERT row shows the store part's 1,107/s; the claims ratio is taken against
    the 1,122/s measured right before it: both are on the page, and which is which."""
    from harness.bench.report import RATIO_NOTE, markdown, print_tables, tables

    doc = _store_and_claims_doc()
    md = markdown(doc)
    assert "| store INSERT | 1,107<br>" in md and "665 (0.59 of 1,122)" in md
    assert RATIO_NOTE in md and 'the number after "of"' in RATIO_NOTE
    out = io.StringIO()
    print_tables(tables(doc)[:1], file=out)
    assert "665 (0.59 of 1,122)" in out.getvalue()
    assert "the store INSERT row is the store part's own" in " ".join(out.getvalue().split())


def test_tables_keep_their_width_when_stdout_is_not_a_terminal():
    """Piped or redirected, Rich would squeeze the cost table into 80 columns and its
    headers into "cli…": printed at its own width, every heading stays whole."""
    from harness.bench.breakdown import COLUMNS, breakdown_table
    from harness.bench.report import print_tables

    out = io.StringIO()  # not a terminal
    print_tables([breakdown_table(_store_and_claims_doc())], file=out)
    text = out.getvalue()
    assert all(heading in text for heading, _, _ in COLUMNS), text
    assert "rqueue claim, shared transport" in text and "…" not in text
