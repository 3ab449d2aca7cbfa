"""docker-compose.cluster.yml on a real engine with the project's node image: it comes up
healthy, the conformance suite passes against it, and ``down -v`` leaves nothing.

Compose v2 (``docker compose``) waits with ``up -d --wait``; Compose v1
(``docker-compose``, Debian's) has no ``--wait``, so the test waits for the health checks.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.cluster.docker import specs as db

from .conftest import NOTHING, leftovers

pytestmark = pytest.mark.chaos
ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.cluster.yml"


def compose_command() -> tuple[list[str], bool] | None:
    """The compose program and whether it has ``--wait`` (v2), or None."""
    v2 = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
    if v2.returncode == 0:
        return ["docker", "compose"], True
    if shutil.which("docker-compose"):
        return ["docker-compose"], False
    return None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _wait_healthy(engine: Any, deadline: float) -> None:
    flt = {"label": [f"{db.LABEL_CLUSTER}=compose"]}
    while True:
        states = []
        for c in engine.containers.list(all=True, filters=flt):
            c.reload()
            states.append((c.name, c.attrs["State"].get("Health", {}).get("Status")))
        if len(states) == 3 and all(s == "healthy" for _, s in states):
            return
        assert time.monotonic() < deadline, f"not healthy within the deadline: {states}"
        time.sleep(1)


def test_compose_up_healthy_conformance_and_down_leaves_nothing(
    clean_engine: Any, node_image: str, tmp_path: Path
) -> None:
    found = compose_command()
    if found is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    compose, has_wait = found
    ports = _free_ports(3)
    env = dict(
        os.environ,
        RQLITE_IMAGE=node_image,
        RQUEUE_CLUSTER_SECRET=secrets.token_hex(24),
        **{f"RQLITE_N{i + 1}_PORT": str(p) for i, p in enumerate(ports)},
    )
    base = [*compose, "-f", str(COMPOSE_FILE)]
    try:
        up = [*base, "up", "-d", *(["--wait"] if has_wait else [])]
        res = subprocess.run(up, env=env, capture_output=True, text=True, timeout=180)
        assert res.returncode == 0, res.stderr
        _wait_healthy(clean_engine, time.monotonic() + 120)
        urls = ",".join(f"http://127.0.0.1:{p}" for p in ports)
        suite = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/conformance"],
            env=dict(env, RQLITE_URLS=urls, PYTHONPATH=str(ROOT)),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert suite.returncode == 0, suite.stdout[-3000:]
        assert " passed" in suite.stdout.strip().splitlines()[-1]
    finally:
        down = subprocess.run(
            [*base, "down", "-v"], env=env, capture_output=True, text=True, timeout=180
        )
    assert down.returncode == 0, down.stderr
    assert leftovers(clean_engine) == NOTHING
