"""Local clusters: rqlite-compatible nodes as detached processes on this machine.

::

    from harness.cluster.local.cluster import LocalCluster
    with LocalCluster.start(nodes=3, directory=Path("/tmp/c")) as c:
        c.leader(); c.kill("n1"); c.wait_for_leader(10); c.restart("n1")

The engines (``"embedded"``, the default, and ``"rqlited"``) and their command lines are
:mod:`harness.cluster.engines`; the node processes, as /proc shows them, and reaping
what earlier runs left behind are :mod:`harness.cluster.local.processes`; the loopback ports
are :mod:`harness.cluster.ports`.

Processes run in their own session, so ``python -m harness cluster up`` can exit and
leave them running. A cluster belongs to the process that started it (its identity is in
every node's environment, :mod:`harness.cluster.owners`): when that process is gone
without stopping it, ``cluster down --all`` reaps it. ``detached=True`` (what ``cluster
up`` passes) makes a cluster nobody's: only ``cluster down --dir`` stops it.
Everything about a cluster is kept in ``DIR/cluster.json``;
:meth:`LocalCluster.attach` reads it back from another process (``cluster status`` and
``cluster down --dir``). Per node: ``DIR/<id>/data`` (data directory), ``DIR/<id>/node.log``
(stdout and stderr, appended across restarts) and ``DIR/<id>/clock-offset``.

Node processes inherit the caller's environment, so ``RQUEUE_CLUSTER_SECRET`` (the cluster
secret that authenticates Raft, see docs/embedded-node.md) reaches every embedded node when
the caller sets it; loopback clusters, these included, need none. ``TZ`` is the exception:
every node runs with ``TZ=UTC`` whatever the machine's zone (``time_zone=None`` keeps the
caller's), because rqlite and the embedded node rewrite ``'now'`` in local time;
:meth:`LocalCluster.set_time_zone` gives one node a zone file of its own
(``DIR/<id>/zone.tzif``).

Without ``netns`` nodes listen on free ports of 127.0.0.1 and :meth:`partition` raises
:class:`ClusterError`. With ``netns=True`` (root only) each node runs in its own network
namespace on a bridge (see :mod:`harness.cluster.netns`), on ports 4001 (HTTP) and 4002
(Raft) of its own 127.77.X.Y address, and partitions are iptables rules inside the
namespaces (:mod:`harness.cluster.partition`), as are degraded links (loss rules and
qdiscs, :mod:`harness.cluster.links`).

``base_port=P`` fixes the loopback ports instead: HTTP on P, P+10, P+20, ... and Raft on
the port after each (P=4001: 4001/4002, 4011/4012, ..., rqlite's default ports first).
:meth:`LocalCluster.restart_stopped` starts a stopped loopback cluster again on its data,
ports and engine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import harness
from harness.cluster import disk as disks
from harness.cluster.base import (
    DISK,
    NETNS_CAPABILITIES,
    Cluster,
    ClusterError,
    NodeInfo,
    NodeStatus,
)
from harness.cluster.engines import (
    ENGINES,
    NodeSpec,
    check_rqlited_version,
    embedded_argv,
    faketime_env,
    find_faketime,
    resolve_rqlited,
    rqlited_argv,
    rqlited_setting_flags,
    rqlited_version,
)
from harness.cluster.forward_loss import ForwardLossControl
from harness.cluster.links import LinkControl, LinkFaults
from harness.cluster.local.faults import LocalFaults
from harness.cluster.local.membership import LocalMembership
from harness.cluster.local.processes import (
    MARKER_ENV,
    POLL,
    is_ours,
    kill_and_wait,
    log_tail,
    our_processes,
    send_signal,
)
from harness.cluster.netns import (
    NETNS_HTTP_PORT,
    NETNS_RAFT_PORT,
    NetnsNetwork,
    reap_networks,
    require_root,
)
from harness.cluster.owners import OWNER_ENV, identity
from harness.cluster.ports import fixed_ports, free_ports, require_free

STATE_FILE = "cluster.json"
#: how often :meth:`LocalCluster.start` picks new ports when one was taken under it
PORT_ATTEMPTS = 3


class NodeDied(ClusterError):
    """A node process exited on its own; the message ends with its log's last lines."""

    def __init__(self, message: str, port_taken: bool = False) -> None:
        super().__init__(message)
        self.port_taken = port_taken


