"""Plots and report from a run folder holding only history.jsonl (and check.json)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from harness.checker import main_check
from harness.plots import DPI, SIZE, main_plot, plot_run
from harness.report import write_report

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


def _has_colour(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 12) -> int:
    return int((np.abs(img.astype(int) - rgb).max(axis=2) <= tol).sum())


def test_throughput_and_latency_plots(sample_run: Path) -> None:
    written = plot_run(sample_run)
    assert [p.name for p in written] == ["throughput.png", "latency.png"]
    size = (int(SIZE[1] * DPI), int(SIZE[0] * DPI))
    for path in written:
        img = _pixels(path)
        assert img.shape[:2] == size
        assert _colours(img) > 50, f"{path.name} looks blank"
    throughput = _pixels(sample_run / "throughput.png")
    # the claims line (tab:blue) and the shaded faults (Pastel1 red, at alpha 0.6 on white)
    assert _has_colour(throughput, (31, 119, 180)) > 500
    assert _has_colour(throughput, (252, 202, 198)) > 2000
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
        "throughput.png", "latency.png", "anomaly-timeline.png", "report.md"
    ]  # fmt: skip
    shutil.copy(HISTORIES / "bad-json.jsonl", tmp_path / "history.jsonl")
    assert main_plot(tmp_path) == 2
    assert "history.jsonl:3: malformed JSON" in capsys.readouterr().err
    assert main_plot(tmp_path / "nowhere") == 2
