"""rqueue's public names: where they say they live, and the package's version."""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
import typing
from importlib import metadata
from pathlib import Path

import rqueue

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_name_is_shown_as_rqueue_dot_name() -> None:
    for name in rqueue.__all__:
        obj = getattr(rqueue, name)
        assert f"{obj.__module__}.{obj.__qualname__}" == f"rqueue.{name}"
        if isinstance(obj, type) and not issubclass(obj, Exception):
            typing.get_type_hints(obj)  # annotations still resolve


def test_a_traceback_names_the_exception_as_users_import_it() -> None:
    try:
        raise rqueue.LeaseLost("ack: message 7 is no longer leased")
    except rqueue.LeaseLost as exc:
        shown = "".join(traceback.format_exception_only(exc))
    assert shown == "rqueue.LeaseLost: ack: message 7 is no longer leased\n"


def test_version_is_the_installed_distributions() -> None:
    assert rqueue.__version__ == metadata.version("rqueue")
    assert "__version__" in dir(rqueue)


def test_version_without_metadata_falls_back_to_the_source_tree(monkeypatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    expected = next(
        line.split('"')[1]
        for line in (ROOT / "pyproject.toml").read_text().splitlines()
        if line.startswith("version = ")
    )
    assert rqueue._package_version() == expected
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: "not toml [")
    assert rqueue._package_version() == "0+unknown"


def test_importing_rqueue_reads_no_package_metadata() -> None:
    """The CLI's start-up time: the version is read on first use only."""
    code = "import sys, rqueue; print('importlib.metadata' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
