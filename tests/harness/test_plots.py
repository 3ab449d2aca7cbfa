"""Plots and report from a run folder holding only history.jsonl (and check.json)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

from harness.check_cli import main_check
from harness.checker import check
from harness.colours import fault_colour
from harness.history import fault_intervals, read_history
from harness.plots.latency import _steps_with_gaps, binned_percentiles, latency_figure
from harness.plots.layout import DPI, SIZE
from harness.plots.layout import bin_edges as _bin_edges
from harness.plots.run import drain_span, main_plot, plot_run, recoveries
from harness.plots.throughput import throughput_figure
from harness.plots.timeline import anomaly_timeline_figure
from harness.report import PLOTS, write_report
from harness.store import RunStore

HISTORIES = Path(__file__).parent / "histories"
_BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "checker_bench.py"


def _simulate(seed: int, events: int) -> list[dict]:
    spec = importlib.util.spec_from_file_location("checker_bench", _BENCH)
    assert spec is not None and spec.loader is not None
    bench = sys.modules.setdefault("checker_bench", importlib.util.module_from_spec(spec))
    spec.loader.exec_module(bench)
    return bench.simulate(seed, events, fault_every=4.0)


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder with a simulated history of a correct queue, with faults."""
    root = tmp_path_factory.mktemp("run")
    with (root / "history.jsonl").open("w") as out:
        for ev in _simulate(5, 4000):
            out.write(json.dumps(ev) + "\n")
    return root


