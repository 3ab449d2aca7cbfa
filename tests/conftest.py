"""Fixtures shared by the whole suite: clusters to test against, and a safety net.

- ``cluster`` (session): a 3-node embedded :class:`LocalCluster` in a temporary directory,
  or the :class:`ExternalCluster` named by ``RQLITE_URLS=http://a:4001,http://b:4011``.
  Tests must leave it healthy (no kills, pauses or partitions: use ``make_cluster``).
- ``make_cluster`` (function): ``make_cluster(nodes=3, netns=False, engine=None,
  timeout=60.0)`` starts a fresh :class:`LocalCluster` the test may break; every cluster it
  made is stopped afterwards. Skips under ``RQLITE_URLS`` (an external cluster cannot be
  controlled).
- ``RQUEUE_TEST_ENGINE=rqlited`` (with ``RQUEUE_TEST_RQLITED=PATH`` or ``rqlited`` on PATH)
  runs both fixtures on real rqlite.
- Safety net: the session sets ``RQUEUE_REAP_TAG`` to a fresh value that every node it
  starts inherits (also through ``python -m harness ...`` subprocesses); at session end
  :func:`harness.cluster.local.reap` kills whatever still carries that tag and removes
  its network namespaces, and says so on the terminal.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from harness.cluster.base import Cluster
from harness.cluster.external import URLS_ENV, ExternalCluster
from harness.cluster.local import LocalCluster, reap
from harness.cluster.netns import REAP_TAG_ENV

ENGINE_ENV = "RQUEUE_TEST_ENGINE"
RQLITED_ENV = "RQUEUE_TEST_RQLITED"
_TAG_KEY = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    tag = f"pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    os.environ[REAP_TAG_ENV] = tag
    config.stash[_TAG_KEY] = tag


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    tag = session.config.stash.get(_TAG_KEY, None)
    if not tag:
        return
    left = reap(tag)
    if left["processes"] or left["networks"]:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        msg = (
            f"safety net reaped what tests left behind: processes {left['processes']}, "
            f"networks {left['networks']}"
        )
        if reporter is not None:
            reporter.write_line(msg, yellow=True)


def _engine() -> tuple[str, str | None]:
    return os.environ.get(ENGINE_ENV, "embedded"), os.environ.get(RQLITED_ENV)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A healthy shared cluster: external (``RQLITE_URLS``) or a local 3-node one."""
    if os.environ.get(URLS_ENV):
        external = ExternalCluster.from_env()
        external.wait_for_leader(30.0)
        yield external
        return
    engine, rqlited = _engine()
    local = LocalCluster.start(
        nodes=3,
        directory=tmp_path_factory.mktemp("cluster") / "c",
        engine=engine,
        rqlited=rqlited,
        timeout=60.0,
    )
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def make_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., LocalCluster]]:
    """A factory of fresh local clusters the test may break; all are stopped afterwards."""
    if os.environ.get(URLS_ENV):
        pytest.skip(f"needs a cluster the test controls; {URLS_ENV} names an external one")
    made: list[LocalCluster] = []

    def factory(
        nodes: int = 3, netns: bool = False, engine: str | None = None, timeout: float = 60.0
    ) -> LocalCluster:
        default_engine, rqlited = _engine()
        c = LocalCluster.start(
            nodes=nodes,
            directory=tmp_path_factory.mktemp("cluster") / "c",
            engine=engine or default_engine,
            rqlited=rqlited,
            netns=netns,
            timeout=timeout,
        )
        made.append(c)
        return c

    try:
        yield factory
    finally:
        for c in made:
            c.stop()
