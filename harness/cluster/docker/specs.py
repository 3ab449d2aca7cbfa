"""The Docker backend's pure part: what it asks the engine for, built without an engine.

The containers (:func:`container_specs`, :func:`create_kwargs`) are the ones
``docker-compose.cluster.yml`` declares, flags (:func:`rqlited_args`) and health check
(:func:`healthcheck`) included; the partition commands run in a container's network
namespace (:func:`nsenter_argv`); the one-line errors for an engine or image that is not
there. :mod:`harness.cluster.docker.cluster` drives the engine with them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cluster.base import ClusterError

#: every container, network and volume the harness makes carries this label
LABEL_HARNESS = "io.rqueue.harness"
#: which cluster a resource belongs to ("compose" for the compose file's)
LABEL_CLUSTER = "io.rqueue.cluster"
#: which node a container (or volume) is
LABEL_NODE = "io.rqueue.node"
#: the identity of the process in charge of the cluster (harness.cluster.owners); absent
#: on a cluster nobody owns (``cluster up``, the compose file's)
LABEL_OWNER = "io.rqueue.owner"
#: ``$RQUEUE_REAP_TAG`` of the process that made the cluster, when set
LABEL_TAG = "io.rqueue.reap-tag"

#: the default image: the official one, pinned; docker-compose.cluster.yml pins the same
DEFAULT_IMAGE = "rqlite/rqlite:10.2.7"
#: the environment variable naming the image (``--image`` wins), as in the compose file
IMAGE_ENV = "RQLITE_IMAGE"
#: the project's node image, as ``python -m harness image build`` tags it
NODE_IMAGE = "rqueue/node:local"
#: the user (uid and gid) the project's node image runs its node as; a node's own
#: filesystem (the ``disk`` capability) belongs to it
IMAGE_UID = 1000
#: the cluster secret every node of a cluster gets (harness.node refuses to listen beyond
#: loopback without one; the official image ignores it)
SECRET_ENV = "RQUEUE_CLUSTER_SECRET"
HTTP_PORT = 4001  # inside every container
RAFT_PORT = 4002
DATA_MOUNT = "/rqlite/file"  # the image's volume; the entrypoint puts data/ under it
DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
STATE_FILE = "docker-cluster.json"
NANOS = 1_000_000_000
PORT_ATTEMPTS = 3  # fresh host ports when one was taken between picking and binding
LOG_LINES = 20_000  # of each container's log kept in the cluster directory on stop()


def clock_skew_message() -> str:
    """Why the docker backend refuses clock skew on an image other than the project's."""
    return (
        "the docker backend cannot skew a node's clock in this image: containers read the "
        "host kernel's clock; the project's node image can (python -m harness image build, "
        "--image rqueue/node:local), or run clock-skew with --backend local"
    )


def time_zone_message(why: str) -> str:
    """Why the docker backend refuses to set a node's time zone (``why``: what is amiss)."""
    return (
        f"the docker backend cannot set a node's time zone here: {why}; it mounts a zone "
        f"file of the cluster's directory as each container's {LOCALTIME} (the node then "
        "reads it at start, as rqlited does), so the image must leave TZ unset and the "
        "cluster needs a directory; or run the timezone fault with --backend local"
    )


#: where a container's node looks for its local time zone when TZ is unset (Go's rule)
LOCALTIME = "/etc/localtime"
#: scenario fault kinds (harness/scenario.py) the backend cannot inject with an image
#: other than the project's node image, and why; the nightly chaos job runs scenarios
#: that use them on the local backend instead when it runs such an image
UNSUPPORTED_FAULTS: dict[str, str] = {"clock-skew-node": clock_skew_message()}
#: the label of the project's node images (``embedded``: the node reads a clock offset
#: file; ``rqlited``: a user's binary); not io.rqueue.harness, which containers inherit
IMAGE_LABEL = "io.rqueue.image"
#: where the embedded node of the project's image reads its clock offset (on the volume)
CLOCK_FILE = "/rqlite/file/clock-offset"


