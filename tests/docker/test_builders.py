"""The Docker backend's pure builders: images, flags, container specs, nsenter, messages."""

from __future__ import annotations

import pytest
from docker.models.containers import _create_container_args

from harness.cluster.base import ClusterError
from harness.cluster.docker import specs as db


def test_image_pinned_overridable_and_checked() -> None:
    assert db.rqlite_image(env={}) == db.DEFAULT_IMAGE == "rqlite/rqlite:10.2.7"
    assert db.rqlite_image(env={"RQLITE_IMAGE": "rqueue/node:local"}) == "rqueue/node:local"
    assert db.rqlite_image("mine:1", env={"RQLITE_IMAGE": "rqueue/node:local"}) == "mine:1"
    for bad in ("rqlite/rqlite:8 rc", "-v", " "):
        with pytest.raises(ClusterError, match="must be an image such as"):
            db.rqlite_image(env={"RQLITE_IMAGE": bad})


def test_missing_image_message_names_tag_reason_and_the_build_command() -> None:
    msg = db.image_missing_message(
        "rqlite/rqlite:10.2.7", "dial tcp: lookup\n registry: no such host"
    )
    assert "\n" not in msg
    assert msg.startswith("image rqlite/rqlite:10.2.7 is not here and pulling it failed (dial")
    assert "`python -m harness image build`" in msg and "--image rqueue/node:local" in msg


def test_node_ids() -> None:
    assert db.node_ids(3) == ["n1", "n2", "n3"]
    assert db.node_ids(5)[-1] == "n5"
    with pytest.raises(ClusterError, match="3, 5 or 7 nodes, not 4"):
        db.node_ids(4)


def test_rqlited_args_five_nodes() -> None:
    ids = db.node_ids(5)
    args = db.rqlited_args("n4", ids, "127.0.0.1:5004")
    flags = dict(zip(args[::2], args[1::2], strict=True))
    assert flags == {
        "-node-id": "n4",
        "-http-addr": "0.0.0.0:4001",
        "-http-adv-addr": "127.0.0.1:5004",
        "-raft-addr": "0.0.0.0:4002",
        "-raft-adv-addr": "n4:4002",
        "-bootstrap-expect": "5",
        "-join": "n1:4002,n2:4002,n3:4002,n4:4002,n5:4002",
    }
    with pytest.raises(ClusterError, match="'n9' is not one of"):
        db.rqlited_args("n9", ids, "127.0.0.1:1")


def test_container_specs_are_unique_and_labelled() -> None:
    specs = db.container_specs("c0ffee", db.node_ids(3), [5001, 5002, 5003], "rqlite/rqlite:x")
    assert [s.name for s in specs] == ["rqueue-c0ffee-n1", "rqueue-c0ffee-n2", "rqueue-c0ffee-n3"]
    assert {s.network for s in specs} == {"rqueue-c0ffee"}
    assert len({s.volume for s in specs}) == 3
    assert [s.url for s in specs] == [f"http://127.0.0.1:{p}" for p in (5001, 5002, 5003)]
    for s in specs:
        assert s.labels == {
            db.LABEL_HARNESS: "true",
            db.LABEL_CLUSTER: "c0ffee",
            db.LABEL_NODE: s.node_id,
        }
        assert s.command[s.command.index("-http-adv-addr") + 1] == s.url.removeprefix("http://")
    with pytest.raises(ClusterError, match="need 3 host ports, got 2"):
        db.container_specs("x", db.node_ids(3), [1, 2], "img")


def test_create_kwargs_are_accepted_by_the_sdk() -> None:
    spec = db.container_specs("abc", db.node_ids(3), [5001, 5002, 5003], "rqlite/rqlite:x")[1]
    kw = db.create_kwargs(spec)
    # the SDK's own translation to the Engine API: raises on any unknown argument
    args = _create_container_args({**kw, "version": "1.44"})
    host = args["host_config"]
    assert args["image"] == "rqlite/rqlite:x"
    assert args["command"] == spec.command
    assert args["hostname"] == "n2"
    assert args["labels"] == spec.labels
    assert host["PortBindings"] == {"4001/tcp": [{"HostIp": "127.0.0.1", "HostPort": "5002"}]}
    assert host["Binds"] == [f"{spec.volume}:{db.DATA_MOUNT}:rw"]
    assert host["NetworkMode"] == spec.network
    assert host["RestartPolicy"] == {"Name": "no"}
    assert args["networking_config"]["EndpointsConfig"][spec.network]["Aliases"] == ["n2"]
    hc = args["healthcheck"]
    assert hc["test"][-1] == "http://127.0.0.1:4001/readyz"
    assert hc["interval"] == 2 * 10**9 and hc["retries"] == 30


