"""Starting a Docker cluster, and finding one again from its directory.

:func:`start_docker_cluster` creates the network, volumes (or the nodes' own filesystems)
and containers and waits for a leader; :func:`attach_docker_cluster` reads a cluster back
from its state file (``cluster status``, ``cluster down --dir``);
:func:`restart_docker_cluster` starts a halted one again on its volumes. The running
cluster itself is :class:`harness.cluster.docker.cluster.DockerCluster`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import zonefile
from harness.cluster import disk as disks
from harness.cluster.base import ClusterError
from harness.cluster.docker.cluster import IMAGE_FILE, UTC_ZONE, DockerCluster
from harness.cluster.docker.engine import _ensure_image, _image_environment, _image_facts, connect
from harness.cluster.docker.specs import (
    IMAGE_UID,
    LABEL_NODE,
    PORT_ATTEMPTS,
    SECRET_ENV,
    STATE_FILE,
    ContainerSpec,
    PortTaken,
    container_specs,
    create_kwargs,
    docker_address,
    image_tz,
    is_local_engine,
    is_port_conflict,
    labels,
    node_ids,
    rqlite_image,
    zone_file,
)
from harness.cluster.owners import REAP_TAG_ENV, identity
from harness.cluster.ports import free_ports


def start_docker_cluster(
    nodes: int = 3,
    directory: Path | None = None,
    timeout: float = 60.0,
    image: str | None = None,
    bind_host: str = "127.0.0.1",
    detached: bool = False,
    disk_mb: int | None = None,
) -> DockerCluster:
    """Create an rqlite cluster in containers and wait (bounded) for a leader.

    ``image``: see :func:`rqlite_image`. Pulls the image first when missing (not counted
    in ``timeout``). On any failure the containers, network and volumes made so far are
    removed again; a host port taken before Docker bound it is retried with new ports.
    The cluster belongs to this process (``detached``: to nobody, as ``cluster up``'s).
    ``disk_mb``: each node's data on a host filesystem of its own (:mod:`..disk`), bound
    instead of a volume: the ``disk`` capability.
    """
    if disk_mb and directory is None:
        raise ClusterError("nodes' disks of their own need the cluster's directory")
    ids = node_ids(nodes)
    image = rqlite_image(image)
    secret = {SECRET_ENV: secrets.token_hex(24)}
    address = docker_address()
    if not is_local_engine(address):
        raise ClusterError(
            f"the docker backend needs the engine on this machine (a unix socket): it "
            f"publishes ports on {bind_host}, but DOCKER_HOST={address} is remote"
        )
    client = connect()
    _ensure_image(client, image)
    kind, image_id = _image_facts(client, image)
    embedded = kind == "embedded"  # the project's node: it reads a clock offset file
    if directory is not None:  # what ran, kept in the run folder after the cluster is gone
        directory.mkdir(parents=True, exist_ok=True)
        record = {"image": image, "id": image_id, "kind": kind}
        (directory / IMAGE_FILE).write_text(json.dumps(record, indent=2) + "\n")
        for nid in ids:  # every node's local zone: UTC until set_time_zone
            zonefile.write(zone_file(directory, nid), UTC_ZONE)
    tz = image_tz(_image_environment(client, image))
    for attempt in range(1, PORT_ATTEMPTS + 1):
        cluster_id = uuid.uuid4().hex[:8]
        ports = free_ports(nodes, bind_host)
        specs = container_specs(
            cluster_id, ids, ports, image, bind_host, secret, embedded,
            owner=None if detached else identity(), tag=os.environ.get(REAP_TAG_ENV),
            zone_dir=directory, disk_dir=directory if disk_mb else None,
        )  # fmt: skip
        cluster = DockerCluster(client, cluster_id, specs, directory)
        cluster._image_tz = tz
        try:
            if disk_mb and directory is not None:
                mounts = {s.node_id: s.volume for s in specs}
                disks.make_all(directory, mounts, disk_mb, owner=(IMAGE_UID, IMAGE_UID))
            _create(client, cluster_id, specs)
            cluster.save()
            cluster.wait_for_leader(timeout)
            return cluster
        except PortTaken:
            _discard(cluster)
            if attempt == PORT_ATTEMPTS:
                raise
        except BaseException as exc:
            _discard(cluster, exc)
            raise
    raise AssertionError("unreachable")  # the loop returns or raises


def _discard(cluster: DockerCluster, exc: BaseException | None = None) -> None:
    """Remove a cluster that failed to start, without hiding why it failed."""
    try:
        cluster.stop()
    except Exception as err:
        if exc is None:
            raise
        exc.add_note(f"removing the half-started cluster failed too: {err}")


def _create(client: Any, cluster_id: str, specs: Sequence[ContainerSpec]) -> None:
    import docker

    net = specs[0].network
    shared = {k: v for k, v in specs[0].labels.items() if k != LABEL_NODE}  # owner, tag
    client.networks.create(net, driver="bridge", labels={**shared, **labels(cluster_id)})
    for spec in specs:
        if not spec.volume.startswith("/"):  # else a host filesystem of its own
            client.volumes.create(spec.volume, labels=dict(spec.labels))
    for spec in specs:
        kw = create_kwargs(spec, client.api.api_version)
        try:
            client.containers.create(**kw).start()
        except docker.errors.APIError as exc:
            why = str(exc.explanation or exc)
            kind = PortTaken if is_port_conflict(why) else ClusterError
            raise kind(f"cannot start container {spec.name}: {why}") from None


def attach_docker_cluster(directory: Path) -> DockerCluster:
    """The cluster whose state file ``start_docker_cluster`` wrote into ``directory``."""
    path = Path(directory) / STATE_FILE
    try:
        state = json.loads(path.read_text())
        specs = [
            ContainerSpec(
                node_id=n["id"],
                name=n["name"],
                image=n["image"],
                command=list(n["command"]),
                network=n["network"],
                volume=n["volume"],
                bind_host=n["bind_host"],
                host_port=int(n["host_port"]),
                labels=dict(n["labels"]),
                zone_file=n.get("zone_file"),  # older state files have none
            )
            for n in state["nodes"]
        ]
        cluster_id = state["cluster_id"]
    except FileNotFoundError:
        raise ClusterError(f"no docker cluster in {directory} (missing {STATE_FILE})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ClusterError(f"{path} is not a docker cluster state file: {exc}") from None
    cluster = DockerCluster(connect(), cluster_id, specs, Path(directory))
    with contextlib.suppress(Exception):  # the image may be gone; then TZ is not known
        cluster._image_tz = image_tz(_image_environment(cluster._client, specs[0].image))
    for spec in specs:  # learn which nodes are down or paused now
        try:
            c = cluster._container(spec.node_id)
        except ClusterError:
            cluster._down.add(spec.node_id)
            continue
        if c.status == "paused":
            cluster._paused.add(spec.node_id)
        elif c.status != "running":
            cluster._down.add(spec.node_id)
    return cluster


def restart_docker_cluster(directory: Path, timeout: float = 60.0) -> DockerCluster:
    """Start the containers of the Docker cluster that ``halt`` stopped in ``directory``
    again, on their volumes, and wait (``timeout``) for a leader and every node ready.
    Refuses, saying why, when a container is gone or every one is running already."""
    cluster = attach_docker_cluster(directory)
    missing = []
    for nid, spec in cluster._specs.items():
        try:
            cluster._container(nid)
        except ClusterError:
            missing.append(spec.name)
    if missing:
        volumes = ", ".join(s.volume for s in cluster._specs.values())
        raise ClusterError(
            f"{directory} holds Docker cluster {cluster.cluster_id}, but its container"
            f"{'s' if len(missing) > 1 else ''} {', '.join(missing)} no longer exist"
            f"{'' if len(missing) > 1 else 's'} (removed outside `cluster down --dir`): it "
            f"cannot start again; its volumes ({volumes}) may still hold the data; "
            f"`cluster down --dir {directory} --purge` removes what is left"
        )
    if not cluster._down and not cluster._paused:
        raise ClusterError(
            f"a cluster is already running in {directory}; "
            f"stop it first (python -m harness cluster down --dir {directory})"
        )
    import docker

    with cluster._lock:
        for nid in sorted(cluster._down):
            try:
                cluster._container(nid).start()
            except docker.errors.APIError as exc:
                why = " ".join(str(exc.explanation or exc).split())
                spec = cluster._specs[nid]
                hint = (
                    f": its host port {spec.host_port} is taken now; free it and try again"
                    if is_port_conflict(why)
                    else ""
                )
                raise ClusterError(f"cannot start {spec.name} again ({why}){hint}") from None
            cluster._down.discard(nid)
        for nid in sorted(cluster._paused):
            cluster.resume(nid)
    cluster.wait_for_leader(timeout)
    return cluster