def unsupported_faults(image: str, environment: Sequence[str] = ()) -> dict[str, str]:
    """The fault kinds the backend cannot inject with ``image``, judged by its name (the
    backend itself asks the engine for the image's label) and, when given, its
    configured ``environment`` (``KEY=value`` lines, as the engine reports them): a ``TZ``
    there wins over the mounted ``/etc/localtime``, so ``timezone`` cannot work."""
    out = {} if image == NODE_IMAGE else dict(UNSUPPORTED_FAULTS)
    tz = image_tz(environment)
    if tz is not None:
        out["timezone"] = time_zone_message(f"the image {image} sets TZ={tz}")
    return out


def image_tz(environment: Sequence[str]) -> str | None:
    """The ``TZ`` an image's configured environment sets (None: unset)."""
    for line in environment:
        key, sep, value = line.partition("=")
        if key == "TZ" and sep:
            return value
    return None


class DockerUnreachable(ClusterError):
    """The Docker engine cannot be reached; the message is one line naming the address."""


class PortTaken(ClusterError):
    """A host port picked as free was taken before Docker could bind it."""


# -- pure builders ---------------------------------------------------------------------


def rqlite_image(image: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The image reference: ``image`` (``--image``), else ``$RQLITE_IMAGE``, else the
    pinned official image."""
    env = os.environ if env is None else env
    ref = (image or env.get(IMAGE_ENV) or DEFAULT_IMAGE).strip()
    if not ref or any(c.isspace() for c in ref) or ref.startswith("-"):
        raise ClusterError(
            f"{IMAGE_ENV} / --image must be an image such as {DEFAULT_IMAGE}, got {ref!r}"
        )
    return ref


def image_missing_message(image: str, why: str) -> str:
    """The one line for an image that is not here and could not be pulled."""
    return (
        f"image {image} is not here and pulling it failed ({' '.join(why.split())}); "
        f"build the project's node image with `python -m harness image build` and use it "
        f"with --image {NODE_IMAGE} (or {IMAGE_ENV}={NODE_IMAGE})"
    )


def node_ids(count: int) -> list[str]:
    """Node ids ``n1`` ... ``nN`` for a cluster of 3, 5 or 7 nodes."""
    if count not in (3, 5, 7):
        raise ClusterError(f"the docker backend runs 3, 5 or 7 nodes, not {count}")
    return [f"n{i}" for i in range(1, count + 1)]


def rqlited_args(
    node_id: str, ids: Sequence[str], http_adv_addr: str, clock_file: bool = False
) -> list[str]:
    """The flags after the image's entrypoint, as in docker-compose.cluster.yml.

    Every node bootstraps with ``-bootstrap-expect N -join`` over all nodes' Raft
    addresses (rqlite v8 joins on the Raft port; peers are found by network alias).
    ``clock_file``: the project's node image, which also reads a clock offset file.
    """
    if node_id not in ids:
        raise ClusterError(f"node {node_id!r} is not one of {list(ids)}")
    return [
        "-node-id",
        node_id,
        "-http-addr",
        f"0.0.0.0:{HTTP_PORT}",
        "-http-adv-addr",
        http_adv_addr,
        "-raft-addr",
        f"0.0.0.0:{RAFT_PORT}",
        "-raft-adv-addr",
        f"{node_id}:{RAFT_PORT}",
        "-bootstrap-expect",
        str(len(ids)),
        "-join",
        ",".join(f"{i}:{RAFT_PORT}" for i in ids),
        *(["-clock-offset-file", CLOCK_FILE] if clock_file else []),
    ]


def healthcheck() -> dict[str, Any]:
    """The health check of docker-compose.cluster.yml, in seconds."""
    return {
        "test": ["CMD", "wget", "-q", "-O", "/dev/null", f"http://127.0.0.1:{HTTP_PORT}/readyz"],
        "interval": 2,
        "timeout": 2,
        "retries": 30,
        "start_period": 10,
    }


def labels(
    cluster_id: str,
    node_id: str | None = None,
    owner: str | None = None,
    tag: str | None = None,
) -> dict[str, str]:
    """The labels that mark a resource as the harness's (and whose it is)."""
    out = {LABEL_HARNESS: "true", LABEL_CLUSTER: cluster_id}
    if node_id is not None:
        out[LABEL_NODE] = node_id
    if owner:
        out[LABEL_OWNER] = owner
    if tag:
        out[LABEL_TAG] = tag
    return out


@dataclass(frozen=True)
class ContainerSpec:
    """Everything needed to create one node's container."""

    node_id: str
    name: str  # container name, unique per cluster
    image: str
    command: list[str]
    network: str
    volume: str  # a volume's name, or the absolute host path bound instead (its own disk)
    bind_host: str
    host_port: int
    labels: dict[str, str] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict, repr=False)  # the secret
    #: the host file mounted read-only as the container's /etc/localtime (its local time
    #: zone, UTC unless ``set_time_zone`` rewrote it); None: nothing mounted
    zone_file: str | None = None

    @property
    def url(self) -> str:
        return f"http://{self.bind_host}:{self.host_port}"


