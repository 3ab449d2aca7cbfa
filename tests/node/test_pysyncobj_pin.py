"""The node runs only on the PySyncObj release it is built for (it uses its internals)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pysyncobj
import pytest

from harness.node.pysyncobj_pin import BUILT_FOR, PySyncObjMismatch, mismatch, require

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_release_is_the_one_the_node_is_built_for() -> None:
    assert mismatch() is None
    require()  # raises nothing


def test_pyproject_pins_that_release_below_the_next() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (spec,) = [d for d in extras["optional-dependencies"]["harness"] if "pysyncobj" in d]
    major, minor, patch = BUILT_FOR.split(".")
    assert spec == f"pysyncobj>={BUILT_FOR},<{major}.{minor}.{int(patch) + 1}"


def test_another_release_is_refused_in_one_line() -> None:
    why = mismatch("0.3.18")
    assert why == (
        f"the embedded node is built for pysyncobj {BUILT_FOR} (it uses its internals), "
        f"found 0.3.18: pip install 'pysyncobj=={BUILT_FOR}'"
    )
    with pytest.raises(PySyncObjMismatch, match=re.escape(why)):
        require("0.3.18")


def test_the_node_exits_with_that_line_on_another_release(tmp_path: Path) -> None:
    """A real ``python -m harness.node`` over a copy of PySyncObj that says 0.3.18."""
    shadow = tmp_path / "pysyncobj"
    shutil.copytree(Path(pysyncobj.__file__).parent, shadow)
    (shadow / "version.py").write_text("VERSION = '0.3.18'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    argv = [sys.executable, "-m", "harness.node", "--node-id", "n1"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr == f"harness.node: {mismatch('0.3.18')}\n"
    # imported in process, the module that uses the internals refuses too
    code = "import harness.node.raft"
    loaded = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert loaded.returncode == 1 and "PySyncObjMismatch: the embedded node is built" in (
        loaded.stderr
    )
