"""DockerCluster's fault bookkeeping against a stand-in engine (the engine is not here).

The stand-in records what the backend asks of containers and which nsenter commands it
runs; the rules themselves come from harness.cluster.partition, tested there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import docker
import pytest

from harness.cluster import base, partition
from harness.cluster.base import ClusterError
from harness.cluster.docker import cluster as db
from harness.cluster.docker import lifecycle as lc
from harness.cluster.docker.engine import docker_clusters
from harness.cluster.docker.specs import NODE_IMAGE
from harness.cluster.owners import identity


class FakeContainer:
    def __init__(self, spec: db.ContainerSpec, index: int, client: FakeClient) -> None:
        self.spec = spec
        self.client = client
        self.id = f"{index:x}" * 64
        self.status = "running"
        self.pid = 1000 + index
        self.ip = f"172.30.0.{10 + index}"
        self.calls: list[str] = []
        self.refuse_paused = False  # older engines refuse to kill a paused container
        self.freeze_failures = 0  # pauses the freezer fails ("unable to freeze") first
        self.port_taken = False  # its host port was taken by someone else meanwhile

    @property
    def attrs(self) -> dict[str, Any]:
        running = self.status in ("running", "paused")
        return {
            "State": {"Pid": self.pid if running else 0},
            "NetworkSettings": {
                "Networks": {self.spec.network: {"IPAddress": self.ip if running else ""}}
            },
        }

    def reload(self) -> None:
        pass

    def kill(self, signal: str) -> None:
        self.calls.append(f"kill {signal}")
        if self.status == "paused" and self.refuse_paused:
            raise docker.errors.APIError("Container is paused, unpause the container first")
        self.status = "exited"

    def start(self) -> None:
        self.calls.append("start")
        if self.port_taken:
            raise docker.errors.APIError("Bind for 127.0.0.1:5001: port is already allocated")
        self.status = "running"
        self.pid += 100  # a new process, so a new network namespace

    def stop(self, timeout: int) -> None:
        assert self.status == "running", "a paused container is thawed before its SIGTERM"
        self.calls.append("stop")
        self.status = "exited"

    def pause(self) -> None:
        self.calls.append("pause")
        if self.freeze_failures:
            self.freeze_failures -= 1
            raise docker.errors.APIError(
                "Cannot pause container: OCI runtime pause failed: unable to freeze: unknown"
            )
        self.status = "paused"

    def unpause(self) -> None:
        self.calls.append("unpause")
        self.status = "running"

    def exec_run(self, argv: list[str]) -> tuple[int, bytes]:
        assert self.status == "running", "exec needs a running container"
        self.calls.append(f"clock {argv[-1]}")
        return 0, b""

    def remove(self, force: bool, v: bool) -> None:
        assert force and v, "remove running containers and their anonymous volumes"
        self.client.remove_container(self)

    def logs(self, tail: int) -> bytes:
        return f"log of {self.spec.node_id}, last {tail} lines\n".encode()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def labels(self) -> dict[str, str]:
        return self.spec.labels


class FakeClient:
    """Containers only (networks and volumes are listed empty); label filters as the engine."""

    def __init__(self, specs: Sequence[db.ContainerSpec]) -> None:
        self.by_name = {s.name: FakeContainer(s, i, self) for i, s in enumerate(specs)}
        self.containers = self
        self.removed: list[str] = []
        self.networks = self.volumes = EmptyList()

    def get(self, name: str) -> FakeContainer:
        if name not in self.by_name:
            raise docker.errors.NotFound(f"No such container: {name}")
        return self.by_name[name]

    def list(self, all: bool, filters: dict) -> list[FakeContainer]:
        assert all, "stopped containers must be found too"
        wanted = [f.split("=", 1) for f in filters["label"]]
        return [c for c in self.by_name.values() if all_labels(c.labels, wanted)]

    def remove_container(self, c: FakeContainer) -> None:
        self.removed.append(c.name)
        del self.by_name[c.name]


class EmptyList:
    def list(self, filters: dict) -> list:
        return []


def all_labels(labels: dict[str, str], wanted: list[list[str]]) -> bool:
    return all(labels.get(k) == v for k, v in wanted)


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> tuple[db.DockerCluster, FakeClient, list]:
    specs = lc.container_specs("t1", lc.node_ids(3), [5001, 5002, 5003], "rqlite/rqlite:x")
    client = FakeClient(specs)
    cluster = db.DockerCluster(client, "t1", specs)
    ran: list[list[str]] = []

    def fake_run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        ran.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(db.subprocess, "run", fake_run)

    def verify(pid: int, cid: str) -> None:  # the namespace entered is that container's
        assert any(c.pid == pid and c.id == cid for c in client.by_name.values())

    monkeypatch.setattr(db, "verify_container_pid", verify)
    monkeypatch.setattr(db.DockerCluster, "_partition_blockers", lambda self: [])
    return cluster, client, ran


def by_pid(ran: list[list[str]]) -> dict[int, list[list[str]]]:
    out: dict[int, list[list[str]]] = {}
    for cmd in ran:
        assert cmd[:2] == ["nsenter", "-t"] and cmd[3:5] == ["-n", "--"]
        out.setdefault(int(cmd[2]), []).append(cmd[5:])
    return out


def test_kill_restart_pause_resume(setup: tuple) -> None:
    cluster, client, _ = setup
    n1 = client.get("rqueue-t1-n1")
    cluster.kill("n1")
    assert n1.calls == ["kill SIGKILL"]
    assert [s.node_id for s in cluster._live()] == ["n2", "n3"]
    cluster.restart("n1")
    assert n1.calls[-1] == "start" and len(cluster._live()) == 3
    cluster.pause("n2")
    assert [s.node_id for s in cluster._live()] == ["n1", "n3"]
    cluster.resume("n2")
    assert client.get("rqueue-t1-n2").calls == ["pause", "unpause"]
    with pytest.raises(ClusterError, match="no node 'n7'"):
        cluster.kill("n7")


def test_partition_runs_the_rules_in_each_namespace_and_heal_removes_them(setup: tuple) -> None:
    cluster, client, ran = setup
    cluster.partition([["n1"], ["n2", "n3"]])
    ips = {c.spec.node_id: c.ip for c in client.by_name.values()}
    expected = partition.apply_rules([["n1"], ["n2", "n3"]], ips)
    got = by_pid(ran)
    assert got == {client.get(f"rqueue-t1-{n}").pid: argvs for n, argvs in expected.items()}
    ran.clear()
    cluster.heal()
    heal = partition.heal_rules(expected)
    assert by_pid(ran) == {client.get(f"rqueue-t1-{n}").pid: a for n, a in heal.items()}
    ran.clear()
    cluster.heal()  # nothing left to remove
    assert ran == []


def test_restart_during_a_partition_reapplies_it(setup: tuple) -> None:
    cluster, client, ran = setup
    cluster.partition([["n1"], ["n2", "n3"]])
    cluster.kill("n1")  # its namespace (and rules) die with it
    ran.clear()
    cluster.restart("n1")
    n1_pid = client.get("rqueue-t1-n1").pid
    got = by_pid(ran)
    # the survivors' rules are removed and applied again, n1's new namespace gets its own
    assert any("-N" in argv for argv in got[n1_pid])
    for n in ("n2", "n3"):
        argvs = got[client.get(f"rqueue-t1-{n}").pid]
        assert argvs[0][3:] == ["-D", "INPUT", "-j", partition.CHAIN]
        assert any("-N" in argv for argv in argvs)
    ran.clear()
    cluster.kill("n2")
    cluster.heal()  # the dead node is skipped: its namespace is gone
    assert set(by_pid(ran)) == {n1_pid, client.get("rqueue-t1-n3").pid}


def test_bad_partitions_and_missing_privileges(
    setup: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, _, ran = setup
    with pytest.raises(ClusterError, match="bad partition: unknown node 'n9'"):
        cluster.partition([["n9"], ["n1", "n2", "n3"]])
    monkeypatch.setattr(
        db.DockerCluster, "_partition_blockers", lambda self: ["the harness is not running as root"]
    )
    assert "partitions" not in cluster.capabilities
    with pytest.raises(ClusterError, match="cannot partition: the harness is not running as root"):
        cluster.partition([["n1"], ["n2", "n3"]])
    assert ran == []


def test_clock_skew_is_refused(setup: tuple) -> None:
    cluster, _, _ = setup
    with pytest.raises(ClusterError, match=r"cannot skew a node.s clock.*--backend local"):
        cluster.set_clock_offset("n1", 5.0)


def fake_proc(tmp_path: Path, pid: int, cgroup: str, same_netns: bool = False) -> Path:
    proc = tmp_path / "proc"
    (proc / str(pid) / "ns").mkdir(parents=True)
    (proc / "self" / "ns").mkdir(parents=True)
    (proc / str(pid) / "cgroup").write_text(cgroup)
    (proc / str(pid) / "ns" / "net").write_text("")
    if same_netns:
        os.link(proc / str(pid) / "ns" / "net", proc / "self" / "ns" / "net")
    else:
        (proc / "self" / "ns" / "net").write_text("")
    return proc


def test_verify_container_pid(tmp_path: Path) -> None:
    cid = "ab" * 32
    ok = fake_proc(tmp_path / "ok", 77, f"0::/system.slice/docker-{cid}.scope\n")
    db.verify_container_pid(77, cid, ok)
    with pytest.raises(ClusterError, match="PID 78 is not visible on this machine"):
        db.verify_container_pid(78, cid, ok)
    other = fake_proc(tmp_path / "vm", 77, "0::/user.slice/session-1.scope\n")
    with pytest.raises(ClusterError, match="not that container's process"):
        db.verify_container_pid(77, cid, other)
    host = fake_proc(tmp_path / "host", 77, f"0::/docker/{cid}\n", same_netns=True)
    with pytest.raises(ClusterError, match="shares this machine's network namespace"):
        db.verify_container_pid(77, cid, host)


def test_kill_a_paused_node(setup: tuple) -> None:
    cluster, client, _ = setup
    n2 = client.get("rqueue-t1-n2")
    cluster.pause("n2")
    cluster.kill("n2")
    assert n2.calls == ["pause", "kill SIGKILL"]
    assert n2.status == "exited"
    assert "n2" not in cluster._paused and [s.node_id for s in cluster._live()] == ["n1", "n3"]
    cluster.restart("n2")
    assert n2.status == "running"


def test_a_pause_the_freezer_could_not_make_is_tried_again_within_a_bound(setup: tuple) -> None:
    cluster, client, _ = setup
    n1 = client.get("rqueue-t1-n1")
    n1.freeze_failures = db.FREEZE_ATTEMPTS - 1
    cluster.pause("n1")
    assert n1.status == "paused" and n1.calls == ["pause"] * db.FREEZE_ATTEMPTS
    cluster.resume("n1")
    n1.calls.clear()
    n1.freeze_failures = db.FREEZE_ATTEMPTS  # never freezes: the last refusal is raised
    with pytest.raises(docker.errors.APIError, match="unable to freeze"):
        cluster.pause("n1")
    assert n1.status == "running" and n1.calls == ["pause"] * db.FREEZE_ATTEMPTS
    assert "n1" in [s.node_id for s in cluster._live()]


def test_kill_a_paused_node_where_the_engine_refuses(setup: tuple) -> None:
    cluster, client, _ = setup
    n3 = client.get("rqueue-t1-n3")
    n3.refuse_paused = True
    cluster.pause("n3")
    cluster.kill("n3")
    assert n3.calls == ["pause", "kill SIGKILL", "unpause", "kill SIGKILL"]
    assert n3.status == "exited"


def _dead_owner() -> str:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        return identity(child.pid)
    finally:
        child.kill()
        child.wait()


def test_stop_keeps_logs_and_removes_only_this_cluster(setup: tuple, tmp_path: Path) -> None:
    cluster, client, _ = setup
    ports = [6001, 6002, 6003]
    other = lc.container_specs("zz", lc.node_ids(3), ports, "rqlite/rqlite:x", owner="h:b:1:1")
    client.by_name.update({s.name: FakeContainer(s, 9, client) for s in other})
    cluster._directory = tmp_path
    cluster.save()
    assert (tmp_path / db.STATE_FILE).exists()
    cluster.stop()
    assert sorted(client.removed) == ["rqueue-t1-n1", "rqueue-t1-n2", "rqueue-t1-n3"]
    assert (tmp_path / "n2.log").read_text() == f"log of n2, last {db.LOG_LINES} lines\n"
    assert not (tmp_path / db.STATE_FILE).exists()
    assert db.reap_docker(client, live_too=True) == [s.name for s in other]
    assert client.by_name == {}


def test_reap_without_a_cluster_takes_only_clusters_whose_owner_is_gone(setup: tuple) -> None:
    """--all: a cluster whose owner died goes; the setup's (nobody's: `cluster up`), one
    this process owns and one of another host stay, and are listed as left."""
    _, client, _ = setup
    ids, image = lc.node_ids(3), "rqlite/rqlite:x"
    dead = lc.container_specs("dd", ids, [6001, 6002, 6003], image, owner=_dead_owner())
    mine = lc.container_specs("mm", ids, [6011, 6012, 6013], image, owner=identity())
    far = lc.container_specs("ff", ids, [6021, 6022, 6023], image, owner="far:b:1:1")
    for i, spec in enumerate([*dead, *mine, *far]):
        client.by_name[spec.name] = FakeContainer(spec, 10 + i, client)
    assert db.reap_docker(client) == [s.name for s in dead]
    left = {c["cluster"]: c["why"] for c in docker_clusters(client)}
    assert left == {
        "t1": "no owner (started by `cluster up`, compose, or an older harness)",
        "mm": f"owned by pid {os.getpid()}, still running",
        "ff": "owned by pid 1 on another host (far)",
    }
    assert sorted(db.reap_docker(client, live_too=True)) == sorted(
        s.name for s in [*lc.container_specs("t1", ids, [1, 2, 3], image), *mine, *far]
    )


def test_halt_keeps_the_containers_and_restart_brings_the_same_cluster_back(
    setup: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cluster down --dir` on Docker stops the containers and keeps them (and their
    volumes); `cluster up --dir` starts those same containers again."""
    cluster, client, _ = setup
    cluster._directory = tmp_path
    cluster.save()
    cluster.pause("n2")
    cluster.halt()
    assert client.removed == []
    assert {c.status for c in client.by_name.values()} == {"exited"}
    assert client.get("rqueue-t1-n2").calls == ["pause", "unpause", "stop"]
    monkeypatch.setattr(lc, "connect", lambda: client)
    monkeypatch.setattr(db.DockerCluster, "wait_for_leader", lambda self, t: None)
    again = lc.restart_docker_cluster(tmp_path, 1)
    assert again.cluster_id == "t1" and not again._down
    assert {c.status for c in client.by_name.values()} == {"running"}
    assert all(c.calls[-1] == "start" for c in client.by_name.values())
    with pytest.raises(ClusterError, match="a cluster is already running in"):
        lc.restart_docker_cluster(tmp_path, 1)
    again.halt()
    client.get("rqueue-t1-n1").port_taken = True
    with pytest.raises(ClusterError, match="its host port 5001 is taken now"):
        lc.restart_docker_cluster(tmp_path, 1)
    del client.by_name["rqueue-t1-n3"]  # removed behind the harness's back
    with pytest.raises(ClusterError, match=r"container rqueue-t1-n3 no longer exists .*--purge"):
        lc.restart_docker_cluster(tmp_path, 1)