def test_nsenter_argv() -> None:
    argv = ["iptables", "-w", "5", "-N", "RQUEUE-PARTITION"]
    assert db.nsenter_argv(4242, argv) == ["nsenter", "-t", "4242", "-n", "--", *argv]
    with pytest.raises(ClusterError, match="no running process"):
        db.nsenter_argv(0, argv)


def test_docker_address() -> None:
    assert db.docker_address({}) == "unix:///var/run/docker.sock"
    assert db.docker_address({"DOCKER_HOST": "unix:///x.sock"}) == "unix:///x.sock"
    assert db.is_local_engine("unix:///var/run/docker.sock")
    assert not db.is_local_engine("tcp://10.0.0.1:2375")
    assert not db.is_local_engine("ssh://me@host")


def test_partition_blockers_say_what_is_missing() -> None:
    ok = {"nsenter": "/usr/bin/nsenter", "iptables": "/usr/sbin/iptables"}
    assert db.partition_blockers("unix:///var/run/docker.sock", 0, ok) == []
    blockers = db.partition_blockers("tcp://h:2375", 1000, {"nsenter": None, "iptables": None})
    assert blockers == [
        "the engine at tcp://h:2375 is not on this machine",
        "the harness is not running as root",
        "nsenter is not installed",
        "iptables is not installed",
    ]
    msg = db.partition_unsupported_message(blockers[1:2])
    assert "not running as root" in msg and "nsenter -t PID -n iptables" in msg
    assert "--backend local as root" in msg


def test_unreachable_message_is_one_line() -> None:
    msg = db.unreachable_message("unix:///x.sock", "Connection\nrefused", from_env=True)
    assert "\n" not in msg
    assert msg.startswith("Docker is not reachable at unix:///x.sock (from DOCKER_HOST")
    assert "Connection refused" in msg and "--backend local" in msg
    assert "DOCKER_HOST is unset" in db.unreachable_message("unix:///var/run/docker.sock")


def test_the_node_image_reads_a_clock_file_and_no_fault_is_unsupported() -> None:
    args = db.rqlited_args("n1", ["n1", "n2", "n3"], "127.0.0.1:4001", clock_file=True)
    assert args[-2:] == ["-clock-offset-file", db.CLOCK_FILE]
    assert "-clock-offset-file" not in db.rqlited_args("n1", ["n1", "n2", "n3"], "h:1")
    assert db.unsupported_faults(db.NODE_IMAGE) == {}
    assert set(db.unsupported_faults(db.DEFAULT_IMAGE)) == {"clock-skew-node"}


def test_each_node_mounts_its_zone_file_read_only_as_etc_localtime(tmp_path) -> None:
    specs = db.container_specs("c1", db.node_ids(3), [1, 2, 3], db.DEFAULT_IMAGE, zone_dir=tmp_path)
    for s in specs:
        assert s.zone_file == str(tmp_path.resolve() / f"{s.node_id}.localtime")
        kw = db.create_kwargs(s)
        assert kw["volumes"][s.zone_file] == {"bind": "/etc/localtime", "mode": "ro"}
        assert kw["volumes"][s.volume] == {"bind": db.DATA_MOUNT, "mode": "rw"}
    bare = db.container_specs("c1", db.node_ids(3), [1, 2, 3], db.DEFAULT_IMAGE)[0]
    assert bare.zone_file is None and list(db.create_kwargs(bare)["volumes"]) == [bare.volume]


def test_an_image_that_sets_tz_cannot_take_a_time_zone() -> None:
    assert "timezone" not in db.unsupported_faults(db.DEFAULT_IMAGE, ["PATH=/bin"])
    assert "timezone" not in db.unsupported_faults(db.NODE_IMAGE)
    why = db.unsupported_faults("mine:1", ["PATH=/bin", "TZ=Europe/Berlin"])["timezone"]
    assert "the image mine:1 sets TZ=Europe/Berlin" in why and "--backend local" in why
    assert db.image_tz(["TZ="]) == "" and db.image_tz(["TZONE=x"]) is None
