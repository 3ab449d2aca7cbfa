"""``run --image``: the image travels as a parameter, run options -> runner -> make_cluster."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.cluster import factory
from harness.cluster.base import ClusterError
from harness.errors import EXIT_HARNESS
from harness.runner import RunOptions, run


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What make_cluster was asked for; it refuses, so nothing starts."""
    calls: list[dict[str, Any]] = []

    def make_cluster(backend: str = "local", **kwargs: Any) -> None:
        calls.append({"backend": backend, **kwargs})
        raise ClusterError("no cluster in this test")

    monkeypatch.setattr(factory, "make_cluster", make_cluster)
    monkeypatch.delenv("RQLITE_IMAGE", raising=False)
    return calls


def test_run_options_carry_the_image_to_make_cluster(started, tmp_path: Path) -> None:
    opts = RunOptions(
        "steady", backend="docker", image="example/node:1", out=tmp_path / "r", progress=False
    )
    result = run(opts)
    assert result.exit_code == EXIT_HARNESS and "no cluster in this test" in str(result.reason)
    assert [(c["backend"], c["image"]) for c in started] == [("docker", "example/node:1")]


def test_cli_passes_image_without_touching_the_environment(started, tmp_path: Path) -> None:
    argv = ["run", "steady", "--backend", "docker", "--image", "example/node:2"]
    code = main([*argv, "--out", str(tmp_path / "r"), "--no-progress", "--no-plots"])
    assert code == EXIT_HARNESS
    assert [c["image"] for c in started] == ["example/node:2"]
    assert "RQLITE_IMAGE" not in os.environ


def test_without_image_the_runner_passes_none(started, tmp_path: Path) -> None:
    main(["run", "steady", "--out", str(tmp_path / "r"), "--no-progress", "--no-plots"])
    assert [(c["backend"], c["image"]) for c in started] == [("local", None)]


def test_image_without_docker_is_refused_before_anything_starts(started, capsys) -> None:
    assert main(["run", "steady", "--image", "example/node:3"]) == EXIT_HARNESS
    err = capsys.readouterr().err
    assert err == "harness: error: --image names a Docker image: it needs --backend docker\n"
    assert started == []
