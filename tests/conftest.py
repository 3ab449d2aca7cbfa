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
- ``@pytest.mark.needs_rqlite((8, 23, 0), "what")``: the test skips, saying so, when the
  engine under test (embedded: the rqlite version it is compatible with; rqlited: its
  ``-version``; ``RQLITE_URLS``: the first node's ``/status``) is older. The
  ``server_version`` fixture gives that version, ``None`` when it cannot be read.
- Parallel: ``addopts`` runs the suite in pytest-xdist workers (``-n auto``), three per
  core (at most 8; three ran the suite on two cores in 3:53-4:01 where two took
  4:39-4:54): most of its time is runs of a fixed length and waits for elections,
  so workers overlap them. Each worker has its own ``cluster``; every cluster takes free
  ports and network namespaces of its own. One process only (``-n 0``) under
  ``RQLITE_URLS`` (the workers would share one cluster's tables) and when chaos tests are
  selected (full-length runs and the Docker engine's containers); three per two cores
  when the ``slow`` tests are selected (whole scenarios, several processes each).
  ``PYTEST_XDIST_AUTO_NUM_WORKERS=N`` or ``-n N`` sets the number. A test marked
  ``root`` (network namespaces) holds a shared lock on :data:`NETNS_LOCK` (one file for
  every worker and every session on the machine); one marked ``netns_alone`` too (the
  whole ``FORWARD`` chain compared, a reaper that removes every network of the project)
  holds it alone: no other network-namespace test runs meanwhile.
- Safety net: the session sets ``RQUEUE_REAP_TAG`` to a fresh value that every node it
  starts inherits (also through ``python -m harness ...`` subprocesses); at session end
  :func:`harness.cluster.local.processes.reap` kills whatever still carries that tag and removes
  its network namespaces, and says so on the terminal.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import tempfile
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.cluster.base import Cluster, ClusterError
from harness.cluster.engines import resolve_rqlited, rqlited_version
from harness.cluster.external.cluster import URLS_ENV, ExternalCluster
from harness.cluster.local.cluster import LocalCluster
from harness.cluster.local.processes import reap
from harness.cluster.owners import REAP_TAG_ENV
from harness.node import VERSION as EMBEDDED_VERSION
from rqueue._version import parse_version, version_from_status
from tests.locks import held

ENGINE_ENV = "RQUEUE_TEST_ENGINE"
RQLITED_ENV = "RQUEUE_TEST_RQLITED"
_TAG_KEY = pytest.StashKey[str]()


#: the mark expression of ``addopts``; another one that can select chaos tests runs serially
DEFAULT_MARKS = "not chaos and not slow"
#: most workers ``-n auto`` starts
MAX_WORKERS = 8


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto`` (see the module docstring); 0 runs in this process."""
    if os.environ.get(URLS_ENV):
        return 0
    marks = (config.getoption("markexpr", "") or "").strip()
    if "chaos" in marks and marks != DEFAULT_MARKS:
        return 0
    wanted = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if wanted:
        return int(wanted)
    cores = len(os.sched_getaffinity(0))
    if "slow" in marks and marks != DEFAULT_MARKS:
        # whole scenarios and clusters, each several processes busy for seconds: three
        # per core starve one another into timeouts (fault windows that start late)
        return max(1, min(MAX_WORKERS, (3 * cores) // 2))
    return min(MAX_WORKERS, 3 * cores)


#: held by each test marked ``root`` while it runs (see the module docstring)
NETNS_LOCK = Path(tempfile.gettempdir()) / "rqueue-tests-netns.lock"
#: how long a ``root`` test waits for the others (below the suite's 300 s timeout)
NETNS_WAIT = 240.0


@pytest.fixture(autouse=True)
def _root_tests_one_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked ``root`` holds :data:`NETNS_LOCK` from before its fixtures build
    network namespaces until they are gone (autouse fixtures are set up first): shared,
    or alone when also marked ``netns_alone``."""
    if request.node.get_closest_marker("root") is None:
        yield
        return
    alone = request.node.get_closest_marker("netns_alone") is not None
    what = "the other tests that use network namespaces"
    with held(NETNS_LOCK, what, NETNS_WAIT, shared=not alone):
        yield


def pytest_configure(config: pytest.Config) -> None:
    tag = f"pytest-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    os.environ[REAP_TAG_ENV] = tag
    config.stash[_TAG_KEY] = tag
    # a shell without job control starts a background job with SIGINT ignored, and every
    # process it starts inherits that: the tests that interrupt a run with SIGINT need the
    # default disposition in their subprocesses
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line(
        "markers",
        "needs_rqlite(version, what): skip when the engine under test is older than version",
    )
    config.addinivalue_line(
        "markers",
        "netns_alone: (with root) no other network-namespace test runs at the same time",
    )


@functools.cache
def engine_under_test() -> tuple[str, tuple[int, int, int] | None]:
    """What the suite runs against, for messages, and its rqlite version (None: unknown)."""
    urls = os.environ.get(URLS_ENV)
    if urls:
        first = urls.split(",")[0].strip().rstrip("/")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"{first}/status", timeout=10) as resp:
                text = version_from_status(resp.headers, json.loads(resp.read()))
        except (OSError, ValueError):
            return f"the cluster at {first} (version unreadable)", None
        return f"the cluster at {first} ({text})", parse_version(text)
    engine, rqlited = _engine()
    if engine == "rqlited":
        try:
            version = rqlited_version(resolve_rqlited(rqlited))
        except ClusterError:
            return "rqlited (version unreadable)", None
        return f"rqlited v{'.'.join(map(str, version))}", version
    return f"the embedded node ({EMBEDDED_VERSION})", parse_version(EMBEDDED_VERSION)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs_rqlite"):
        wanted, what = mark.args
        label, version = engine_under_test()
        if version is not None and version < tuple(wanted):
            need = ".".join(map(str, wanted))
            pytest.skip(f"{what} needs rqlite >= {need}; the engine under test is {label}")


@pytest.fixture(scope="session")
def server_version() -> tuple[int, int, int] | None:
    """The rqlite version of the engine under test (see the module docstring)."""
    return engine_under_test()[1]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    tag = session.config.stash.get(_TAG_KEY, None)
    if not tag:
        return
    left = reap(tag, live_too=True)  # this session's tag: clusters `cluster up` made too
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