def container_specs(
    cluster_id: str,
    ids: Sequence[str],
    host_ports: Sequence[int],
    image: str,
    bind_host: str = "127.0.0.1",
    environment: Mapping[str, str] | None = None,
    clock_file: bool = False,
    owner: str | None = None,
    tag: str | None = None,
    zone_dir: Path | None = None,
    disk_dir: Path | None = None,
) -> list[ContainerSpec]:
    """One spec per node: the containers docker-compose.cluster.yml declares
    (``environment``: the cluster secret, the same for every node; ``owner`` and ``tag``:
    see :func:`labels`; ``zone_dir``: where each node's zone file is, ``zone_file``;
    ``disk_dir``: the data goes to the host directory :func:`disk_mount` there, a
    filesystem of its own, instead of a volume)."""
    if len(host_ports) != len(ids):
        raise ClusterError(f"need {len(ids)} host ports, got {len(host_ports)}")
    prefix = f"rqueue-{cluster_id}"
    return [
        ContainerSpec(
            node_id=nid,
            name=f"{prefix}-{nid}",
            image=image,
            command=rqlited_args(nid, ids, f"{bind_host}:{port}", clock_file),
            network=prefix,
            volume=f"{prefix}-{nid}-data" if disk_dir is None else str(disk_mount(disk_dir, nid)),
            bind_host=bind_host,
            host_port=port,
            labels=labels(cluster_id, nid, owner, tag),
            environment=dict(environment or {}),
            zone_file=None if zone_dir is None else str(zone_file(zone_dir, nid)),
        )
        for nid, port in zip(ids, host_ports, strict=True)
    ]


def disk_mount(directory: Path, node_id: str) -> Path:
    """Where the node's filesystem is mounted on the host (absolute: the engine binds it)."""
    return Path(directory).resolve() / f"{node_id}-data"


def zone_file(directory: Path, node_id: str) -> Path:
    """The node's zone file in the cluster's directory (absolute: the engine mounts it)."""
    return Path(directory).resolve() / f"{node_id}.localtime"


def create_kwargs(spec: ContainerSpec, api_version: str = "1.44") -> dict[str, Any]:
    """Keyword arguments for ``client.containers.create`` (docker SDK 7).

    On the cluster network the container is known by its node id (the alias the
    ``-join`` and ``-raft-adv-addr`` flags name), as compose names it by service.
    """
    from docker.types import EndpointConfig

    hc = healthcheck()
    return {
        "image": spec.image,
        "command": spec.command,
        "name": spec.name,
        "hostname": spec.node_id,
        "labels": dict(spec.labels),
        "environment": dict(spec.environment),
        "detach": True,
        "network": spec.network,
        "networking_config": {spec.network: EndpointConfig(api_version, aliases=[spec.node_id])},
        "ports": {f"{HTTP_PORT}/tcp": (spec.bind_host, spec.host_port)},
        "volumes": {
            spec.volume: {"bind": DATA_MOUNT, "mode": "rw"},
            **({spec.zone_file: {"bind": LOCALTIME, "mode": "ro"}} if spec.zone_file else {}),
        },
        "healthcheck": {
            "test": hc["test"],
            "interval": hc["interval"] * NANOS,
            "timeout": hc["timeout"] * NANOS,
            "retries": hc["retries"],
            "start_period": hc["start_period"] * NANOS,
        },
        "restart_policy": {"Name": "no"},  # a killed node stays down until restart()
    }


