"""The backend registry: every command reads it, so a new backend is its modules and one
entry (a stand-in backend here, registered for one test, needs nothing else)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from harness.cluster import backends
from harness.cluster.backend import OPTION_REFUSALS, Backend, ClusterOptions
from harness.cluster.backends import BACKENDS, DEFAULT, STARTABLE, backend_of, held_in
from harness.cluster.base import CAPABILITY_NAMES, KILL, Cluster, ClusterError
from harness.cluster.cli import main as cluster_main
from harness.cluster.factory import make_cluster
from harness.cluster.local.cluster import LocalCluster
from harness.matrix import Engine


def test_the_registry_names_every_backend_in_order() -> None:
    assert list(BACKENDS) == ["local", "docker", "external", "ssh"]
    assert STARTABLE == ("local", "docker", "ssh") and DEFAULT == "local"
    with pytest.raises(ClusterError, match="unknown backend 'external'; choose one of local"):
        backend_of("external")  # someone else's cluster: nothing starts one


def test_each_entry_declares_its_state_file_and_capabilities() -> None:
    files = [b.state_file for b in BACKENDS.values() if b.startable]
    assert None not in files and len(set(files)) == len(files)
    assert BACKENDS["local"].capabilities() == LocalCluster.CAPABILITIES
    for backend in BACKENDS.values():
        assert backend.capabilities() <= set(CAPABILITY_NAMES)
        assert set(backend.options) <= set(OPTION_REFUSALS)


def test_a_backend_that_cannot_purge_says_where_its_data_stays() -> None:
    kept = {name: b.data_kept for name, b in BACKENDS.items() if b.startable and not b.purgeable}
    assert set(kept) == {"local", "ssh"}
    assert "its directory" in kept["local"]
    assert "on its hosts" in kept["ssh"] and "directory" not in kept["ssh"]


@pytest.mark.parametrize(
    ("backend", "options", "refusal"),
    [
        ("local", {"image": "x/y:1"}, "--image names a Docker image: it needs --backend docker"),
        ("local", {"inventory": "h.toml"}, "--backend ssh and --inventory FILE go together"),
        ("docker", {"rqlited": "/bin/rqlited"}, "--rqlited names a binary for --backend local;"),
        ("docker", {"inventory": "h.toml"}, "--backend ssh and --inventory FILE go together"),
        ("ssh", {}, "--backend ssh and --inventory FILE go together"),
        ("ssh", {"inventory": "h.toml", "image": "x"}, "--rqlited and --image are not for"),
    ],
)
def test_a_backend_refuses_the_options_it_does_not_take(
    backend: str, options: dict, refusal: str
) -> None:
    with pytest.raises(ClusterError) as err:
        make_cluster(backend, nodes=1, **options)
    assert str(err.value).startswith(refusal)


def test_base_port_is_for_the_local_backend_alone() -> None:
    BACKENDS["local"].check(ClusterOptions(base_port=4001))
    with pytest.raises(ClusterError, match="--base-port is for --backend local"):
        BACKENDS["docker"].check(ClusterOptions(base_port=4001))


def test_matrix_engines_are_the_backends_forms(tmp_path: Path) -> None:
    assert backends.matrix_forms() == (
        "'embedded', 'rqlited:PATH', 'docker:IMAGE' or 'ssh:INVENTORY'"
    )
    assert Engine.parse("docker:rqueue/node:local").args[:2] == ("--backend", "docker")
    inventory = tmp_path / "hosts.toml"
    inventory.write_text("")
    assert Engine.parse(f"ssh:{inventory}").label == "ssh"
    with pytest.raises(ValueError, match="expected 'embedded'"):
        Engine.parse("podman:x")


class _Nowhere(Cluster):
    """A cluster that only lists its nodes (the stand-in backend's)."""

    CAPABILITIES = frozenset({KILL})

    def nodes(self) -> list:
        return []

    def _refuse(self, *_: object) -> None:
        raise ClusterError("a stand-in")

    kill = restart = pause = resume = stop = _refuse


class _StandIn(Backend):
    name = "stand-in"
    summary = "a backend registered for one test"
    title = "stand-in"
    state_file = "stand-in.json"
    options: ClassVar[frozenset[str]] = frozenset({"image"})
    matrix_forms = ("stand-in:WHERE",)
    started: ClassVar[list[ClusterOptions]] = []

    @classmethod
    def cluster_class(cls) -> type[Cluster]:
        return _Nowhere

    @classmethod
    def start(cls, options: ClusterOptions) -> Cluster:
        cls.started.append(options)
        return _Nowhere()

    @classmethod
    def urls(cls, directory: Path) -> list[str]:
        return ["http://127.0.0.1:1", "http://127.0.0.1:2"]

    @classmethod
    def matrix_engine(cls, spec: str) -> tuple[str, tuple[str, ...]] | None:
        where = spec.removeprefix("stand-in:")
        return None if where == spec else ("stand-in", ("--backend", "stand-in", "--image", where))


def test_a_new_backend_is_one_entry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(BACKENDS, _StandIn.name, _StandIn)
    assert isinstance(make_cluster("stand-in", image="here", directory=tmp_path), _Nowhere)
    assert _StandIn.started[-1].image == "here"
    with pytest.raises(ClusterError, match="--rqlited names a binary for --backend local"):
        make_cluster("stand-in", rqlited="/bin/rqlited")
    (tmp_path / "stand-in.json").write_text("{}")
    assert held_in(tmp_path) == (_StandIn, False)
    assert cluster_main(["urls", "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "http://127.0.0.1:1,http://127.0.0.1:2\n"
    assert backends.capabilities()["stand-in"] == {KILL}
    assert Engine.parse("stand-in:there").args == ("--backend", "stand-in", "--image", "there")
