"""No engine: every entry point fails with the one-line DockerUnreachable message."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cluster.base import ClusterError
from harness.cluster.docker import cluster as db
from harness.cluster.docker import lifecycle as lc
from harness.cluster.docker.specs import DockerUnreachable

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def closed_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """DOCKER_HOST pointing at a unix socket that exists but nobody listens on."""
    path = tmp_path / "docker.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()  # bound, never listening: connect() is refused
    address = f"unix://{path}"
    monkeypatch.setenv("DOCKER_HOST", address)
    return address


def assert_one_line(msg: str, address: str) -> None:
    assert "\n" not in msg
    assert f"Docker is not reachable at {address} (from DOCKER_HOST" in msg
    assert "--backend local runs the embedded cluster" in msg


def test_connect(closed_socket: str) -> None:
    with pytest.raises(DockerUnreachable) as err:
        lc.connect()
    assert isinstance(err.value, ClusterError)
    assert_one_line(str(err.value), closed_socket)
    assert "refused" in str(err.value).lower()


def test_missing_socket_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    address = f"unix://{tmp_path}/nothing-here.sock"
    monkeypatch.setenv("DOCKER_HOST", address)
    with pytest.raises(DockerUnreachable, match="No such file") as err:
        lc.connect()
    assert_one_line(str(err.value), address)


def test_start_and_reap(closed_socket: str, tmp_path: Path) -> None:
    with pytest.raises(DockerUnreachable) as err:
        lc.start_docker_cluster(nodes=3, directory=tmp_path / "c", timeout=5)
    assert_one_line(str(err.value), closed_socket)
    assert not (tmp_path / "c").exists(), "nothing is written when no cluster was made"
    with pytest.raises(DockerUnreachable):
        db.reap_docker()


def test_attach_needs_a_state_file(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="no docker cluster in"):
        lc.attach_docker_cluster(tmp_path)
    (tmp_path / db.STATE_FILE).write_text("{not json")
    with pytest.raises(ClusterError, match="is not a docker cluster state file"):
        lc.attach_docker_cluster(tmp_path)


def _cli(args: list[str], address: str) -> subprocess.CompletedProcess[str]:
    if not (ROOT / "harness" / "__main__.py").exists():
        pytest.skip("the harness CLI (harness/__main__.py) is not there yet")
    env = {**os.environ, "DOCKER_HOST": address}
    return subprocess.run(
        [sys.executable, "-m", "harness", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["run", "leader-failover", "--backend", "docker", "--time", "20"],
        ["cluster", "up", "--backend", "docker", "--dir"],
        ["cluster", "down", "--all", "--backend", "docker"],
    ],
    ids=["run", "cluster-up", "cluster-down"],
)
def test_cli_exits_2_with_the_line(closed_socket: str, args: list[str], tmp_path: Path) -> None:
    if args[0] == "run":
        args = [*args, "--out", str(tmp_path / "out")]
    elif args[-1] == "--dir":
        args = [*args, str(tmp_path / "c")]
    res = _cli(args, closed_socket)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if "Docker is not reachable" in ln]
    assert len(lines) == 1, res.stderr
    assert closed_socket in lines[0] and "--backend local" in lines[0]