def test_reap_tries_everything_and_names_what_it_could_not_remove(setup: tuple) -> None:
    _, client, _ = setup
    stuck = client.get("rqueue-t1-n2")

    def refuse(force: bool, v: bool) -> None:
        raise docker.errors.APIError("removal of container is already in progress")

    stuck.remove = refuse
    with pytest.raises(ClusterError, match="could not remove rqueue-t1-n2: removal of container"):
        db.reap_docker(client, cluster_id="t1")
    assert sorted(client.removed) == ["rqueue-t1-n1", "rqueue-t1-n3"]


def test_is_port_conflict() -> None:
    assert lc.is_port_conflict(
        "driver failed programming external connectivity on endpoint rqueue-x-n1: "
        "Bind for 127.0.0.1:5001 failed: port is already allocated"
    )
    assert lc.is_port_conflict("listen tcp4 127.0.0.1:5001: bind: address already in use")
    assert not lc.is_port_conflict("No such image: rqlite/rqlite:nope")


def test_start_retries_with_new_ports_and_removes_each_failed_attempt(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    reaped: list[str | None] = []
    attempts: list[list[int]] = []

    def fake_create(client: object, cluster_id: str, specs: list) -> None:
        attempts.append([s.host_port for s in specs])
        if len(attempts) < 3:
            raise lc.PortTaken(f"cannot start container {specs[0].name}: port is already allocated")

    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(lc, "connect", lambda: object())
    monkeypatch.setattr(lc, "_ensure_image", lambda client, image: None)
    monkeypatch.setattr(lc, "_image_facts", lambda client, image: (None, "sha256:0"))
    monkeypatch.setattr(lc, "_image_environment", lambda client, image: [])
    monkeypatch.setattr(lc, "_create", fake_create)
    monkeypatch.setattr(db, "reap_docker", lambda client, cluster_id: reaped.append(cluster_id))
    monkeypatch.setattr(db.DockerCluster, "_save_logs", lambda self, d: None)
    monkeypatch.setattr(db.DockerCluster, "wait_for_leader", lambda self, t: None)
    cluster = lc.start_docker_cluster(nodes=3, directory=tmp_path, timeout=1)
    assert len(attempts) == 3 and len(reaped) == 2  # two attempts discarded by their id
    assert cluster.cluster_id not in reaped
    assert (tmp_path / db.STATE_FILE).exists()
    state = (tmp_path / db.STATE_FILE).read_text()
    assert cluster.cluster_id in state and str(attempts[-1][0]) in state

    def always_taken(client: object, cluster_id: str, specs: list) -> None:
        raise lc.PortTaken("cannot start container: port is already allocated")

    monkeypatch.setattr(lc, "_create", always_taken)
    reaped.clear()
    with pytest.raises(lc.PortTaken, match="port is already allocated"):
        lc.start_docker_cluster(nodes=3, directory=tmp_path / "x", timeout=1)
    assert len(reaped) == lc.PORT_ATTEMPTS  # each attempt removed, then the error surfaces


def test_a_failed_start_is_removed_and_its_reason_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_leader(self: db.DockerCluster, timeout: float) -> None:
        raise ClusterError("waited 1s for an agreed leader")

    def reap_fails(client: object, cluster_id: str) -> None:
        raise ClusterError("could not remove rqueue-x-n1: engine went away")

    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(lc, "connect", lambda: object())
    monkeypatch.setattr(lc, "_ensure_image", lambda client, image: None)
    monkeypatch.setattr(lc, "_image_facts", lambda client, image: (None, "sha256:0"))
    monkeypatch.setattr(lc, "_image_environment", lambda client, image: [])
    monkeypatch.setattr(lc, "_create", lambda client, cluster_id, specs: None)
    monkeypatch.setattr(db, "reap_docker", reap_fails)
    monkeypatch.setattr(db.DockerCluster, "_save_logs", lambda self, d: None)
    monkeypatch.setattr(db.DockerCluster, "wait_for_leader", no_leader)
    with pytest.raises(ClusterError, match="agreed leader") as err:
        lc.start_docker_cluster(nodes=3, directory=tmp_path, timeout=1)
    assert err.value.__notes__ == [
        "removing the half-started cluster failed too: could not remove rqueue-x-n1: "
        "engine went away"
    ]


def test_the_node_image_clock_is_written_now_or_when_the_node_runs_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    specs = lc.container_specs(
        "t2", lc.node_ids(3), [5001, 5002, 5003], NODE_IMAGE, clock_file=True
    )
    client = FakeClient(specs)
    cluster = db.DockerCluster(client, "t2", specs)
    assert "clock-skew" in cluster.capabilities
    n1, n2, n3 = (client.by_name[s.name] for s in specs)
    cluster.set_clock_offset("n1", 2.5)
    assert n1.calls == ["clock 2.5"]
    cluster.pause("n2")
    cluster.set_clock_offset("n2", -1.0)
    assert n2.calls == ["pause"]  # a frozen container runs nothing
    cluster.resume("n2")
    assert n2.calls == ["pause", "unpause", "clock -1.0"]
    cluster.kill("n3")
    cluster.set_clock_offset("n3", 8.0)
    cluster.restart("n3")
    assert n3.calls == ["kill SIGKILL", "start", "clock 8.0"]
    with pytest.raises(ClusterError, match="finite"):
        cluster.set_clock_offset("n1", float("nan"))


def test_the_clock_file_is_written_through_the_volume_when_its_folder_is_here(
    tmp_path: Path,
) -> None:
    """A clock strobe flips every few hundred ms: where the engine runs on this machine the
    file is renamed into the volume's folder, not written by an exec (about 1 s loaded)."""
    specs = lc.container_specs(
        "t3", lc.node_ids(3), [5001, 5002, 5003], NODE_IMAGE, clock_file=True
    )
    client = FakeClient(specs)
    folders = {s.volume: tmp_path / s.volume for s in specs}
    for f in folders.values():
        f.mkdir()

    class Volumes:
        def get(self, name: str) -> Any:
            if name.endswith("n3-data"):
                raise RuntimeError("no such volume here")  # then the exec, as before
            return type("V", (), {"attrs": {"Mountpoint": str(folders[name])}})()

    client.volumes = Volumes()
    cluster = db.DockerCluster(client, "t3", specs)
    n1, _, n3 = (client.by_name[s.name] for s in specs)
    for seconds in (0.2, 0.0, 0.2):
        cluster.set_clock_offset("n1", seconds)
        assert float((folders[specs[0].volume] / "clock-offset").read_text()) == seconds
    assert n1.calls == [] and not list(folders[specs[0].volume].glob("*.tmp"))
    cluster.set_clock_offset("n3", 8.0)
    assert n3.calls == ["clock 8.0"]


def test_time_zone_rewrites_the_mounted_file_in_place_and_restarts_the_node(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from harness import zonefile

    specs = lc.container_specs(
        "t1", lc.node_ids(3), [5001, 5002, 5003], "rqlite/rqlite:x", zone_dir=tmp_path
    )
    for s in specs:
        zonefile.write(s.zone_file, db.UTC_ZONE)
    client = FakeClient(specs)
    cluster = db.DockerCluster(client, "t1", specs, tmp_path)
    monkeypatch.setattr(base, "probe_node", lambda url, timeout: NodeStatusReady())
    assert "time-zones" in cluster.capabilities and cluster.time_zone_problem() is None
    path = Path(specs[1].zone_file)
    inode = path.stat().st_ino
    cluster.pause("n2")
    cluster.set_time_zone("n2", zonefile.fixed(3600))
    n2 = client.get("rqueue-t1-n2")
    assert n2.calls == ["pause", "unpause", "stop", "start"] and n2.status == "running"
    assert path.read_bytes() == zonefile.fixed(3600) and path.stat().st_ino == inode
    assert [s.node_id for s in cluster._live()] == ["n1", "n2", "n3"]
    cluster.kill("n3")  # a killed node gets its zone when it is restarted
    cluster.set_time_zone("n3", None)
    assert client.get("rqueue-t1-n3").calls == ["kill SIGKILL"]
    assert Path(specs[2].zone_file).read_bytes() == db.UTC_ZONE
    with pytest.raises(ClusterError, match="TZif file's bytes"):
        cluster.set_time_zone("n1", b"Europe/Berlin")
    cluster._image_tz = "Europe/Berlin"  # the image's TZ wins over /etc/localtime
    assert "time-zones" not in cluster.capabilities
    with pytest.raises(ClusterError, match="the image rqlite/rqlite:x sets TZ=Europe/Berlin"):
        cluster.set_time_zone("n1", zonefile.fixed(3600))


def test_without_a_directory_there_is_no_zone_file_to_mount(setup: tuple) -> None:
    cluster, _, _ = setup
    assert "time-zones" not in cluster.capabilities
    assert "no zone file mounted" in (cluster.time_zone_problem() or "")
    with pytest.raises(ClusterError, match="--backend local"):
        cluster.set_time_zone("n1", None)


class NodeStatusReady:
    error = None
    ready = True

    def summary(self) -> str:
        return "ready"


def test_capabilities_say_what_this_cluster_lacks_and_why(
    setup: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster, _, _ = setup  # the official image, no directory: no clock file, no zone file
    monkeypatch.setattr(db.DockerCluster, "_partition_blockers", lambda self: [])
    monkeypatch.setattr(db.shutil, "which", lambda tool: f"/usr/sbin/{tool}")  # tc for links
    assert cluster.capabilities == {"kill", "pause", "partitions", "links"}
    assert cluster.capabilities < db.DockerCluster.CAPABILITIES
    assert cluster.capability_problem("kill") is None
    assert cluster.capability_problem("clock-skew") == db.clock_skew_message()
    assert "no zone file mounted" in (cluster.capability_problem("time-zones") or "")
    monkeypatch.setattr(db.DockerCluster, "_partition_blockers", lambda self: ["not root"])
    assert "partitions" not in cluster.capabilities
    assert cluster.capability_problem("partitions") == (
        "the docker backend cannot partition the network"
    )
    assert "links" not in cluster.capabilities  # links enter the namespaces as partitions do
    why = "the docker backend cannot degrade links: not root"
    assert cluster.capability_problem("links") == why
    monkeypatch.setattr(db.shutil, "which", lambda tool: None if tool == "tc" else tool)
    assert cluster.capability_problem("links") == why + "; tc is not installed"