def docker_address(env: Mapping[str, str] | None = None) -> str:
    """Where the SDK will look for the engine: ``$DOCKER_HOST`` or the default socket."""
    env = os.environ if env is None else env
    return env.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def unreachable_message(address: str, reason: str | None = None, from_env: bool = False) -> str:
    """The one line the harness prints (and exits 2 with) when the engine is not there."""
    where = "from DOCKER_HOST" if from_env else "the default socket; DOCKER_HOST is unset"
    why = f": {' '.join(reason.split())}" if reason else ""
    return (
        f"Docker is not reachable at {address} ({where}{why}); "
        "--backend local runs the embedded cluster instead"
    )


def is_port_conflict(message: str) -> bool:
    """Whether the engine refused a container because its host port is in use."""
    text = message.lower()
    return "port is already allocated" in text or "address already in use" in text


def is_local_engine(address: str) -> bool:
    """True when the engine listens on a unix socket of this machine."""
    return address.startswith("unix://") or address.startswith("/")


def nsenter_argv(pid: int, argv: Sequence[str]) -> list[str]:
    """Run ``argv`` in the network namespace of process ``pid`` (a container's PID 1)."""
    if pid <= 0:
        raise ClusterError(f"container has no running process (pid {pid}) to enter")
    return ["nsenter", "-t", str(pid), "-n", "--", *argv]


def verify_container_pid(pid: int, container_id: str, proc: Path = Path("/proc")) -> None:
    """Make sure ``pid`` is the container's own process, seen from this machine.

    With the engine in a VM (Docker Desktop) the PID Docker reports belongs to the VM;
    on this machine it is some other process or none, and entering its namespace would
    cut the wrong network. The container's id must appear in the process's cgroup path,
    and its network namespace must not be the one this process lives in.
    """
    where = f"container {container_id[:12]}: PID {pid}"
    try:
        cgroup = (proc / str(pid) / "cgroup").read_text()
        target = (proc / str(pid) / "ns" / "net").stat().st_ino
        own = (proc / "self" / "ns" / "net").stat().st_ino
    except OSError as exc:
        raise ClusterError(
            f"{where} is not visible on this machine ({exc.strerror}); is the engine in a VM "
            "(Docker Desktop)? Partitions need the engine's own host"
        ) from None
    if container_id not in cgroup:
        raise ClusterError(
            f"{where} on this machine is not that container's process (its cgroup does not "
            "name the container); is the engine in a VM (Docker Desktop)?"
        )
    if target == own:
        raise ClusterError(f"{where} shares this machine's network namespace; refusing to cut it")


def partition_blockers(
    address: str,
    euid: int,
    which: Mapping[str, str | None],
) -> list[str]:
    """Why partitions cannot be made from here (empty when they can).

    ``which`` maps ``nsenter`` and ``iptables`` to their paths (or None).
    """
    out = []
    if not is_local_engine(address):
        out.append(f"the engine at {address} is not on this machine")
    if euid != 0:
        out.append("the harness is not running as root")
    out.extend(
        f"{tool} is not installed" for tool in ("nsenter", "iptables") if not which.get(tool)
    )
    return out


def partition_unsupported_message(blockers: Sequence[str]) -> str:
    """The error for a partition that cannot be made, with what the scenario needs."""
    return (
        "the docker backend cannot partition: " + "; ".join(blockers) + ". Partitions enter "
        "each container's network namespace from the host (nsenter -t PID -n iptables), "
        "which needs root on the Docker host itself; run the harness there as root, or use "
        "--backend local as root (network namespaces), or pick a scenario without partitions"
    )
