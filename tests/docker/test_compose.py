"""docker-compose.cluster.yml declares exactly the cluster the Docker backend builds."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.cluster.docker import specs as db

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.cluster.yml"
DEFAULT_PORTS = {"n1": 4001, "n2": 4011, "n3": 4021}
_VAR = re.compile(r"\$\{(\w+)(?::([-?])([^}]*))?\}")
#: the secret every stack needs: given in the tests that interpolate the whole file
SECRET = {"RQUEUE_CLUSTER_SECRET": "s3cret"}


class Required(AssertionError):
    """A ``${VAR:?message}`` with VAR unset: compose refuses with the message."""


def interpolate(value: object, env: dict[str, str]) -> object:
    """Compose's ``${VAR}`` / ``${VAR:-default}`` / ``${VAR:?message}`` substitution,
    applied recursively."""
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            if env.get(m.group(1)):
                return env[m.group(1)]
            if m.group(2) == "?":
                raise Required(f"{m.group(1)}: {m.group(3)}")
            if m.group(2) is None:
                raise AssertionError(f"${{{m.group(1)}}} has no default in the compose file")
            return m.group(3)

        return _VAR.sub(sub, value)
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    return value


def seconds(duration: str) -> int:
    m = re.fullmatch(r"(\d+)s", duration)
    assert m, f"durations are written in whole seconds, got {duration!r}"
    return int(m.group(1))


@pytest.fixture(scope="module")
def raw() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def compose(raw: dict) -> dict:
    return interpolate(raw, SECRET)


def test_three_rqlite_services_from_the_pinned_official_image(compose: dict) -> None:
    assert sorted(compose["services"]) == ["n1", "n2", "n3"]
    for svc in compose["services"].values():
        assert svc["image"] == db.rqlite_image(env={}) == db.DEFAULT_IMAGE
        assert "entrypoint" not in svc, "the image's own entrypoint must run the node"
        assert svc.get("restart", "no") == "no", "a killed node must stay down"


def test_image_is_overridable_as_for_the_backend(raw: dict) -> None:
    env = {"RQLITE_IMAGE": "rqueue/node:local", **SECRET}
    for svc in interpolate(raw, env)["services"].values():
        assert svc["image"] == db.rqlite_image(env=env) == "rqueue/node:local"


def test_the_cluster_secret_comes_from_the_environment(raw: dict) -> None:
    for svc in interpolate(raw, SECRET)["services"].values():
        assert svc["environment"] == {db.SECRET_ENV: "s3cret"}


def test_without_a_secret_compose_refuses_up_front(raw: dict) -> None:
    """Not `up -d` returning 0 while every node exits 2: the file requires the variable,
    with a message that names it and says where to read how to make one."""
    with pytest.raises(Required, match=r"RQUEUE_CLUSTER_SECRET must be set: .* header"):
        interpolate(raw, {})


@pytest.mark.skipif(
    subprocess.run(["sh", "-c", "command -v docker-compose"], capture_output=True).returncode,
    reason="docker-compose (Compose v1) is not installed",
)
def test_docker_compose_itself_refuses_without_the_secret(tmp_path: Path) -> None:
    """Compose's own reading of the file (`config` needs no engine)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)}
    argv = ["docker-compose", "-f", str(COMPOSE), "config", "-q"]
    refused = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True)
    assert refused.returncode != 0
    assert "RQUEUE_CLUSTER_SECRET must be set" in refused.stderr
    given = subprocess.run(argv, env={**env, **SECRET}, cwd=tmp_path, capture_output=True)
    assert given.returncode == 0, given.stderr


def test_flags_match_the_backend_and_cluster_the_nodes(compose: dict) -> None:
    ids = sorted(compose["services"])
    for nid, svc in compose["services"].items():
        cmd = svc["command"]
        assert cmd[0].startswith("-"), "flags first, so the entrypoint merges them"
        expected = db.rqlited_args(nid, ids, f"127.0.0.1:{DEFAULT_PORTS[nid]}")
        assert cmd == expected
        flags = dict(zip(cmd[::2], cmd[1::2], strict=True))
        assert flags["-node-id"] == nid
        assert flags["-bootstrap-expect"] == "3"
        assert flags["-join"].split(",") == [f"{i}:{db.RAFT_PORT}" for i in ids]
        # peers reach each other by service name on the compose network
        assert flags["-raft-adv-addr"] == f"{nid}:{db.RAFT_PORT}"
        assert svc["hostname"] == nid


def test_http_ports_published_on_loopback_and_advertised(raw: dict, compose: dict) -> None:
    for nid, svc in compose["services"].items():
        port = DEFAULT_PORTS[nid]
        assert svc["ports"] == [f"127.0.0.1:{port}:{db.HTTP_PORT}"]
        adv = svc["command"][svc["command"].index("-http-adv-addr") + 1]
        assert adv == f"127.0.0.1:{port}"
    env = {"RQLITE_N2_PORT": "5011", "RQLITE_BIND": "127.0.0.2", **SECRET}
    n2 = interpolate(raw, env)["services"]["n2"]
    assert n2["ports"] == [f"127.0.0.2:5011:{db.HTTP_PORT}"]
    assert n2["command"][n2["command"].index("-http-adv-addr") + 1] == "127.0.0.2:5011"


def test_health_check_on_readyz(compose: dict) -> None:
    expected = db.healthcheck()
    for svc in compose["services"].values():
        hc = svc["healthcheck"]
        assert hc["test"] == expected["test"]
        assert hc["test"][-1].endswith(f":{db.HTTP_PORT}/readyz")
        for key in ("interval", "timeout", "start_period"):
            assert seconds(hc[key]) == expected[key], key
        assert hc["retries"] == expected["retries"]


def test_network_and_volumes_belong_to_the_compose_project(compose: dict) -> None:
    assert list(compose["networks"]) == ["rqlite"]
    for nid, svc in compose["services"].items():
        assert svc["networks"] == ["rqlite"]
        assert svc["volumes"] == [f"{nid}-data:{db.DATA_MOUNT}"]
        assert "container_name" not in svc
    assert sorted(compose["volumes"]) == ["n1-data", "n2-data", "n3-data"]
    # no fixed global names: compose prefixes them with the project's name, so two
    # stacks (`-p NAME`) on one engine never share a network or a node's data
    for res in [*compose["networks"].values(), *compose["volumes"].values()]:
        assert "name" not in res


def test_everything_is_labelled_as_the_harness(compose: dict) -> None:
    for nid, svc in compose["services"].items():
        assert svc["labels"] == db.labels("compose", nid)
        assert svc["labels"][db.LABEL_HARNESS] == "true"
    for res in [*compose["networks"].values(), *compose["volumes"].values()]:
        assert res["labels"] == db.labels("compose")


def test_every_variable_but_the_secret_has_a_default(raw: dict) -> None:
    text = COMPOSE.read_text()
    names = {m.group(1) for m in _VAR.finditer(text)}
    assert names == {
        "RQLITE_IMAGE",
        "RQUEUE_CLUSTER_SECRET",
        "RQLITE_BIND",
        "RQLITE_N1_PORT",
        "RQLITE_N2_PORT",
        "RQLITE_N3_PORT",
    }
    interpolate(raw, SECRET)  # raises on a variable without a default


def test_the_docs_name_the_pinned_image() -> None:
    docs = (COMPOSE.parent / "docs" / "docker.md").read_text()
    assert f"`{db.DEFAULT_IMAGE}`" in docs
    assert f"`RQLITE_IMAGE` | `{db.DEFAULT_IMAGE}`" in docs
