"""The built wheel, installed into a fresh virtual environment, has the scenarios.

The wheel is built from a copy of the sources (so the checkout gets no build folders),
installed without dependencies into a new venv that sees this interpreter's installed
dependencies through a path file (not the checkout), and run from a folder outside
both: what a user who installed the wheel gets.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from harness.scenario import SCENARIO_DIR

REPO = Path(__file__).resolve().parents[2]


def _run(argv: list[str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv with the project's wheel installed."""
    try:
        import setuptools.command.bdist_wheel  # noqa: F401  (setuptools >= 70.1)
    except ImportError:
        pytest.fail("building the wheel needs setuptools >= 70.1: scripts/install test")
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for package in ("rqueue", "harness"):
        shutil.copytree(REPO / package, src / package, ignore=junk)
    dist = root / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = _run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), "."], src
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("rqueue-*.whl")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    add = [*pip, "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)]
    done = _run(add, root)
    assert done.returncode == 0, done.stdout + done.stderr
    # the dependencies installed here, without their .pth files (so no editable checkout)
    purelib = Path(_run([str(python), "-c", _PURELIB], root).stdout.strip())
    (purelib / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


_PURELIB = "import sysconfig; print(sysconfig.get_paths()['purelib'])"


def test_the_installed_wheel_lists_and_loads_its_scenarios(installed: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = _run([str(installed), "-c", "import harness; print(harness.__file__)"], elsewhere)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.parent.parent), where.stdout
    listed = _run([str(installed), "-m", "harness", "list"], elsewhere, 120)
    assert listed.returncode == 0, listed.stderr
    # a scenario's line: its name, then "N nodes" (a subject's description may say "nodes")
    names = {
        words[0]
        for words in map(str.split, listed.stdout.splitlines())
        if len(words) > 2 and words[1].isdigit() and words[2] == "nodes"
    }
    assert names == {p.stem for p in SCENARIO_DIR.glob("*.toml")}
    # a user's own scenario file still loads by its path, beside the shipped ones
    mine = elsewhere / "mine.toml"
    mine.write_text('description = "mine"\nduration = 5.0\n')
    load = "from harness.scenario import load_scenario as l; import sys; "
    load += "print(l(sys.argv[1]).description, l('steady').name)"
    loaded = _run([str(installed), "-c", load, str(mine)], elsewhere)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["mine", "steady"]


def test_the_installed_wheel_has_the_report_pages_assets(installed: Path, tmp_path: Path) -> None:
    code = (
        "from harness.html.page import asset; "
        "print(*(len(asset(n)) > 100 for n in ('report.css', 'report.js', 'index.js')))"
    )
    done = _run([str(installed), "-c", code], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "True"]
