"""The project stays ruff-clean: lint rules and formatting, as configured in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "args", [["check", "."], ["format", "--check", "."]], ids=["lint", "format"]
)
def test_ruff(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_blocking_twin_is_generated_from_the_async_one() -> None:
    """rqueue/_sync.py is what scripts/unasync.py writes from rqueue/_async.py: edit the
    source, then run the script."""
    done = subprocess.run(
        [sys.executable, "scripts/unasync.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
