"""Embedded clusters that follow a given rqlite version (``--rqlite-version``), for the tests
of behaviour that differs between versions (the ``follow`` fixture in ``conftest.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import harness
from harness.cluster.local.processes import MARKER_ENV
from harness.cluster.ports import free_ports
from tests.cluster.helpers import wait_until

from ._http import call

#: the versions the embedded node follows, oldest first
VERSIONS = ("8.36.18", "9.4.5", "10.2.7")


class VersionedCluster:
    """``nodes`` embedded nodes following ``version``, started by :meth:`start` (which waits
    for one leader every node names and every node ready) and stopped by :meth:`stop`."""

    def __init__(self, version: str, directory: Path, nodes: int = 3) -> None:
        self.version = version
        self.directory = directory
        self.count = nodes
        self.procs: list[subprocess.Popen] = []
        self.logs: list = []

    def start(self, timeout: float = 60.0) -> dict[str, object]:
        """Start the nodes; ``{"leader": url, "followers": [...], "all": [...]}``."""
        ports = free_ports(2 * self.count)
        members = [
            (f"n{i + 1}", f"127.0.0.1:{ports[2 * i]}", f"127.0.0.1:{ports[2 * i + 1]}")
            for i in range(self.count)
        ]
        root = str(Path(harness.__file__).resolve().parent.parent)
        for node_id, http, raft in members:
            home = self.directory / node_id
            home.mkdir(parents=True, exist_ok=True)
            argv = [sys.executable, "-m", "harness.node", "--node-id", node_id]
            argv += ["--http-addr", http, "--raft-addr", raft, "--data-dir", str(home / "data")]
            argv += ["--rqlite-version", self.version]
            for other, other_http, other_raft in members:
                if other != node_id:
                    argv += ["--peer", f"{other},{other_raft},{self.peer_http(other_http)}"]
            env = dict(os.environ, PYTHONPATH=root, **{MARKER_ENV: str(home)})
            log = open(home / "node.log", "ab")  # noqa: SIM115 (closed in stop())
            self.logs.append(log)
            self.procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=log))
        urls = [f"http://{http}" for _, http, _ in members]
        try:
            leader = wait_until(
                lambda: self._agreed_leader(urls), timeout, f"a v{self.version} cluster's leader"
            )
        except BaseException:
            self.stop()
            raise
        return {"leader": leader, "followers": [u for u in urls if u != leader], "all": urls}

    def peer_http(self, http: str) -> str:
        """Where the other nodes reach the HTTP API at ``http`` (a subclass may put
        something in between)."""
        return http

    def _agreed_leader(self, urls: list[str]) -> str | None:
        """The leader's URL once every node is ready and names the same leader."""
        for proc in self.procs:
            assert proc.poll() is None, f"a v{self.version} node exited; see {self.directory}"
        named = set()
        for url in urls:
            if call("GET", url, "/readyz", timeout=2.0).status != 200:
                return None
            named.add(call("GET", url, "/status", timeout=2.0).json["store"]["leader"]["addr"])
        if len(named) != 1:
            return None
        (raft,) = named
        for url in urls:
            if call("GET", url, "/status", timeout=2.0).json["store"]["addr"] == raft:
                return url
        return None

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10.0)
        for log in self.logs:
            log.close()
