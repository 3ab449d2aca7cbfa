"""The Docker backend publishes its nodes on ports drawn by harness.cluster.ports (its
start, harness.cluster.docker.lifecycle, draws them)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from harness.cluster import ports
from harness.cluster.base import ClusterError
from harness.cluster.docker import lifecycle as db


def test_docker_start_draws_its_host_ports_from_ports_py_on_its_bind_address(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    asked: list[tuple[int, str]] = []

    def drawn(count: int, host: str = "127.0.0.1") -> list[int]:
        asked.append((count, host))
        return ports.free_ports(count, host)

    published: list[list[int]] = []

    def create(client: object, cluster_id: str, specs: list[db.ContainerSpec]) -> None:
        published.append([int(s.url.rsplit(":", 1)[1]) for s in specs])
        raise ClusterError("no engine here")

    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(db, "free_ports", drawn)
    monkeypatch.setattr(db, "connect", lambda: object())
    monkeypatch.setattr(db, "_ensure_image", lambda client, image: None)
    monkeypatch.setattr(db, "_image_facts", lambda client, image: (None, "sha256:0"))
    monkeypatch.setattr(db, "_image_environment", lambda client, image: [])
    monkeypatch.setattr(db, "_create", create)
    monkeypatch.setattr(db, "_discard", lambda cluster, exc=None: None)
    with pytest.raises(ClusterError, match="no engine here"):
        db.start_docker_cluster(nodes=3, directory=tmp_path, bind_host="0.0.0.0")
    assert asked == [(3, "0.0.0.0")]
    low, _ = ports.ephemeral_port_range()
    assert len(set(published[0])) == 3
    assert all(ports.PORT_FLOOR <= p < low for p in published[0])


def test_free_ports_bind_on_any_address() -> None:
    for port in ports.free_ports(3, "0.0.0.0"):
        with socket.socket() as s:
            s.bind(("0.0.0.0", port))


def test_the_docker_backend_has_no_port_helper_of_its_own() -> None:
    assert db.free_ports is ports.free_ports
    assert not any("free_port" in name for name in vars(db) if name != "free_ports")