# -- the cluster ---------------------------------------------------------------------------
class LocalCluster(LocalFaults, LinkControl, ForwardLossControl, LocalMembership, Cluster):
    """Nodes as local processes; see the module docstring."""

    #: the module run as ``python -m MODULE`` for the embedded engine
    node_module = "harness.node"

    def __init__(
        self,
        directory: Path,
        engine: str,
        specs: list[NodeSpec],
        *,
        rqlited: str | None = None,
        rqlited_version: tuple[int, int, int] | None = None,
        faketime: str | None = None,
        network: NetnsNetwork | None = None,
        partitioned: list[str] | None = None,
        rqlited_settings: dict[str, str] | None = None,
        owner: str | None = None,
        disk_mb: int | None = None,
    ) -> None:
        self.directory = Path(directory).resolve()
        self._disk_mb = disk_mb  # each node's data on a filesystem of this size (MiB)
        self.owner = owner  # the identity of the process in charge; None: detached
        self.engine = engine
        self._specs = {s.id: s for s in specs}
        self._rqlited = rqlited
        self._rqlited_version = rqlited_version
        self._rqlited_settings = dict(rqlited_settings or {})
        self._faketime = faketime
        self._network = network
        self._partitioned = list(partitioned or [])  # nodes that carry partition rules
        self._procs: dict[str, subprocess.Popen] = {}
        self._lock = threading.RLock()
        self._links: LinkFaults | None = None  # made by _link_faults when first needed

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def start(
        cls,
        nodes: int = 3,
        directory: Path | str | None = None,
        engine: str = "embedded",
        rqlited: str | os.PathLike | None = None,
        netns: bool = False,
        timeout: float = 30.0,
        base_port: int | None = None,
        rqlited_settings: dict[str, str] | None = None,
        detached: bool = False,
        time_zone: str | None = "UTC",
        disk_mb: int | None = None,
    ) -> LocalCluster:
        """Start ``nodes`` nodes and wait (``timeout``) for a leader and every node ready.

        ``base_port``: fixed loopback ports (see the module docstring) instead of free ones.
        ``detached``: the cluster is nobody's (``cluster up``); else this process owns it.
        ``rqlited_settings``: engine ``rqlited`` only, see
        :data:`harness.cluster.engines.RQLITED_SETTINGS`. ``time_zone``: every node's
        ``TZ`` (default ``UTC``; None: the caller's own). ``disk_mb``: each node's data
        directory on a filesystem of its own of that size (root; :mod:`.disk`), which
        gives the cluster the ``disk`` capability.
        """
        if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
            raise ClusterError(f"nodes must be a positive integer, got {nodes!r}")
        if engine not in ENGINES:
            raise ClusterError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
        if directory is None:
            raise ClusterError("a cluster needs a directory for its state, data and logs")
        directory = Path(directory).resolve()
        directory.mkdir(parents=True, exist_ok=True)
        if (directory / STATE_FILE).exists():
            old = cls.attach(directory)
            if any(old._alive(s) for s in old._specs.values()):
                raise ClusterError(
                    f"a cluster is already running in {directory}; "
                    f"stop it first (python -m harness cluster down --dir {directory})"
                )
            raise ClusterError(
                f"{directory} holds a stopped cluster's state and data; restart it with "
                f"`python -m harness cluster up --dir {directory}` (restart_stopped), or "
                "start a new cluster in an empty directory"
            )
        ports = None
        if base_port is not None:
            if netns:
                raise ClusterError(
                    "--base-port is for loopback clusters: with --netns every node listens "
                    f"on {NETNS_HTTP_PORT} (HTTP) and {NETNS_RAFT_PORT} (Raft) of its own address"
                )
            ports = fixed_ports(base_port, nodes)
            require_free(ports)
        binary = version = None
        faketime = None
        if engine == "rqlited":
            binary = resolve_rqlited(rqlited)
            version = rqlited_version(binary)
            check_rqlited_version(version)
            rqlited_setting_flags(version, rqlited_settings or {})  # refused before any start
            faketime = find_faketime()
        elif rqlited_settings:
            raise ClusterError("rqlited_settings are for the engine 'rqlited'")
        if netns:
            require_root()
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                return cls._start_once(
                    nodes, directory, engine, binary, version, faketime, netns, timeout, ports,
                    rqlited_settings, None if detached else identity(), time_zone, disk_mb,
                )  # fmt: skip
            except NodeDied as exc:
                # a free port can be taken by another process before the node binds it
                if netns or ports or attempt == PORT_ATTEMPTS or not exc.port_taken:
                    raise
                for i in range(1, nodes + 1):
                    shutil.rmtree(directory / f"n{i}", ignore_errors=True)
                (directory / STATE_FILE).unlink(missing_ok=True)
        raise AssertionError("unreachable")

    @classmethod
    def _start_once(
        cls,
        nodes: int,
        directory: Path,
        engine: str,
        binary: str | None,
        version: tuple[int, int, int] | None,
        faketime: str | None,
        netns: bool,
        timeout: float,
        fixed: list[int] | None = None,
        rqlited_settings: dict[str, str] | None = None,
        owner: str | None = None,
        time_zone: str | None = "UTC",
        disk_mb: int | None = None,
    ) -> LocalCluster:
        ids = [f"n{i}" for i in range(1, nodes + 1)]
        network = None
        if netns:
            network = NetnsNetwork.create(ids, owner=str(directory))
            specs = [
                NodeSpec(i, network.members[i].ip, NETNS_HTTP_PORT, NETNS_RAFT_PORT, "")
                for i in ids
            ]
        else:
            ports = fixed or free_ports(2 * nodes)
            specs = [
                NodeSpec(i, "127.0.0.1", ports[2 * k], ports[2 * k + 1], "")
                for k, i in enumerate(ids)
            ]
        for s in specs:
            s.dir = str(directory / s.id)
            s.tz = time_zone
        cluster = cls(
            directory,
            engine,
            specs,
            rqlited=binary,
            rqlited_version=version,
            faketime=faketime,
            network=network,
            rqlited_settings=rqlited_settings,
            owner=owner,
            disk_mb=disk_mb,
        )
        try:
            cluster._save()
            for s in specs:
                Path(s.dir).mkdir(parents=True, exist_ok=True)
            if disk_mb:
                disks.make_all(directory, {s.id: str(s.data_dir) for s in specs}, disk_mb)
        except BaseException:
            cluster.stop()
            raise
        cluster._launch_all(specs, timeout, "half-started")
        return cluster

    def _launch_all(self, specs: list[NodeSpec], timeout: float, what: str) -> None:
        """Launch ``specs`` with their clocks at 0 and wait for a leader and every node
        ready; on any failure stop the cluster (``what`` names it in a failed stop)."""
        try:
            for s in specs:
                self._write_clock(s, 0.0)
                self._launch(s)
            self.wait_for_leader(timeout)
        except BaseException as exc:
            try:
                self.stop()
            except ClusterError as stop_exc:
                exc.add_note(f"and stopping the {what} cluster failed: {stop_exc}")
            raise

    @classmethod
    def restart_stopped(
        cls,
        directory: Path | str,
        timeout: float = 30.0,
        detached: bool = False,
    ) -> LocalCluster:
        """Start every node of the stopped cluster in ``directory`` again, on its data,
        ports and engine, and wait (``timeout``) for a leader and every node ready.
        Clock offsets restart at 0. The cluster is this process's now (``detached``:
        nobody's)."""
        cluster = cls.attach(directory)
        cluster.owner = None if detached else identity()
        specs = [s for s in cluster._specs.values() if s.state != "removed"]
        if any(cluster._alive(s) for s in specs):
            raise ClusterError(f"a cluster is already running in {cluster.directory}")
        if cluster._network is not None:
            raise ClusterError(
                f"{cluster.directory} holds a stopped --netns cluster, whose namespaces are "
                "gone: restarting one is not supported; start a new cluster in an empty directory"
            )
        require_free([p for s in specs for p in (s.http_port, s.raft_port)], specs[0].host)
        if cluster._disk_mb:
            disks.remount_all(cluster.directory, {s.id: str(s.data_dir) for s in specs})
        cluster._launch_all(specs, timeout, "half-restarted")
        return cluster

    @classmethod
    def revive_dead(
        cls, directory: Path | str, timeout: float = 30.0
    ) -> tuple[LocalCluster, list[str]]:
        """Start again, on their data, the members of the running cluster in ``directory``
        whose process is gone (killed by hand, crashed), and wait (``timeout``) for a
        leader and every node ready; returns the cluster and the ids started. Members
        that run are left alone; none started when every member runs."""
        cluster = cls.attach(directory)
        specs = [s for s in cluster._specs.values() if s.state != "removed"]
        if not any(cluster._alive(s) for s in specs):
            raise ClusterError(f"no node of the cluster in {cluster.directory} is running")
        dead = [s for s in specs if not cluster._alive(s)]
        with cluster._lock:
            for s in dead:
                require_free([s.http_port, s.raft_port], s.host)
                cluster._launch(s)
        if dead:
            cluster.wait_for_leader(timeout)
        return cluster, [s.id for s in dead]

    @classmethod
    def attach(cls, directory: Path | str) -> LocalCluster:
        """The cluster whose state is in ``directory`` (started by any process)."""
        directory = Path(directory).resolve()
        path = directory / STATE_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(f"no cluster in {directory} (missing {STATE_FILE})") from None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"cannot read {path}: {exc}") from exc
        try:
            specs = [NodeSpec(**n) for n in data["nodes"]]
            network = NetnsNetwork.from_json(data["netns"]) if data.get("netns") else None
            version = tuple(data["rqlited_version"]) if data.get("rqlited_version") else None
            return cls(
                directory,
                data["engine"],
                specs,
                rqlited=data.get("rqlited"),
                rqlited_version=version,  # type: ignore[arg-type]
                faketime=data.get("faketime"),
                network=network,
                partitioned=data.get("partitioned"),
                rqlited_settings=data.get("rqlited_settings"),
                owner=data.get("owner"),
                disk_mb=data.get("disk_mb"),
            )
        except (KeyError, TypeError) as exc:
            raise ClusterError(f"{path} is not a cluster state file: {exc!r}") from exc

    def _save(self) -> None:
        data = {
            "dir": str(self.directory),
            "engine": self.engine,
            "rqlited": self._rqlited,
            "rqlited_version": self._rqlited_version,
            "rqlited_settings": self._rqlited_settings,
            "faketime": self._faketime,
            "netns": self._network.to_json() if self._network else None,
            "partitioned": self._partitioned,
            "owner": self.owner,
            "disk_mb": self._disk_mb,
            "nodes": [asdict(s) for s in self._specs.values()],
        }
        path = self.directory / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, path)

    # -- processes ------------------------------------------------------------------------
    def _argv(self, spec: NodeSpec) -> list[str]:
        nodes = list(self._specs.values())
        if self.engine == "embedded":
            argv = embedded_argv(spec, nodes, module=self.node_module)
        else:
            assert self._rqlited and self._rqlited_version
            argv = rqlited_argv(
                self._rqlited, self._rqlited_version, spec, nodes, self._rqlited_settings
            )
        if self._network:
            argv = self._network.exec_prefix(spec.id) + argv
        return argv

    def _env(self, spec: NodeSpec) -> dict[str, str]:
        env = dict(os.environ)
        env[MARKER_ENV] = str(self.directory)
        env.pop(OWNER_ENV, None)
        if self.owner:
            env[OWNER_ENV] = self.owner
        root = str(Path(harness.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        if self.engine == "rqlited" and self._faketime:
            env.update(faketime_env(spec.clock_file, self._faketime))
        if spec.tz is not None:
            env["TZ"] = spec.tz
        return env

    def _launch(self, spec: NodeSpec) -> None:
        spec.data_dir.mkdir(parents=True, exist_ok=True)
        with open(spec.log_file, "ab") as log:
            log.write(
                f"--- starting {spec.id} at {time.strftime('%FT%TZ', time.gmtime())}\n".encode()
            )
            log.flush()
            proc = subprocess.Popen(
                self._argv(spec),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._env(spec),
                cwd=spec.dir,
                start_new_session=True,
            )
        with self._lock:
            self._procs[spec.id] = proc
            spec.pid = proc.pid
            spec.state = "running"
            self._save()

    def _alive(self, spec: NodeSpec) -> bool:
        if spec.pid is None:
            return False
        proc = self._procs.get(spec.id)
        if proc is not None and proc.pid == spec.pid:
            # our own child: no environ check (it reads empty while execve finishes)
            return proc.poll() is None
        return is_ours(spec.pid, str(self.directory))

    def _wait_gone(self, spec: NodeSpec, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._alive(spec):
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL)
        proc = self._procs.pop(spec.id, None)
        if proc is not None:
            proc.wait(timeout=1)
        return True

    def _spec(self, node_id: str) -> NodeSpec:
        try:
            return self._specs[node_id]
        except KeyError:
            raise ClusterError(
                f"no node {node_id!r} in this cluster (nodes: {', '.join(self._specs)})"
            ) from None

    # -- inspection -----------------------------------------------------------------------
    def nodes(self) -> list[NodeInfo]:
        """The members (a removed node is none: :mod:`harness.cluster.membership`)."""
        return [
            NodeInfo(s.id, s.url, s.pid if s.state in ("running", "paused") else None)
            for s in self._specs.values()
            if s.state != "removed"
        ]

    def node(self, node_id: str) -> NodeInfo:
        """One node by id."""
        s = self._spec(node_id)
        return NodeInfo(s.id, s.url, s.pid if s.state in ("running", "paused") else None)

    # -- hooks of Cluster.leader and Cluster.wait_for_leader -----------------------------
    ready_phrase = " and every running node ready"
    leader_poll = POLL

    def _live_nodes(self) -> list[NodeInfo]:
        """The running nodes: paused and killed ones are not waited for."""
        return [self.node(s.id) for s in self._specs.values() if s.state == "running"]

    def _raise_if_dead(self) -> None:
        """:class:`NodeDied` with the tail of its log if a node process died."""
        with self._lock:  # a node restarting right now (its old process gone) is no death
            self._check_processes()

    def _leader_wait_error(
        self, timeout: float, what: str, statuses: Sequence[NodeStatus]
    ) -> ClusterError:
        seen = "; ".join(st.summary() for st in statuses) or "no running nodes"
        return ClusterError(
            f"waited {timeout:.1f}s for {what} in {self.directory}, gave up. Nodes said: {seen}"
        )

    def _check_processes(self) -> None:
        for spec in self._specs.values():
            if spec.state in ("running", "paused") and not self._alive(spec):
                proc = self._procs.get(spec.id)
                code = proc.poll() if proc is not None else None
                tail = log_tail(spec.log_file)
                raise NodeDied(
                    f"node {spec.id} (pid {spec.pid}) died"
                    + (f" with exit status {code}" if code is not None else "")
                    + f"; last lines of {spec.log_file}:\n{tail}",
                    port_taken="address already in use" in tail.lower(),
                )

    def describe(self) -> dict:
        """The JSON printed by ``cluster up/status``: dir, engine, leader and nodes."""
        lead = self.leader()
        nodes = []
        for s in self._specs.values():
            nodes.append(
                {
                    "id": s.id,
                    "url": s.url,
                    "pid": s.pid if s.state in ("running", "paused") else None,
                    "state": s.state,
                    "alive": self._alive(s),
                }
            )
        return {
            "dir": str(self.directory),
            "engine": self.engine,
            "leader": lead.url if lead else None,
            "nodes": nodes,
            "netns": self._network is not None,
        }

    # -- faults ---------------------------------------------------------------------------
    def kill(self, node_id: str) -> None:
        """SIGKILL the node and wait (5 s at most) until its process is gone."""
        with self._lock:
            spec = self._spec(node_id)
            if spec.state not in ("running", "paused") or not self._alive(spec):
                raise ClusterError(f"cannot kill node {node_id}: it is not running ({spec.state})")
            send_signal(spec.pid, signal.SIGKILL)
            if not self._wait_gone(spec, 5.0):
                raise ClusterError(f"node {node_id} (pid {spec.pid}) still alive 5s after SIGKILL")
            spec.state = "killed"
            self._save()

    def restart(self, node_id: str) -> None:
        """Start a killed node again on its data directory (does not wait for it)."""
        with self._lock:
            spec = self._spec(node_id)
            if spec.state in ("running", "paused") and self._alive(spec):
                raise ClusterError(f"cannot restart node {node_id}: it is still {spec.state}")
            if spec.state in ("new", "stopped", "removed"):
                raise ClusterError(
                    f"cannot restart node {node_id}: it is {spec.state}"
                    + ("" if spec.state == "removed" else "; the cluster was stopped")
                )
            self._launch(spec)

    def pause(self, node_id: str) -> None:
        """SIGSTOP the node."""
        with self._lock:
            spec = self._spec(node_id)
            if spec.state != "running" or not self._alive(spec):
                raise ClusterError(f"cannot pause node {node_id}: it is not running ({spec.state})")
            send_signal(spec.pid, signal.SIGSTOP)
            spec.state = "paused"
            self._save()

    def resume(self, node_id: str) -> None:
        """SIGCONT a paused node."""
        with self._lock:
            spec = self._spec(node_id)
            if spec.state != "paused":
                raise ClusterError(f"cannot resume node {node_id}: it is not paused ({spec.state})")
            send_signal(spec.pid, signal.SIGCONT)
            spec.state = "running"
            self._save()

    #: partitions and links: only a cluster started with ``netns`` (root); disks: only one
    #: started with ``disk_mb``; membership: :meth:`membership_problem`; see
    #: :attr:`capabilities`
    CAPABILITIES = frozenset(
        {"kill", "pause", "partitions", "clock-skew", "time-zones", DISK, "links", "membership"}
    )

    @property
    def capabilities(self) -> frozenset[str]:
        lacks = (set() if self._network is not None else NETNS_CAPABILITIES) | (
            set() if self._disk_mb else {DISK}
        )
        if self.membership_problem() is not None:
            lacks.add("membership")
        return self.CAPABILITIES - lacks

    # -- lifecycle ------------------------------------------------------------------------
    def stop(self, grace: float = 2.0) -> None:
        """Stop every node (SIGTERM, SIGKILL after ``grace`` s), then remove the network.

        Idempotent; works on half-started clusters and on clusters attached from state.
        Data directories and logs stay.
        """
        with self._lock:
            survivors = []
            running = [s for s in self._specs.values() if self._alive(s)]
            for s in running:
                send_signal(s.pid, signal.SIGTERM)
                send_signal(s.pid, signal.SIGCONT)  # a paused node must run to handle SIGTERM
            deadline = time.monotonic() + grace
            for s in running:
                if not self._wait_gone(s, max(0.0, deadline - time.monotonic())):
                    send_signal(s.pid, signal.SIGKILL)
                    if not self._wait_gone(s, 5.0):
                        survivors.append(f"{s.id} (pid {s.pid})")
            for proc in self._procs.values():
                proc.poll()
            self._procs.clear()
            for s in self._specs.values():
                if s.state not in ("new", "removed"):
                    s.state = "stopped"
            if self._network is not None:
                self._partitioned = []  # the rules die with the namespaces
                if self._links is not None:
                    self._links.forget()
                self._network.teardown()
            self._sweep()
            if self.directory.is_dir():
                self._save()
            if survivors:
                raise ClusterError(f"nodes survived SIGKILL for 5s: {', '.join(survivors)}")

    def _sweep(self) -> None:
        """Kill node processes and remove networks of this directory the state missed.

        (A start interrupted between launching a node and saving its pid leaves one.)
        """
        kill_and_wait([pid for pid, d in our_processes() if d == str(self.directory)], 5.0)
        reap_networks(owner=str(self.directory))
        disks.release(self.directory)
