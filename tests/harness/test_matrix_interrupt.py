"""An interrupted matrix lets the run in progress tear down before it goes (real signals)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

#: a stand-in for `python -m harness run`: its clean-up takes a while after SIGINT
CHILD = """
import sys, time
from pathlib import Path
out = Path(sys.argv[1])
try:
    (out / "ready").write_text("")
    time.sleep(120)
finally:
    time.sleep(1.5)  # tearing down a cluster takes time
    (out / "torn-down").write_text("")
"""

PARENT = """
import sys
from harness.interrupts import Terminated
from harness.matrix import run_child
try:
    run_child([sys.executable, sys.argv[1], sys.argv[2]], timeout=120)
except (KeyboardInterrupt, Terminated):
    sys.exit(130)
"""


def _wait_for(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"{path.name} did not appear within {seconds:g} s")
        time.sleep(0.02)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_matrix_waits_for_the_runs_teardown(tmp_path: Path, sig: int) -> None:
    child = tmp_path / "child.py"
    child.write_text(textwrap.dedent(CHILD))
    parent = subprocess.Popen(
        [sys.executable, "-c", "from harness.interrupts import sigterm_unwinds\n"
         "with sigterm_unwinds():\n" + textwrap.indent(PARENT, "    "),
         str(child), str(tmp_path)],
    )  # fmt: skip
    try:
        _wait_for(tmp_path / "ready", 30)
        parent.send_signal(sig)
        assert parent.wait(timeout=60) == 130
    finally:
        parent.kill()
        parent.wait()
    assert (tmp_path / "torn-down").exists(), "the child was killed before its clean-up ended"
