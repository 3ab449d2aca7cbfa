"""The Docker backend: an rqlite cluster in containers, of the official image or the project's.

The containers are the ones ``docker-compose.cluster.yml`` declares, created through the
``docker`` SDK so that each cluster gets its own network, volumes, free host ports and
an id in its labels (several clusters can run side by side). The image is ``--image``,
else ``$RQLITE_IMAGE``, else the pinned official image; ``python -m harness image build``
makes the project's own (the embedded node behind rqlited's interface), and every
cluster gets a random cluster secret in ``RQUEUE_CLUSTER_SECRET``. Faults go through the
engine: ``kill`` is SIGKILL to the container, ``restart`` starts it again on its volume,
``pause``/``resume`` freeze and thaw its cgroup. Partitions are iptables rules inside
the containers' network namespaces, entered from the host with ``nsenter -t PID -n``:
that needs root on the engine's own host (not Docker Desktop's VM, not a remote
``DOCKER_HOST``); when it is not possible, :meth:`DockerCluster.partition` says why.
Degraded links (packet loss, slow links: :mod:`harness.cluster.links`) enter alike; they
live in the container's namespace, so they go with the container (a crashed run's too,
when its containers are reaped) and are put back on a container that starts again.
A node's clock can be skewed only in the project's node image (its node reads an offset
file on its volume); other images read the host kernel's clock. A node's local time zone
(``set_time_zone``) is a zone file of the cluster's directory, ``DIR/<node>.localtime``
(UTC until changed), mounted read-only as the container's ``/etc/localtime``, as users
give a container the host's zone: the file is rewritten in place and the container
restarted, and its node (rqlited or the embedded one, both by Go's rules) reads it at
start. That works with any image that leaves ``TZ`` unset (the official one carries no
zone data of its own, so ``TZ`` alone would leave it in UTC).

Everything the backend sends to the engine is built by the pure functions of
:mod:`harness.cluster.docker.specs`, so it is tested without an engine; connecting,
images and reaping are :mod:`harness.cluster.docker.engine`.
Teardown is by label: :meth:`DockerCluster.stop` removes the cluster's containers, network
and volumes (a run's cluster), :meth:`DockerCluster.halt` stops its containers and keeps
them with their volumes, and :func:`restart_docker_cluster` starts them again on their
data (``cluster down --dir`` / ``cluster up --dir``). A cluster belongs to the process
that started it (the label ``io.rqueue.owner``, :mod:`harness.cluster.owners`) unless
started ``detached`` (``cluster up``); :func:`reap_docker` without a cluster id removes
only clusters whose owner is gone.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import zonefile
from harness.cluster import disk as disks
from harness.cluster import partition as rules
from harness.cluster.base import (
    CLOCK_SKEW,
    DISK,
    Cluster,
    ClusterError,
    NodeInfo,
    NodeStatus,
)
from harness.cluster.docker.engine import (
    reap_docker,
)
from harness.cluster.docker.membership import DockerMembership
from harness.cluster.docker.specs import (
    CLOCK_FILE,
    HTTP_PORT,
    LOG_LINES,
    RAFT_PORT,
    STATE_FILE,
    ContainerSpec,
    clock_skew_message,
    docker_address,
    nsenter_argv,
    partition_blockers,
    partition_unsupported_message,
    time_zone_message,
    verify_container_pid,
)
from harness.cluster.forward_loss import ForwardLoss, ForwardLossControl
from harness.cluster.links import LinkControl, LinkFaults, addresses_except

# -- the engine ------------------------------------------------------------------------


class DockerCluster(LinkControl, ForwardLossControl, DockerMembership, Cluster):
    """A cluster of rqlite containers made by this backend (see the module docstring)."""

    engine = "docker"

    def __init__(
        self,
        client: Any,
        cluster_id: str,
        specs: Sequence[ContainerSpec],
        directory: Path | None = None,
    ) -> None:
        self._client = client
        self.cluster_id = cluster_id
        self._specs = {s.node_id: s for s in specs}
        self._directory = directory
        self._down: set[str] = set()
        self._paused: set[str] = set()
        #: the partition in effect, as its rules for the nodes' addresses (None: none)
        self._partition: Callable[[Mapping[str, str]], dict[str, list[list[str]]]] | None = None
        self._applied: set[str] = set()  # nodes whose namespace holds partition rules
        self._ips: dict[str, str] = {}  # last known address of each node on its network
        self._clock_pending: dict[str, float] = {}  # offsets for nodes down or paused
        self._clock_dirs: dict[str, Path | None] = {}  # each volume's folder here, if any
        self._image_tz: str | None = None  # TZ the image sets (then no zone file counts)
        self._lock = threading.RLock()
        self._links = LinkFaults(  # degraded links, put back on a container that starts again
            cluster_id,
            lambda node, argvs, check: self._run_in_netns(node, argvs, check),
            self._peer_addresses,
            lambda node: node not in self._down,
            self._lock,
        )

    # -- inspection -----------------------------------------------------------------------
    def nodes(self) -> list[NodeInfo]:
        return [NodeInfo(id=s.node_id, url=s.url, pid=None) for s in self._specs.values()]

    def _live(self) -> list[ContainerSpec]:
        return [s for n, s in self._specs.items() if n not in self._down | self._paused]

    def _container(self, node_id: str) -> Any:
        if node_id not in self._specs:
            raise ClusterError(f"no node {node_id!r} in docker cluster {self.cluster_id}")
        import docker

        try:
            return self._client.containers.get(self._specs[node_id].name)
        except docker.errors.NotFound:
            raise ClusterError(
                f"container {self._specs[node_id].name} of node {node_id} is gone"
            ) from None

    # -- hooks of Cluster.leader and Cluster.wait_for_leader -----------------------------
    ready_phrase = " and /readyz 200 on every live node"
    leader_poll = 0.25

    def _live_nodes(self) -> list[NodeInfo]:
        return [NodeInfo(id=s.node_id, url=s.url, pid=None) for s in self._live()]

    def _leader_wait_error(
        self, timeout: float, what: str, statuses: Sequence[NodeStatus]
    ) -> ClusterError:
        self._raise_if_exited()  # a container that died on its own says more
        seen = "; ".join(s.summary() for s in statuses) or "no live node"
        return ClusterError(
            f"docker cluster {self.cluster_id}: waited {timeout:.0f}s for {what}; saw {seen}"
        )

    def _raise_if_exited(self) -> None:
        """Name containers that died on their own (bad flags, image) with their last log."""
        for nid, spec in self._specs.items():
            if nid in self._down:
                continue
            try:
                c = self._container(nid)
                c.reload()
            except Exception:
                continue
            if c.status == "exited":
                tail = c.logs(tail=5).decode(errors="replace").strip().splitlines()
                raise ClusterError(
                    f"container {spec.name} exited: {tail[-1] if tail else 'no output'}"
                )

    # -- faults ---------------------------------------------------------------------------
    def kill(self, node_id: str) -> None:
        with self._lock:
            c = self._container(node_id)
            c.reload()
            if c.status == "paused":
                _kill_paused(c)
            else:
                c.kill(signal="SIGKILL")
            self._down.add(node_id)
            self._paused.discard(node_id)
            self._applied.discard(node_id)  # its namespace died with it

    def restart(self, node_id: str) -> None:
        with self._lock:
            c = self._container(node_id)
            c.start()
            self._down.discard(node_id)
            if self._partition is not None:
                self._apply_partition(self._partition)
            self._links.reapply(node_id)
            self._write_pending_clock(node_id)

    def pause(self, node_id: str) -> None:
        with self._lock:
            _freeze(self._container(node_id))
            self._paused.add(node_id)

    def resume(self, node_id: str) -> None:
        with self._lock:
            self._container(node_id).unpause()
            self._paused.discard(node_id)
            self._write_pending_clock(node_id)

    #: at best: partitions as root with nsenter and iptables, clock skew with the project's
    #: node image (its nodes read a clock offset file), time zones with a zone file mounted
    #: and no ``TZ`` in the image; :attr:`capabilities` says which this cluster has
    CAPABILITIES = frozenset(
        {"kill", "pause", "partitions", "clock-skew", "time-zones", DISK, "links", "membership"}
    )

    @property
    def capabilities(self) -> frozenset[str]:
        lacking = {
            "membership": self.membership_problem() is not None,
            "partitions": bool(self._partition_blockers()),
            "clock-skew": not all("-clock-offset-file" in s.command for s in self._specs.values()),
            "time-zones": self.time_zone_problem() is not None,
            DISK: not all(s.volume.startswith("/") for s in self._specs.values()),
            "links": bool(self._link_blockers()),
        }
        return self.CAPABILITIES - {c for c, lacks in lacking.items() if lacks}

    def fill_disk(self, node_id: str) -> None:
        disks.fill(self._disk(node_id))

    def free_disk(self, node_id: str) -> None:
        disks.free(self._disk(node_id))

    def _disk(self, node_id: str) -> disks.NodeDisk:
        if DISK not in self.capabilities or self._directory is None:
            raise ClusterError("this cluster was started without disks of its own (disk_mb)")
        return disks.node_disk(self._directory, node_id, self._specs[node_id].volume)

    def capability_problem(self, capability: str) -> str | None:
        if capability == CLOCK_SKEW and CLOCK_SKEW not in self.capabilities:
            return clock_skew_message()
        if capability == "links" and self._link_blockers():
            return "the docker backend cannot degrade links: " + "; ".join(self._link_blockers())
        return super().capability_problem(capability)

    def set_clock_offset(self, node_id: str, seconds: float) -> None:
        """The project's node image: write the offset to the node's clock file on its
        volume (inside the container, replaced atomically; the node re-reads it on
        change). A node that is down or paused gets it when it runs again. Other images:
        refused, containers read the host's clock."""
        if CLOCK_SKEW not in self.capabilities:
            raise ClusterError(clock_skew_message())
        if not math.isfinite(seconds):
            raise ClusterError(f"clock offset must be a finite number of seconds, got {seconds!r}")
        self._container(node_id)  # names an unknown node
        with self._lock:
            self._clock_pending[node_id] = float(seconds)
            if node_id not in self._down | self._paused:
                self._write_pending_clock(node_id)

    def _write_pending_clock(self, node_id: str) -> None:
        seconds = self._clock_pending.pop(node_id, None)
        if seconds is None:
            return
        if node_id not in self._clock_dirs:
            self._clock_dirs[node_id] = volume_folder(self._client, self._specs[node_id].volume)
        folder = self._clock_dirs[node_id]
        if folder is not None:  # a rename on this machine: a clock strobe flips in time
            (folder / "clock-offset.tmp").write_text(f"{seconds!r}\n")
            os.replace(folder / "clock-offset.tmp", folder / "clock-offset")
            return
        argv = ["/usr/local/bin/python3", "-IS", "-c", _WRITE_CLOCK, CLOCK_FILE, repr(seconds)]
        code, out = self._container(node_id).exec_run(argv)
        if code != 0:
            text = out.decode(errors="replace").strip().splitlines()
            raise ClusterError(
                f"cannot set the clock of {node_id}: {text[-1] if text else f'exit {code}'}"
            )

    def time_zone_problem(self) -> str | None:
        """Why the nodes' zones cannot be set (no zone file mounted, or the image sets
        ``TZ``, which wins over ``/etc/localtime``), or None."""
        if any(s.zone_file is None for s in self._specs.values()):
            why = "its containers have no zone file mounted (started without a directory)"
            return time_zone_message(why)
        if self._image_tz is not None:
            image = next(iter(self._specs.values())).image
            return time_zone_message(f"the image {image} sets TZ={self._image_tz}")
        return None

    #: a container starts in seconds, more on a loaded host
    zone_timeout = 60.0

    def _apply_time_zone(self, node_id: str, tzif: bytes | None) -> tuple[str, str] | None:
        """The node's zone file, mounted as the container's ``/etc/localtime``, is
        rewritten in place (the mount shows the same inode), then the container stops
        (SIGTERM, SIGKILL after 5 s) and starts again on its volume."""
        with self._lock:
            c = self._container(node_id)
            spec = self._specs[node_id]
            zonefile.write(spec.zone_file, UTC_ZONE if tzif is None else tzif)  # type: ignore[arg-type]
            if node_id in self._down:
                return None
            c.reload()
            if c.status == "paused":
                c.unpause()  # a frozen process cannot handle SIGTERM
            self._paused.discard(node_id)
            self._down.add(node_id)  # from now on: no faults, probes or rules for it
            self._applied.discard(node_id)  # its namespace goes with it
        c.stop(timeout=5)  # outside the lock: other nodes may restart meanwhile
        self.restart(node_id)
        return spec.url, "a new time zone"

    def _partition_blockers(self) -> list[str]:
        which = {t: shutil.which(t) for t in ("nsenter", "iptables")}
        return partition_blockers(docker_address(), os.geteuid(), which)

    def _link_blockers(self) -> list[str]:
        """Why links cannot be degraded from here: a partition's blockers, and tc."""
        return self._partition_blockers() + ["tc is not installed"] * (not shutil.which("tc"))

    def _link_faults(self) -> LinkFaults:
        return self._links

    def _forward_loss(self) -> ForwardLoss:
        """Forwarded replies lost inside the followers' containers (``forward-reply-loss``)."""
        if self.__dict__.get("_fwd_loss") is None:
            self._fwd_loss = ForwardLoss(
                self.cluster_id, lambda node, argvs, check: self._run_in_netns(node, argvs, check)
            )
        return self._fwd_loss

    def _node_address(self, node_id: str) -> str:
        with self._lock:
            self._refresh_ips()
            if node_id not in self._ips:
                raise ClusterError(f"no network address known for {node_id}")
            return self._ips[node_id]

    def forward_port(self, node_id: str) -> int:
        """The port a follower forwards to inside the leader's container: the project's
        node image (it reads a clock file) forwards over HTTP, rqlite's over its Raft port."""
        spec = self._specs[node_id]
        return HTTP_PORT if "-clock-offset-file" in spec.command else RAFT_PORT

    def _peer_addresses(self, node_id: str) -> list[str]:
        with self._lock:
            self._refresh_ips()
            return addresses_except(self._ips, node_id)

    def partition(self, components: Iterable[Iterable[str]]) -> None:
        try:
            comps = rules.normalise(components, self._specs)
        except ValueError as exc:
            raise ClusterError(f"bad partition: {exc}") from None
        self._cut(lambda addresses: rules.apply_rules(comps, addresses))

    def partition_one_way(self, cuts: Iterable[Iterable[str]]) -> None:
        try:
            pairs = [list(c) for c in cuts]
            rules.one_way_drops(pairs, self._specs)
        except (TypeError, ValueError) as exc:
            raise ClusterError(f"bad one-way partition: {exc}") from None
        self._cut(lambda addresses: rules.one_way_rules(pairs, addresses))

    def _cut(self, build: Callable[[Mapping[str, str]], dict[str, list[list[str]]]]) -> None:
        """Heal, then apply the rules ``build`` makes from the nodes' addresses (again
        whenever a node restarts: its namespace is new)."""
        blockers = self._partition_blockers()
        if blockers:
            raise ClusterError(partition_unsupported_message(blockers))
        with self._lock:
            self.heal()
            self._partition = build
            self._apply_partition(build)

    def heal(self) -> None:
        with self._lock:
            self._remove_rules()
            self._partition = None

    def _apply_partition(
        self, build: Callable[[Mapping[str, str]], dict[str, list[list[str]]]]
    ) -> None:
        """(Re)apply the partition ``build`` makes on every live node, with the nodes'
        current addresses."""
        self._remove_rules()
        self._refresh_ips()
        missing = sorted(set(self._specs) - set(self._ips))
        if missing:
            raise ClusterError(f"cannot partition: no network address known for {missing}")
        for nid, argvs in build(self._ips).items():
            if nid in self._down:
                continue  # a dead node has no namespace; restart() applies its rules
            self._applied.add(nid)
            self._run_in_netns(nid, argvs, check=True)

    def _remove_rules(self) -> None:
        """Delete exactly the chain and jumps added on nodes whose namespace still exists."""
        live = [n for n in self._applied if n not in self._down]
        for nid, argvs in rules.heal_rules(live).items():
            self._run_in_netns(nid, argvs, check=False)
        self._applied.clear()

    def _refresh_ips(self) -> None:
        """Learn each running node's address on the cluster network (kept for dead ones)."""
        for nid, spec in self._specs.items():
            if nid in self._down:
                continue
            c = self._container(nid)
            c.reload()
            ip = (c.attrs["NetworkSettings"]["Networks"].get(spec.network) or {}).get("IPAddress")
            if ip:
                self._ips[nid] = ip

    def _run_in_netns(self, node_id: str, argvs: Sequence[Sequence[str]], check: bool) -> None:
        c = self._container(node_id)
        c.reload()
        pid = int(c.attrs["State"]["Pid"])
        verify_container_pid(pid, c.id)
        for argv in argvs:
            cmd = nsenter_argv(pid, argv)
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=15)
            if check and res.returncode != 0:
                err = res.stderr.strip() or f"exit {res.returncode}"
                raise ClusterError(f"{' '.join(cmd)} failed on {node_id}: {err}")

    # -- lifecycle ------------------------------------------------------------------------
    def halt(self, grace: float = 10.0) -> None:
        """Stop every container (SIGTERM, SIGKILL after ``grace`` s) and keep the
        containers, their network and volumes: :func:`restart_docker_cluster` starts
        them again on their data. (:meth:`stop` removes them.)"""
        with self._lock:
            for nid in self._specs:
                try:
                    c = self._container(nid)
                except ClusterError:
                    continue  # gone already; restart_docker_cluster names it
                c.reload()
                if c.status == "paused":
                    c.unpause()  # a frozen process cannot handle SIGTERM
                if c.status in ("running", "paused", "restarting"):
                    c.stop(timeout=max(1, math.ceil(grace)))
                self._down.add(nid)
            self._paused.clear()
            self._applied.clear()  # the rules died with the namespaces
            self._partition = None
            self._links.forget()
            self._clock_pending.clear()

    def stop(self) -> None:
        """Keep each node's log in the directory, then remove the cluster (by its label)
        and the nodes' filesystems."""
        if self._directory is not None:
            self._save_logs(self._directory)
        reap_docker(self._client, cluster_id=self.cluster_id)
        if self._directory is not None:
            disks.release(self._directory)
        if self._directory is not None:
            (self._directory / STATE_FILE).unlink(missing_ok=True)

    def _save_logs(self, directory: Path) -> None:
        """Write ``<node>.log`` (the container's last LOG_LINES lines); best effort."""
        import docker

        for nid in self._specs:
            try:
                data = self._container(nid).logs(tail=LOG_LINES)
            except (ClusterError, docker.errors.APIError):
                continue
            with contextlib.suppress(OSError):
                directory.mkdir(parents=True, exist_ok=True)
                (directory / f"{nid}.log").write_bytes(data)

    def describe(self) -> dict:
        out = super().describe()
        out["cluster_id"] = self.cluster_id
        out["image"] = next(iter(self._specs.values())).image
        return out

    def save(self) -> None:
        """Write the cluster's state file so ``attach_docker_cluster`` can find it."""
        if self._directory is None:
            return
        self._directory.mkdir(parents=True, exist_ok=True)
        state = {
            "cluster_id": self.cluster_id,
            "nodes": [
                {
                    "id": s.node_id,
                    "name": s.name,
                    "image": s.image,
                    "command": s.command,
                    "network": s.network,
                    "volume": s.volume,
                    "bind_host": s.bind_host,
                    "host_port": s.host_port,
                    "labels": s.labels,
                    "zone_file": s.zone_file,
                }
                for s in self._specs.values()
            ],
        }
        (self._directory / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")


#: the image a cluster ran (tag, id), written into its directory and kept
IMAGE_FILE = "docker-image.json"
#: how many times a pause is tried when the cgroup freezer did not freeze in time (runc
#: gives up after its own wait and thaws the container again; a loaded host sees it)
FREEZE_ATTEMPTS = 3
#: what a node's zone file holds when its zone is not set: UTC
UTC_ZONE = zonefile.fixed(0, "UTC")
#: run in the node's container: write the offset next to the clock file, then replace it
_WRITE_CLOCK = (
    "import os, sys; path, value = sys.argv[1:]; "
    "open(path + '.tmp', 'w').write(value + '\\n'); os.replace(path + '.tmp', path)"
)


def volume_folder(client: Any, volume: str) -> Path | None:
    """The volume's folder when the engine runs on this machine and this process may
    write there (root), else None: then the clock file is written by an exec into the
    container, which takes 0.1 s idle and about 1 s on a loaded host (too slow for a
    clock strobe of a few hundred milliseconds)."""
    try:
        folder = Path(client.volumes.get(volume).attrs["Mountpoint"])
    except Exception:
        return None
    return folder if folder.is_dir() and os.access(folder, os.W_OK) else None


def _kill_paused(c: Any) -> None:
    """SIGKILL a frozen container: engines differ on whether kill needs a thaw first."""
    import docker

    with contextlib.suppress(docker.errors.APIError):  # refused while paused: thaw first
        c.kill(signal="SIGKILL")
    c.reload()
    if c.status == "paused":
        c.unpause()  # a pending SIGKILL is delivered on thaw
        c.reload()
    if c.status == "running":
        c.kill(signal="SIGKILL")


def _freeze(container: Any) -> None:
    """Pause ``container``, trying again (:data:`FREEZE_ATTEMPTS` in all) when the engine
    says the freezer could not freeze it (``unable to freeze``: runc waited for the
    cgroup's tasks, gave up and thawed them); any other refusal is raised at once."""
    import docker

    for attempt in range(1, FREEZE_ATTEMPTS + 1):
        try:
            container.pause()
            return
        except docker.errors.APIError as exc:
            if "unable to freeze" not in str(exc) or attempt == FREEZE_ATTEMPTS:
                raise
