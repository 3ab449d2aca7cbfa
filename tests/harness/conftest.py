"""Fixtures for the harness's run and subject tests.

- ``own_cluster`` (module): a private 3-node local cluster, so that subjects with
  different schemas (rqueue, seed-reference, mutants) never share tables with the rest of
  the suite. Skips under ``RQLITE_URLS``.
- ``empty_db``: ``own_cluster`` with every table dropped first.
- ``run_scenario``: runs ``harness.runner.run`` (a scenario name or a file) into a fresh
  folder and returns the result.
- ``squeezed``: writes a scenario with its whole schedule, fault lengths included, scaled
  to a few seconds (``--time`` keeps each fault's length and would drop every window of a
  6 s run); returns the file's path, named after the scenario.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from harness.cluster.external.cluster import URLS_ENV
from harness.cluster.local.cluster import LocalCluster
from harness.runner import RunOptions, RunResult, run
from harness.scenario import load_scenario
from harness.shrink.steps import to_toml

ENGINE = os.environ.get("RQUEUE_TEST_ENGINE", "embedded")
RQLITED = os.environ.get("RQUEUE_TEST_RQLITED")


def _needs_local() -> None:
    if os.environ.get(URLS_ENV):
        pytest.skip(f"harness runs start their own clusters; {URLS_ENV} names an external one")


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    _needs_local()
    c = LocalCluster.start(
        nodes=3,
        directory=tmp_path_factory.mktemp("harness-cluster") / "c",
        engine=ENGINE,
        rqlited=RQLITED,
        timeout=60.0,
    )
    try:
        yield c
    finally:
        c.stop()


def drop_all_tables(urls: list[str]) -> None:
    """Drop every table, so the next subject creates its own schema."""
    base = urls[0].rstrip("/")
    r = requests.post(
        f"{base}/db/query?level=strong",
        json=[["SELECT name FROM sqlite_master WHERE type = 'table'"]],
        timeout=10,
    )
    r.raise_for_status()
    names = [row[0] for row in r.json()["results"][0].get("values", [])]
    names = [n for n in names if not n.startswith("sqlite_")]
    if names:
        stmts = [f'DROP TABLE IF EXISTS "{n}"' for n in names]
        r = requests.post(f"{base}/db/execute", json=stmts, timeout=10)
        r.raise_for_status()
        assert all("error" not in x for x in r.json()["results"]), r.text


@pytest.fixture
def empty_db(own_cluster: LocalCluster) -> list[str]:
    urls = list(own_cluster.urls)
    drop_all_tables(urls)
    return urls


@pytest.fixture
def run_scenario(tmp_path: Path) -> Callable[..., RunResult]:
    _needs_local()

    def go(scenario: str, **options) -> RunResult:
        out = tmp_path / f"{Path(scenario).stem}-{options.get('subject', 'rqueue')}"
        opts = RunOptions(
            scenario=scenario,
            out=out,
            progress=False,
            engine=ENGINE,
            rqlited=RQLITED,
            seed=options.pop("seed", 7),
            **options,
        )
        return run(opts)

    return go


@pytest.fixture
def squeezed(tmp_path: Path) -> Callable[..., str]:
    def write(name: str, seconds: float, **workload: Any) -> str:
        """The scenario ``name`` squeezed into ``seconds``, ``workload`` keys replaced."""
        s = load_scenario(name)
        k = seconds / s.duration
        faults = [
            dataclasses.replace(
                f, start=f.start * k, duration=f.duration * k, every=f.every and f.every * k
            )
            for f in s.faults
        ]
        path = tmp_path / "squeezed" / f"{name}.toml"
        path.parent.mkdir(exist_ok=True)
        spec = dataclasses.replace(s.workload, **workload)
        data = dataclasses.replace(
            s, duration=seconds, faults=tuple(faults), workload=spec
        ).to_json()
        path.write_text(to_toml(data, f"{name}, squeezed into {seconds:g} s"))
        return str(path)

    return write
