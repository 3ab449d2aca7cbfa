"""Members removed from and added to a running Docker cluster (capability ``membership``).

A mixin of :class:`harness.cluster.docker.cluster.DockerCluster` on the steps every
backend shares (:mod:`harness.cluster.membership`):

- :meth:`remove_node`: ``DELETE /remove {"id": ID}`` through another member's published
  port, waited for until the leader no longer lists the node; then its container and its
  data volume are removed (the node's last log lines are kept in the directory first).
- :meth:`add_node`: a container started on a new volume with rqlited's ``-join`` over the
  running members' Raft addresses and no ``-bootstrap-expect`` (it joins the running
  cluster, as rqlite does), on the cluster's network under its id; waited for until the
  leader lists it and every live node is ready.

The project's node image only (its nodes are the embedded node, whose joining is tested
here): with another image the capability is lacking.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness import zonefile
from harness.cluster import disk as disks
from harness.cluster.base import ClusterError
from harness.cluster.docker.specs import (
    IMAGE_UID,
    LABEL_NODE,
    LOG_LINES,
    RAFT_PORT,
    ContainerSpec,
    create_kwargs,
    disk_mount,
    zone_file,
)
from harness.cluster.membership import MembershipChanges, MembershipError
from harness.cluster.ports import free_ports

#: a node's local zone until set_time_zone: UTC
_UTC = zonefile.fixed(0, "UTC")
#: how long a change waits: a container starts in seconds, more on a loaded host
CHANGE_TIMEOUT = 90.0


class DockerMembership(MembershipChanges):
    """:meth:`remove_node`, :meth:`add_node` and :meth:`members` of a Docker cluster."""

    _client: Any
    cluster_id: str
    _specs: dict[str, ContainerSpec]
    _directory: Path | None
    _down: set[str]
    _paused: set[str]
    change_timeout = CHANGE_TIMEOUT
    change_poll = 0.25

    # DockerCluster provides _container, save and wait_for_leader (no stubs here: they
    # would come first in its method order)

    def membership_problem(self) -> str | None:
        """Why members cannot be added or removed here (None: they can)."""
        if not all("-clock-offset-file" in s.command for s in self._specs.values()):
            return "only the project's node image joins a running cluster here"
        return None

    def _removal_via(self, node_id: str) -> list[tuple[str, str]]:
        if node_id not in self._specs or node_id in self._down | self._paused:
            raise MembershipError(f"cannot remove node {node_id}: it is not running")
        via = [s for n, s in self._specs.items() if n != node_id and n not in self._down]
        return [(s.node_id, s.url) for s in via]

    def _retire_member(self, node_id: str) -> None:
        """Its container and volume removed (its log's end kept in the directory)."""
        spec = self._specs[node_id]
        c = self._container(node_id)  # type: ignore[attr-defined]
        if self._directory is not None:
            with contextlib.suppress(Exception):
                (self._directory / f"{node_id}.log").write_bytes(c.logs(tail=LOG_LINES))
        c.remove(v=True, force=True)
        _drop_data(self._client, spec.volume)
        # a new dict, not one changed in place: stop() and nodes() iterate it unlocked
        self._specs = {k: v for k, v in self._specs.items() if k != node_id}
        self.save()  # type: ignore[attr-defined]

    def add_node(self, node_id: str | None = None, timeout: float | None = None) -> str:
        """Start a container that joins the running cluster (``node_id``, or a new ``nK``)
        and wait until it is a member and every live node is ready; its id."""
        problem = self.membership_problem()
        if problem:
            raise MembershipError(problem)
        with self._lock:
            live = [s for n, s in self._specs.items() if n not in self._down]
            if not live:
                raise MembershipError("no running member to join through")
            if node_id is None:
                taken = {int(i[1:]) for i in self._specs if i[1:].isdigit()}
                node_id = f"n{max(taken, default=0) + 1}"
            if node_id in self._specs:
                raise MembershipError(f"cannot add node {node_id}: it is a member")
            spec = _joining_spec(live[0], node_id, [s.node_id for s in live])
            if self._directory is not None and spec.zone_file:
                zonefile.write(Path(spec.zone_file), _UTC)
            if live[0].volume.startswith("/"):  # nodes on filesystems of their own
                spec = replace(spec, volume=_own_disk(self._directory, live[0], node_id))
            else:
                self._client.volumes.create(spec.volume, labels=dict(spec.labels))
            kw = create_kwargs(spec, self._client.api.api_version)
            self._client.containers.create(**kw).start()
            self._specs = {**self._specs, node_id: spec}  # (as in remove_node)
            self.save()  # type: ignore[attr-defined]

        def give_up(last: str) -> str:
            self._discard_joiner(node_id)
            return last

        return self._await_joiner(node_id, timeout, give_up)

    def _discard_joiner(self, node_id: str) -> None:
        """A node that did not join in time: removed as a member would be (it may be one
        already), else its container and volume removed all the same."""
        try:
            self.remove_node(node_id, timeout=30.0)
        except ClusterError:
            with self._lock:
                spec = self._specs[node_id]
                with contextlib.suppress(Exception):
                    self._container(node_id).remove(v=True, force=True)  # type: ignore[attr-defined]
                self._specs = {k: v for k, v in self._specs.items() if k != node_id}
                with contextlib.suppress(Exception):
                    _drop_data(self._client, spec.volume)
                self.save()  # type: ignore[attr-defined]


def _drop_data(client: Any, volume: str) -> None:
    """Wipe a removed node's data: its volume removed, or, for a node on a filesystem of
    its own (a host path: the ``disk`` capability), that filesystem emptied and kept for
    the node's return (released with the cluster)."""
    if not volume.startswith("/"):
        client.volumes.get(volume).remove(force=True)
        return
    for entry in Path(volume).iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _own_disk(directory: Path | None, like: ContainerSpec, node_id: str) -> str:
    """The data directory of ``node_id`` joining a cluster whose nodes have filesystems of
    their own: its own again (a node that returns), or a new one the size of ``like``'s."""
    if directory is None:
        raise MembershipError("nodes' disks of their own need the cluster's directory")
    mount = disk_mount(directory, node_id)
    if not disks.node_disk(directory, node_id, mount).image.is_file():
        size = disks.node_disk(directory, like.node_id, like.volume).image.stat().st_size
        disks.make(directory, node_id, mount, size // (1024 * 1024), owner=(IMAGE_UID, IMAGE_UID))
    return str(mount)


def _joining_spec(like: ContainerSpec, node_id: str, members: list[str]) -> ContainerSpec:
    """A container like ``like``'s for a new node ``node_id`` that joins ``members``."""
    (port,) = free_ports(1, like.bind_host)
    prefix = like.name[: -len(like.node_id)]
    command = list(like.command)
    i = command.index("-bootstrap-expect")
    del command[i : i + 2]
    swap = {
        "-node-id": node_id,
        "-http-adv-addr": f"{like.bind_host}:{port}",
        "-raft-adv-addr": f"{node_id}:{RAFT_PORT}",
        "-join": ",".join(f"{m}:{RAFT_PORT}" for m in members),
    }
    for flag, value in swap.items():
        command[command.index(flag) + 1] = value
    lab = {**like.labels, LABEL_NODE: node_id}
    zone = str(zone_file(Path(like.zone_file).parent, node_id)) if like.zone_file else None
    return replace(
        like,
        node_id=node_id,
        name=f"{prefix}{node_id}",
        command=command,
        volume=like.volume.replace(f"-{like.node_id}-", f"-{node_id}-"),
        host_port=port,
        labels=lab,
        zone_file=zone,
    )
