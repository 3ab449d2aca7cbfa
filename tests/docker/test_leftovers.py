"""Nothing of the project is left on the engine or the host after a Docker run: after a
run that ends, after SIGTERM in the middle of one, and after SIGKILL of the harness
followed by ``python -m harness cluster down --all --backend docker`` (real engine)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import NOTHING, anonymous_volumes, host_rules, leftovers

pytestmark = pytest.mark.chaos
ROOT = Path(__file__).resolve().parents[2]


def _harness(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [sys.executable, "-m", "harness", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def _run(image: str, out: Path, scenario: str = "partition-leader", seconds: int = 20) -> Any:
    return _harness(
        "run", scenario, "--backend", "docker", "--image", image, "--time", str(seconds),
        "--no-progress", "--no-plots", "--out", str(out),
    )  # fmt: skip


def _wait_for_containers(engine: Any, proc: subprocess.Popen[str], count: int) -> None:
    """Until the run's cluster has ``count`` running containers and its workload started."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        running = [c for c in leftovers(engine)["containers"]]
        if len(running) >= count and proc.poll() is None:
            return
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.5)
    raise AssertionError(f"the run's {count} containers did not appear within 120 s")


@contextlib.contextmanager
def _terminated_on_failure(proc: subprocess.Popen[str]) -> Iterator[None]:
    """A failure before the test stops the run itself: SIGTERM, so that the run removes
    its cluster as it does when interrupted (else the next tests find it and skip)."""
    try:
        yield
    except BaseException:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(AssertionError):
                _finish(proc, 120)
        raise


def _finish(proc: subprocess.Popen[str], timeout: float) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(
            f"the harness did not end within {timeout:g} s: {err[-2000:]}"
        ) from None
    return proc.returncode, err


def test_nothing_left_after_a_run(clean_engine: Any, node_image: str, tmp_path: Path) -> None:
    rules, anonymous = set(host_rules()), anonymous_volumes(clean_engine)
    code, err = _finish(_run(node_image, tmp_path / "run"), 240)
    assert code in (0, 3), err[-2000:]  # valid, or too short to judge: not this test's point
    assert leftovers(clean_engine) == NOTHING
    assert set(host_rules()) <= rules
    assert anonymous_volumes(clean_engine) <= anonymous
    # the run folder keeps each node's log
    assert sorted(p.name for p in (tmp_path / "run" / "cluster").glob("n*.log")) == [
        "n1.log", "n2.log", "n3.log"
    ]  # fmt: skip


def test_nothing_left_after_sigterm_mid_run(
    clean_engine: Any, node_image: str, tmp_path: Path
) -> None:
    rules, anonymous = set(host_rules()), anonymous_volumes(clean_engine)
    proc = _run(node_image, tmp_path / "run", seconds=60)
    with _terminated_on_failure(proc):
        _wait_for_containers(clean_engine, proc, 3)
        time.sleep(8)  # into the workload and its first partition
    proc.send_signal(signal.SIGTERM)
    code, err = _finish(proc, 120)
    assert code != 0
    assert leftovers(clean_engine) == NOTHING, err[-2000:]
    assert set(host_rules()) <= rules
    assert anonymous_volumes(clean_engine) <= anonymous


def test_sigkill_then_cluster_down_all_leaves_nothing(
    clean_engine: Any, node_image: str, tmp_path: Path
) -> None:
    rules, anonymous = set(host_rules()), anonymous_volumes(clean_engine)
    proc = _run(node_image, tmp_path / "run", seconds=60)
    with _terminated_on_failure(proc):
        _wait_for_containers(clean_engine, proc, 3)
        time.sleep(8)
    proc.send_signal(signal.SIGKILL)
    _finish(proc, 30)
    found = leftovers(clean_engine)
    assert len(found["containers"]) == 3 and found["networks"] and found["volumes"]
    code, err = _finish(_harness("cluster", "down", "--all", "--backend", "docker"), 120)
    assert code == 0, err
    assert leftovers(clean_engine) == NOTHING
    assert set(host_rules()) <= rules
    assert anonymous_volumes(clean_engine) <= anonymous