def _pixels(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        assert im.format == "PNG"
        im.verify()
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def _colours(img: np.ndarray) -> int:
    return len(np.unique(img.reshape(-1, 3), axis=0))


def _on_white(hex_colour: str, alpha: float) -> tuple[int, int, int]:
    """``hex_colour`` drawn at ``alpha`` over white."""
    rgb = (int(hex_colour[k : k + 2], 16) for k in (1, 3, 5))
    r, g, b = (round(255 - alpha * (255 - c)) for c in rgb)
    return r, g, b


def _has_colour(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 12) -> int:
    return int((np.abs(img.astype(int) - rgb).max(axis=2) <= tol).sum())


def test_throughput_and_latency_plots(sample_run: Path) -> None:
    written = plot_run(sample_run)
    assert [p.name for p in written] == ["throughput.png", "latency.png"]
    for path in written:
        img = _pixels(path)
        assert img.shape[1] == int(SIZE[0] * DPI) and img.shape[0] >= int(SIZE[1] * DPI)
        assert _colours(img) > 50, f"{path.name} looks blank"
    throughput = _pixels(sample_run / "throughput.png")
    # the claims line (tab:blue) and the shaded faults (their kind's colour, at alpha 0.45
    # on white: harness.colours, as report.html has them)
    assert _has_colour(throughput, (31, 119, 180)) > 500
    kinds = {f.kind for f in fault_intervals(read_history(RunStore(sample_run).history))}
    shaded = sum(_has_colour(throughput, _on_white(fault_colour(k), 0.45)) for k in kinds)
    assert shaded > 2000
    latency = _pixels(sample_run / "latency.png")
    assert _has_colour(latency, (44, 160, 44), tol=60) > 200  # ok points, green


def test_no_timeline_without_anomalies(sample_run: Path) -> None:
    assert main_check(sample_run / "history.jsonl") == 0
    assert not any(p.name == "anomaly-timeline.png" for p in plot_run(sample_run))


@pytest.mark.parametrize("name", ["duplicate-group-lease", "stale-ack-accepted", "lost"])
def test_anomaly_timeline(name: str, tmp_path: Path) -> None:
    shutil.copy(HISTORIES / f"{name}.jsonl", tmp_path / "history.jsonl")
    # without check.json the plots check the history themselves
    written = plot_run(tmp_path)
    assert [p.name for p in written][-1] == "anomaly-timeline.png"
    img = _pixels(tmp_path / "anomaly-timeline.png")
    assert img.shape[1] == int(SIZE[0] * DPI)
    assert _colours(img) > 20
    assert _has_colour(img, (255, 0, 0), tol=40) > 20  # the anomaly's red marker line


def test_report_shows_anomalies_as_history_lines(tmp_path: Path) -> None:
    shutil.copy(HISTORIES / "duplicate-group-lease.jsonl", tmp_path / "history.jsonl")
    (tmp_path / "scenario.json").write_text(
        json.dumps({"name": "lease-expiry", "nodes": 3, "duration": 60.0,
                    "faults": [{"kind": "lease-expiry", "start": 5.0, "duration": 10.0}]})
    )  # fmt: skip
    (tmp_path / "versions.json").write_text(json.dumps({"rqueue": "0.1.0", "python": "3.11"}))
    (tmp_path / "run.json").write_text(json.dumps({"exit": 1}))  # the run finished
    assert main_check(tmp_path / "history.jsonl") == 1
    plot_run(tmp_path)
    report = write_report(tmp_path, {"verdict": "ANOMALIES", "ops": {"claim": {"ok": 2}}})
    text = report.read_text()
    assert "**Verdict: ANOMALIES** — duplicate-group-lease (1)." in text
    assert "| name | lease-expiry |" in text and "`lease-expiry` start=5.0" in text
    assert "| rqueue | 0.1.0 |" in text and "| ops.claim.ok | 2 |" in text
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    block = "\n".join(lines[i] for i in (2, 3, 4, 5))
    assert f"```json\n{block}\n```" in text
    for png in ("throughput.png", "latency.png", "anomaly-timeline.png"):
        assert f"]({png})" in text


def test_report_of_a_valid_run_and_of_an_unreadable_history(tmp_path: Path) -> None:
    shutil.copy(HISTORIES / "valid-basic.jsonl", tmp_path / "history.jsonl")
    text = write_report(tmp_path).read_text()
    assert "**Verdict: valid**" in text and "| kill n1 | 0.30 | 0.90 | 0.110 |" in text
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(HISTORIES / "time-backwards.jsonl", bad / "history.jsonl")
    text = write_report(bad).read_text()
    assert "could not be checked** (line 3: time goes backwards" in text


def test_main_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(HISTORIES / "lost.jsonl", tmp_path / "history.jsonl")
    assert main_plot(tmp_path) == 0
    out = capsys.readouterr().out.split()
    assert [Path(p).name for p in out] == [
        "throughput.png", "latency.png", "anomaly-timeline.png", "report.md", "report.html"
    ]  # fmt: skip
    shutil.copy(HISTORIES / "bad-json.jsonl", tmp_path / "history.jsonl")
    assert main_plot(tmp_path) == 2
    assert "history.jsonl:3: malformed JSON" in capsys.readouterr().err
    assert main_plot(tmp_path / "nowhere") == 2


# -- what a reader must be able to see ------------------------------------------------------
def _op(rows: list, t0: float, t1: float, p: int, f: str, value: Any, out: Any = None) -> None:
    rows.append((t0, p, "invoke", f, value))
    rows.append((t1, p, "ok", f, value if out is None else out))


def _gapped_history(end: float = 12.6, burst: int = 0) -> list[dict]:
    """Claims and acks every 0.1 s except during 4-7 s; two overlapping faults at 4 s
    (one ends, one never does) and one alone at 8 s; a last event at ``end``, and
    ``burst`` more claims just before it."""
    rows: list = []
    n = 0
    t = 0.0
    while t < end - 0.2:
        if not 4.0 <= t < 7.0:
            msg = f"m{n}"
            _op(rows, t, t + 0.01, 0, "publish", {"group": f"g{n}", "msg": msg, "priority": 0})
            lease = {"group": f"g{n}", "msg": msg, "seq": n, "token": f"t{n}", "visibility": 5}
            _op(rows, t + 0.02, t + 0.03 + 0.01 * (n % 5), 1, "claim",
                {"visibility": 5, "min_priority": 0}, lease)  # fmt: skip
            _op(
                rows,
                t + 0.08,
                t + 0.09,
                1,
                "ack",
                {k: lease[k] for k in ("group", "msg", "seq", "token")},
            )
            n += 1
        t = round(t + 0.1, 6)
    nem = [
        (4.0, "kill", {"fault": "kill-leader", "phase": "start", "nodes": ["n1"]}),
        (4.1, "pause", {"fault": "pause-leader", "phase": "start", "nodes": ["n2"]}),
        (6.0, "restart", {"fault": "kill-leader", "phase": "end", "nodes": ["n1"]}),
        (8.0, "partition", {"fault": "partition-leader", "phase": "start", "nodes": ["n3"]}),
        (9.0, "heal", {"fault": "partition-leader", "phase": "end", "nodes": ["n3"]}),
    ]
    rows += [(t, "nemesis", "info", f, v) for t, f, v in nem]
    for k in range(burst):
        t = end - 0.4 + 0.01 * k
        lease = {"group": f"b{k}", "msg": f"b{k}", "seq": 1000 + k, "token": f"b{k}"}
        _op(rows, t, t + 0.005, 100 + k, "claim", {"visibility": 5, "min_priority": 0}, lease)
    rows.append((end, 0, "invoke", "publish", {"group": "gz", "msg": "mz", "priority": 0}))
    rows.sort(key=lambda r: (r[0], r[2] != "invoke"))
    return [
        {"index": i, "time": t, "process": p, "type": typ, "f": f, "value": v}
        for i, (t, p, typ, f, v) in enumerate(rows)
    ]


def _drawn(fig: Figure) -> Any:
    fig.canvas.draw()
    return fig.canvas.get_renderer()  # type: ignore[attr-defined]


def _overlap(a: Any, b: Any) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("which", ["throughput", "latency"])
def test_legend_outside_the_data_and_fault_labels_apart(which: str) -> None:
    events = _gapped_history()
    faults = fault_intervals(events)
    result = check(events)
    if which == "throughput":
        fig = throughput_figure(events, faults, events[-1]["time"], recoveries(result))
    else:
        fig = latency_figure(events, faults, events[-1]["time"])
    renderer = _drawn(fig)
    data, lanes = fig.axes  # the fault lanes are added after the data axes
    legend = data.get_legend()
    assert legend is not None
    assert not _overlap(legend.get_window_extent(renderer), data.get_window_extent(renderer))
    labels = [t for t in lanes.texts if "leader" in t.get_text()]
    assert len(labels) == 3  # every fault labelled, including one never ended
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert all(lanes.bbox.x0 <= b.x0 and b.x1 <= fig.bbox.x1 for b in boxes)
    plt.close(fig)


def test_throughput_writes_each_faults_recovery() -> None:
    events = _gapped_history()
    result = check(events)
    rec = recoveries(result)
    assert set(rec) == {f.start_index for f in fault_intervals(events)}
    fig = throughput_figure(events, fault_intervals(events), events[-1]["time"], rec)
    texts = [t.get_text() for t in fig.axes[1].texts]
    # the first lease after 4.0 s is the claim invoked at 7.02 s, back at 7.03-7.07 s
    kill = next(t for t in texts if "kill-leader n1" in t)
    assert "next lease +3.0" in kill
    assert any("partition-leader n3: next lease +0.0" in t for t in texts)
    rec[min(rec)] = None
    fig2 = throughput_figure(events, fault_intervals(events), events[-1]["time"], rec)
    assert any("kill-leader n1: no lease after it" in t.get_text() for t in fig2.axes[1].texts)
    plt.close(fig)
    plt.close(fig2)


def test_no_percentile_line_across_a_period_without_operations() -> None:
    events = _gapped_history()
    fig = latency_figure(events, fault_intervals(events), events[-1]["time"])
    data = fig.axes[0]
    lines = [ln for ln in data.get_lines() if str(ln.get_label()).startswith(("p50", "p99"))]
    assert len(lines) == 2
    for line in lines:
        x = np.asarray(line.get_xdata(), dtype=float)
        y = np.asarray(line.get_ydata(), dtype=float)
        assert np.isnan(y).any()
        for k in range(len(x) - 1):  # no drawn segment reaches into 4-7 s
            if np.isfinite(y[k]) and np.isfinite(y[k + 1]):
                lo, hi = sorted((x[k], x[k + 1]))
                assert hi <= 4.0 + 1e-9 or lo >= 7.0 - 1e-9, (lo, hi)
    plt.close(fig)


def test_binned_percentiles_and_steps_with_gaps() -> None:
    x = np.array([0.1, 0.9, 1.05, 1.5, 3.5, 3.6])
    y = np.array([1.0, 3.0, 4.0, 4.0, 5.0, 5.0])
    p50, p99, first, last = binned_percentiles(x, y, np.array([0.0, 1.0, 2.0, 3.0, 4.0]))
    assert p50[0] == 2.0 and p50[1] == 4.0 and np.isnan(p50[2]) and p50[3] == 5.0
    assert p99[0] == pytest.approx(2.98) and np.isnan(p99[2])
    assert list(first[[0, 1, 3]]) == [0.1, 1.05, 3.5] and list(last[[0, 1, 3]]) == [0.9, 1.5, 3.6]
    xs, ys = _steps_with_gaps(p50, first, last, 1.0)
    # 0.1-0.9 joined to 1.05-1.5 (0.15 s apart), then a break, then 3.5-3.6 alone
    assert list(xs[:4]) == [0.1, 1.05, 1.05, 1.5] and list(ys[:4]) == [2.0, 2.0, 4.0, 4.0]
    assert np.isnan(xs[4]) and list(xs[5:]) == [3.5, 3.6]


def test_the_last_partial_bin_is_scaled_and_marked() -> None:
    edges, width = _bin_edges(12.6)
    assert width == 1.0 and edges[-1] == 12.6 and edges[-2] == 12.0  # 0.6 s: its own bin
    edges, _ = _bin_edges(12.1)
    assert edges[-1] == 12.1 and edges[-2] == 11.0  # 0.1 s joins the bin before it
    events = _gapped_history(12.6)
    fig = throughput_figure(events, fault_intervals(events), events[-1]["time"])
    data = fig.axes[0]
    legend = [t.get_text() for t in data.get_legend().get_texts()]
    assert "last bin: 0.60 s, rate scaled" in legend
    # the claims in 12.0-12.6 s (4 of them) are drawn as a rate per second, dotted
    partial = [a for a in data.patches if getattr(a, "get_linestyle", lambda: "")() == ":"]
    assert partial, "the partial bin is drawn in its own style"
    claims = next(
        a for a in partial if a.get_edgecolor()[:3] == matplotlib.colors.to_rgb("tab:blue")
    )
    values, edges_drawn = claims.get_data().values, claims.get_data().edges
    assert list(edges_drawn) == [12.0, 12.6]
    assert values[0] == pytest.approx(4 / 0.6)
    plt.close(fig)


def test_bins_start_at_the_first_operation() -> None:
    edges, _ = _bin_edges(12.6, 4.3)
    assert edges[0] == 4.3 and edges[1] == 5.3 and edges[-1] == 12.6
    later = [{**e, "time": e["time"] + 4.25} for e in _gapped_history()]
    fig = throughput_figure(later, fault_intervals(later), later[-1]["time"])
    blue = matplotlib.colors.to_rgb("tab:blue")
    claims = [a for a in fig.axes[0].patches if a.get_edgecolor()[:3] == blue]
    first = min(float(a.get_data().edges[0]) for a in claims)
    assert first == pytest.approx(4.25)  # no line (of zeros) before anything ran
    plt.close(fig)


def test_an_empty_history_plots_without_warnings(tmp_path: Path) -> None:
    (tmp_path / "history.jsonl").write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        written = plot_run(tmp_path)
    assert [p.name for p in written] == ["throughput.png", "latency.png"]


# -- what each mark says --------------------------------------------------------------------
def _titles(fig: Figure) -> list[str]:
    return [a.get_title() for a in fig.axes if a.get_title()]


def test_each_plot_is_titled_as_the_report_captions_it(tmp_path: Path) -> None:
    shutil.copy(HISTORIES / "duplicate-group-lease.jsonl", tmp_path / "history.jsonl")
    events = read_history(tmp_path / "history.jsonl")
    result = check(events)
    end = events[-1]["time"]
    faults = fault_intervals(events)
    captions = dict(PLOTS)
    figures = {
        "throughput.png": throughput_figure(events, faults, end, recoveries(result)),
        "latency.png": latency_figure(events, faults, end),
        "anomaly-timeline.png": anomaly_timeline_figure(events, result),
    }
    for name, fig in figures.items():
        assert fig is not None
        assert _titles(fig) == [captions[name]], name
        plt.close(fig)
    plot_run(tmp_path)
    text = write_report(tmp_path).read_text()
    for name, caption in PLOTS:
        assert f"### {caption}\n\n![{caption}]({name})" in text


def test_the_last_bins_note_names_the_series_and_the_bin() -> None:
    events = _gapped_history(12.6, burst=30)
    fig = throughput_figure(events, fault_intervals(events), events[-1]["time"])
    notes = [t.get_text() for t in fig.axes[0].texts]
    # 4 claims of the run plus the burst's 30 in the last 0.6 s: 57/s, off the scale
    assert notes == ["claims (leases): 57/s in the last 0.60 s, above the axis ↑"]
    plt.close(fig)


def test_the_drain_after_the_workload_is_marked(tmp_path: Path) -> None:
    run = {"phases": {"cluster-up": 1.2, "workload": 10.0, "heal": 0.5, "drain": 1.5}}
    assert drain_span(run) == (10.5, 12.0)
    assert drain_span({"phases": {"workload": 10.0}}) is None and drain_span(None) is None
    events = _gapped_history(12.6)
    faults = fault_intervals(events)
    for fig in (
        throughput_figure(events, faults, 12.6, None, (10.5, 12.0)),
        latency_figure(events, faults, 12.6, (10.5, 12.0)),
    ):
        data = fig.axes[0]
        legend = [t.get_text() for t in data.get_legend().get_texts()]
        assert "drain after the workload\n(10.50-12.00 s)" in legend
        starts = [ln.get_xdata()[0] for ln in data.get_lines() if ln.get_linestyle() == "-."]
        assert starts == [10.5]  # where the workload stopped
        plt.close(fig)
    # plot_run reads the phases from run.json: its PNG differs over the drain's 1.5 s
    for name in ("plain", "with-run-json"):
        (tmp_path / name).mkdir()
        with (tmp_path / name / "history.jsonl").open("w") as out:
            out.writelines(json.dumps(e) + "\n" for e in events)
    (tmp_path / "with-run-json" / "run.json").write_text(json.dumps(run))
    plain, marked = (_pixels(plot_run(tmp_path / name)[0]) for name in ("plain", "with-run-json"))
    assert plain.shape == marked.shape
    assert (plain != marked).any(axis=2).sum() > 20_000


def test_latency_ticks_are_milliseconds() -> None:
    events = _gapped_history()
    fig = latency_figure(events, fault_intervals(events), events[-1]["time"])
    data = fig.axes[0]
    _drawn(fig)
    assert data.get_ylabel() == "latency (ms)"
    labels = [t.get_text() for t in data.get_yticklabels() + data.get_yticklabels(minor=True)]
    shown = [s for s in labels if s]
    assert shown and all(float(s.replace(",", "")) > 0 for s in shown), shown
    ok = next(c for c in data.collections if str(c.get_label()).startswith("ok"))
    # the claims took 10-50 ms: plotted as 10-50, not 0.01-0.05
    assert 9.9 < float(np.max(ok.get_offsets()[:, 1])) < 50.1
    plt.close(fig)


def _crowded_anomalies() -> list[dict]:
    """Three groups, each leased twice at once around 2 s, 0.02 s apart: three anomalies
    close together, labelled where the leases' own labels are."""
    rows: list = []
    for k in range(3):
        g, m, t = f"g{k}", f"m{k}", 2.0 + 0.02 * k
        _op(rows, 0.0, 0.05, 10 + k, "publish", {"group": g, "msg": m, "priority": 0})
        a = {"group": g, "msg": m, "seq": k + 1, "token": f"a{k}", "visibility": 5.0}
        _op(rows, t, t + 0.01, 20 + k, "claim", {"visibility": 5.0, "min_priority": 0}, a)
        b = {**a, "token": f"b{k}"}
        _op(rows, t + 0.03, t + 0.04, 30 + k, "claim", {"visibility": 5.0, "min_priority": 0}, b)
        _op(rows, t + 0.2, t + 0.3, 30 + k, "ack", {x: b[x] for x in ("group", "msg", "seq")})
    rows.sort(key=lambda r: (r[0], r[2] != "invoke"))
    return [
        {"index": i, "time": t, "process": p, "type": typ, "f": f, "value": v}
        for i, (t, p, typ, f, v) in enumerate(rows)
    ]


def test_anomaly_labels_hide_neither_each_other_nor_lease_labels() -> None:
    events = _crowded_anomalies()
    result = check(events)
    assert result["anomalies"]["duplicate-group-lease"]["count"] == 3
    fig = anomaly_timeline_figure(events, result)
    assert fig is not None
    renderer = _drawn(fig)
    texts = [t for a in fig.axes for t in a.texts]
    anomalies = [t for t in texts if t.get_text().strip().startswith("duplicate-group-lease")]
    leases = [t for t in texts if re.fullmatch(r"m\d+ p\d+", t.get_text())]
    assert len(anomalies) == 3 and len(leases) == 6
    boxes = [t.get_window_extent(renderer) for t in anomalies]
    assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    for box in boxes:
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1
        assert not any(_overlap(box, t.get_window_extent(renderer)) for t in leases)
    plt.close(fig)


def test_the_summary_table_is_the_same_from_the_runner_and_from_run_json(
    tmp_path: Path,
) -> None:
    summary = {
        "scenario": "steady", "subject": "rqueue", "engine": "embedded", "nodes": 3,
        "ops": {"publish": {"ok": 5}, "claim": {"ok": 4, "fail": 1}},
        "faults": {"pause-leader": 1, "kill-leader": 2}, "anomalies": {"lost": 0},
        "verdict": "valid", "drain": "complete", "exit": 0, "run_dir": "x",
    }  # fmt: skip
    tables = []
    for name in ("runner", "plot"):
        root = tmp_path / name
        root.mkdir()
        shutil.copy(HISTORIES / "valid-basic.jsonl", root / "history.jsonl")
        if name == "runner":
            text = write_report(root, summary).read_text()
        else:  # as the runner stores it, and `python -m harness plot` reads it back
            (root / "run.json").write_text(json.dumps({"summary": summary}, sort_keys=True))
            text = write_report(root).read_text()
        tables.append(text.split("## Summary\n\n", 1)[1].split("\n\n", 1)[0])
    assert tables[0] == tables[1]
    keys = [line.split(" | ")[0].removeprefix("| ") for line in tables[0].splitlines()[2:]]
    assert keys[:3] == ["scenario", "verdict", "subject"]
    assert keys[keys.index("ops.claim.fail") - 1] == "nodes"


def test_batches_count_each_lease_and_each_acked_lease() -> None:
    lease = {"group": "g", "msg": "m", "seq": 1, "token": "t", "visibility": 2.0}
    leases = [{**lease, "group": f"g{i}", "seq": i} for i in range(3)]
    events = [
        {"index": 0, "time": 0.1, "process": 0, "type": "invoke", "f": "claim-many",
         "value": {"visibility": 2.0, "min_priority": 0, "max_messages": 10}},
        {"index": 1, "time": 0.2, "process": 0, "type": "ok", "f": "claim-many",
         "value": {"leases": leases}},
        {"index": 2, "time": 0.3, "process": 0, "type": "invoke", "f": "ack-many",
         "value": {"leases": leases}},
        {"index": 3, "time": 0.4, "process": 0, "type": "ok", "f": "ack-many",
         "value": {"leases": leases, "outcomes": ["ok", "fail", "ok"]}},
    ]  # fmt: skip
    fig = throughput_figure(events, [], 1.0)
    by_colour = {
        a.get_edgecolor()[:3]: a.get_data().values
        for a in fig.axes[0].patches
        if hasattr(a, "get_data")
    }
    rgb = matplotlib.colors.to_rgb
    assert sum(by_colour[rgb("tab:blue")]) == pytest.approx(3 / 0.9)  # three leases
    assert sum(by_colour[rgb("tab:green")]) == pytest.approx(2 / 0.9)  # two acked
    plt.close(fig)


def _short_leases_in_a_row() -> list[dict]:
    """One group leased 16 times in 0.8 s (claim, ack, next claim), then leased twice at
    once: a duplicate-group-lease whose timeline shows the short leases before it."""
    rows: list = []
    _op(rows, 0.0, 0.05, 10, "publish", {"group": "g", "msg": "m0", "priority": 0})
    for k in range(17):
        _op(rows, 0.1 + 0.01 * k, 0.105 + 0.01 * k, 10, "publish",
            {"group": "g", "msg": f"m{k + 1}", "priority": 0})  # fmt: skip
    args = {"visibility": 5.0, "min_priority": 0}
    for k in range(16):
        t = 2.2 + 0.05 * k
        lease = {"group": "g", "msg": f"m{k}", "seq": k + 1, "token": f"t{k}", "visibility": 5.0}
        _op(rows, t, t + 0.005, 20, "claim", args, lease)
        _op(rows, t + 0.02, t + 0.025, 20, "ack", {x: lease[x] for x in ("group", "msg", "seq")})
    a = {"group": "g", "msg": "m16", "seq": 17, "token": "a", "visibility": 5.0}
    _op(rows, 3.1, 3.11, 21, "claim", args, a)
    _op(rows, 3.13, 3.14, 22, "claim", args, {**a, "token": "b"})
    rows.sort(key=lambda r: (r[0], r[2] != "invoke"))
    return [
        {"index": i, "time": t, "process": p, "type": typ, "f": f, "value": v}
        for i, (t, p, typ, f, v) in enumerate(rows)
    ]


def test_short_leases_in_a_row_do_not_pile_their_labels_up() -> None:
    events = _short_leases_in_a_row()
    result = check(events)
    assert result["anomalies"]["duplicate-group-lease"]["count"] >= 1
    fig = anomaly_timeline_figure(events, result)
    assert fig is not None
    renderer = _drawn(fig)
    leases = [t for a in fig.axes for t in a.texts if re.fullmatch(r"m\d+ p\d+", t.get_text())]
    shown = {t.get_text() for t in leases}
    assert {"m16 p21", "m16 p22"} <= shown  # the anomaly's own leases are labelled first
    assert "m0 p20" in shown and len(shown) < 18  # the row's first keeps its label, not all
    boxes = [t.get_window_extent(renderer) for t in leases]
    assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    plt.close(fig)


def test_every_anomaly_kind_has_its_sentence_and_the_report_prints_it(tmp_path: Path) -> None:
    """One sentence per kind, in harness/explanations.py: a kind the checker reports
    without one (a new one, say `corrupted`) fails here until it gets its sentence."""
    from harness.checker import ANOMALIES
    from harness.explanations import EXPLANATIONS

    missing = [kind for kind in ANOMALIES if kind not in EXPLANATIONS]
    assert missing == [], f"add a sentence for {missing} to harness/explanations.py"
    assert set(EXPLANATIONS) <= set(ANOMALIES), "a sentence for a kind the checker lacks"
    shutil.copy(HISTORIES / "duplicate-group-lease.jsonl", tmp_path / "history.jsonl")
    text = write_report(tmp_path).read_text()
    why = f"Why it is an anomaly: {EXPLANATIONS['duplicate-group-lease']}"
    head = text.index("### duplicate-group-lease: 1")
    assert text.index(why) > head and text.index(why) < text.index("```json", head)
