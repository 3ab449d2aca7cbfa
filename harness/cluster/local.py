"""Local clusters: rqlite-compatible nodes as detached processes on this machine.

::

    from harness.cluster.local import LocalCluster
    with LocalCluster.start(nodes=3, directory=Path("/tmp/c")) as c:
        c.leader(); c.kill("n1"); c.wait_for_leader(10); c.restart("n1")

Engines:

- ``"embedded"`` (default): our node, ``python -m harness.node`` (see docs/embedded-node.md).
- ``"rqlited"``: a real rqlite binary (``rqlited=PATH``, default the one on ``PATH``). Its
  flags depend on its version, read by running ``rqlited -version`` (never from the file's
  name): v8 and later take ``-bootstrap-expect N -join raft1,raft2,...``; v6/v7 start the
  first node alone and join the others over HTTP (``-join http://first``). Settings given
  as ``rqlited_settings`` (named as v10 names them) become the flags that version has:
  ``raft-heartbeat-timeout`` is ``-raft-timeout`` before v10, ``on-disk-path`` does not
  exist in v10. A version outside v6 to v10 is refused in one line, before any node starts.

Processes run in their own session, so ``python -m harness cluster up`` can exit and
leave them running. Everything about a cluster is kept in ``DIR/cluster.json``;
:meth:`LocalCluster.attach` reads it back from another process (``cluster status`` and
``cluster down --dir``). Per node: ``DIR/<id>/data`` (data directory), ``DIR/<id>/node.log``
(stdout and stderr, appended across restarts) and ``DIR/<id>/clock-offset``.

Every node process carries ``RQUEUE_CLUSTER_DIR=<DIR>`` in its environment (and inherits
``RQUEUE_REAP_TAG`` when the caller set one); that is how :func:`reap` recognises what
earlier runs left behind, and how a pid read from the state file is checked to still be
ours before it is signalled.

Node processes inherit the caller's environment, so ``RQUEUE_CLUSTER_SECRET`` (the cluster
secret that authenticates Raft, see docs/embedded-node.md) reaches every embedded node when
the caller sets it; loopback clusters, these included, need none.

Without ``netns`` nodes listen on free ports of 127.0.0.1 and :meth:`partition` raises
:class:`ClusterError`. With ``netns=True`` (root only) each node runs in its own network
namespace on a bridge (see :mod:`harness.cluster.netns`), on ports 4001 (HTTP) and 4002
(Raft) of its own 127.77.X.Y address, and partitions are iptables rules inside the
namespaces (:mod:`harness.cluster.partition`).

``base_port=P`` fixes the loopback ports instead: HTTP on P, P+10, P+20, ... and Raft on
the port after each (P=4001: 4001/4002, 4011/4012, ..., rqlite's default ports first).
:meth:`LocalCluster.restart_stopped` starts a stopped loopback cluster again on its data,
ports and engine.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import harness
from harness.cluster import partition as partition_rules
from harness.cluster.base import (
    Cluster,
    ClusterError,
    NodeInfo,
    NodeStatus,
    agreed_leader,
    probe_nodes,
)
from harness.cluster.netns import REAP_TAG_ENV, NetnsNetwork, reap_networks, require_root
from harness.cluster.netns import run as run_command

STATE_FILE = "cluster.json"
#: environment variable that marks a process as a node of the cluster in that directory
MARKER_ENV = "RQUEUE_CLUSTER_DIR"
ENGINES = ("embedded", "rqlited")
#: where Debian's libfaketime package puts the library
FAKETIME_GLOBS = (
    "/usr/lib/*/faketime/libfaketimeMT.so.1",  # the variant for multi-threaded programs
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/lib/*/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
)
NETNS_HTTP_PORT = 4001
NETNS_RAFT_PORT = 4002
_POLL = 0.05  # seconds between checks of a condition we wait for


#: how often :meth:`LocalCluster.start` picks new ports when one was taken under it
PORT_ATTEMPTS = 3
#: loopback clusters take ports from here up to the kernel's ephemeral range
PORT_FLOOR = 20000
#: with ``base_port``: node k's HTTP port is ``base_port + PORT_STEP * k``, Raft the next
PORT_STEP = 10


class NodeDied(ClusterError):
    """A node process exited on its own; the message ends with its log's last lines."""

    def __init__(self, message: str, port_taken: bool = False) -> None:
        super().__init__(message)
        self.port_taken = port_taken


# -- node description ----------------------------------------------------------------------
@dataclass
class NodeSpec:
    """Everything needed to (re)start one node; persisted in ``cluster.json``."""

    id: str
    host: str
    http_port: int
    raft_port: int
    dir: str
    pid: int | None = None
    state: str = "new"  # new | running | paused | killed | stopped

    @property
    def http_addr(self) -> str:
        return f"{self.host}:{self.http_port}"

    @property
    def raft_addr(self) -> str:
        return f"{self.host}:{self.raft_port}"

    @property
    def url(self) -> str:
        return f"http://{self.http_addr}"

    @property
    def data_dir(self) -> Path:
        return Path(self.dir) / "data"

    @property
    def log_file(self) -> Path:
        return Path(self.dir) / "node.log"

    @property
    def clock_file(self) -> Path:
        return Path(self.dir) / "clock-offset"


# -- argv building (pure) ------------------------------------------------------------------
def embedded_argv(
    node: NodeSpec,
    peers: Sequence[NodeSpec],
    python: str = sys.executable,
    module: str = "harness.node",
) -> list[str]:
    """The command line of our embedded node (contract: docs/embedded-node.md)."""
    argv = [python, "-m", module, "--node-id", node.id]
    argv += ["--http-addr", node.http_addr, "--raft-addr", node.raft_addr]
    for p in peers:
        if p.id != node.id:
            argv += ["--peer", f"{p.id},{p.raft_addr},{p.http_addr}"]
    argv += ["--data-dir", str(node.data_dir), "--clock-offset-file", str(node.clock_file)]
    return argv


#: rqlited prints ``rqlited VERSION GOOS GOARCH GOVERSION [sqliteX] (commit ..., branch ...,
#: compiler ...)`` for ``-version`` (v6/v7 on stdout, v8 and later on stderr)
_VERSION_LINE = re.compile(r"^rqlited\s+v?(\d+)\.(\d+)\.(\d+)\b", re.MULTILINE)
#: the rqlite major versions whose command lines the harness knows
RQLITED_MAJORS = range(6, 11)
#: settings the harness can give rqlited (named as v10 names the flags) -> the flag each
#: major version has for it (None: that version has none; v6/v7 need -on-disk with it)
RQLITED_SETTINGS: dict[str, dict[int, str | None]] = {
    "raft-heartbeat-timeout": {
        6: "-raft-timeout", 7: "-raft-timeout", 8: "-raft-timeout", 9: "-raft-timeout",
        10: "-raft-heartbeat-timeout",
    },
    "raft-election-timeout": dict.fromkeys(RQLITED_MAJORS, "-raft-election-timeout"),
    "on-disk-path": {
        6: "-on-disk-path", 7: "-on-disk-path", 8: "-on-disk-path", 9: "-on-disk-path",
        10: None,
    },
}  # fmt: skip


def parse_rqlited_version(text: str) -> tuple[int, int, int]:
    """``rqlited -version`` output (``rqlited v10.2.7 linux amd64 go1.24.4 sqlite3.50.1
    (commit ..., branch ..., compiler gc)``) → (10, 2, 7). Only a line rqlited itself
    printed counts: a version in a path or an error message is not read."""
    m = _VERSION_LINE.search(text)
    if not m:
        raise ClusterError(f"cannot read a version from `rqlited -version` output: {text!r}")
    return int(m[1]), int(m[2]), int(m[3])


def check_rqlited_version(version: tuple[int, int, int]) -> None:
    """One clear line for a version whose command line the harness does not know."""
    shown = ".".join(map(str, version))
    if version[0] < RQLITED_MAJORS.start:
        raise ClusterError(f"rqlited {shown} is too old; need v6 or later")
    if version[0] not in RQLITED_MAJORS:
        raise ClusterError(
            f"rqlited {shown} is newer than the versions this harness knows the flags of "
            f"(v{RQLITED_MAJORS.start} to v{RQLITED_MAJORS.stop - 1}); use one of those, "
            "or the embedded engine"
        )


def rqlited_setting_flags(version: tuple[int, int, int], settings: dict[str, str]) -> list[str]:
    """``settings`` (v10 names -> values) as the flags this version has; a clear error for
    a setting it lacks or the harness does not know."""
    major, argv = version[0], []
    for name, value in settings.items():
        if name not in RQLITED_SETTINGS:
            raise ClusterError(
                f"unknown rqlited setting {name!r}; known: {', '.join(RQLITED_SETTINGS)}"
            )
        flag = RQLITED_SETTINGS[name][major]
        if flag is None:
            raise ClusterError(f"rqlited {'.'.join(map(str, version))} has no setting {name!r}")
        if name == "on-disk-path" and major < 8:
            argv.append("-on-disk")  # before v8 the path needs the on-disk mode
        argv += [flag, value]
    return argv


def rqlited_argv(
    binary: str,
    version: tuple[int, int, int],
    node: NodeSpec,
    nodes: Sequence[NodeSpec],
    settings: dict[str, str] | None = None,
) -> list[str]:
    """The command line for one ``rqlited`` node of a static cluster of ``nodes``.

    v8+: every node gets ``-bootstrap-expect N -join`` with all Raft addresses (a node
    restarted with existing state just rejoins). v6/v7: the first node starts alone, the
    others ``-join`` the first node's HTTP URL (ignored when they already have state).
    ``settings``: see :data:`RQLITED_SETTINGS`.
    """
    check_rqlited_version(version)
    major = version[0]
    argv = [binary, "-node-id", node.id, "-http-addr", node.http_addr]
    argv += ["-raft-addr", node.raft_addr]
    if len(nodes) > 1:
        if major >= 8:
            argv += ["-bootstrap-expect", str(len(nodes))]
            argv += ["-join", ",".join(n.raft_addr for n in nodes)]
        elif node.id != nodes[0].id:
            argv += ["-join", nodes[0].url]
    argv += rqlited_setting_flags(version, settings or {})
    argv.append(str(node.data_dir))
    return argv


def faketime_env(clock_file: Path, library: str) -> dict[str, str]:
    """Environment that makes libfaketime read the wall-clock offset from ``clock_file``."""
    return {
        "LD_PRELOAD": library,
        "FAKETIME_TIMESTAMP_FILE": str(clock_file),
        "FAKETIME_NO_CACHE": "1",  # re-read the file on every clock reading
        # monotonic clocks are shifted too: FAKETIME_DONT_FAKE_MONOTONIC=1 makes
        # clock_nanosleep(TIMER_ABSTIME) fail with EINVAL; Go's runtime timers bypass libc
    }


def faketime_offset(seconds: float) -> str:
    """An offset in libfaketime's relative format, e.g. ``+2.500000`` or ``-30.000000``."""
    return f"{seconds:+.6f}"


def find_faketime() -> str | None:
    """The libfaketime shared library, if installed."""
    import glob

    for pattern in FAKETIME_GLOBS:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[0]
    return None


def is_dynamic_executable(path: str) -> bool:
    """Whether LD_PRELOAD can reach the program: not a statically linked ELF file.

    Scripts count as dynamic (their interpreter is); an ELF file must name a loader.
    """
    with open(path, "rb") as f:
        head = f.read(8192)
    if not head.startswith(b"\x7fELF"):
        return True
    return b"ld-linux" in head or b"ld-musl" in head


def rqlited_version(binary: str) -> tuple[int, int, int]:
    """Run ``rqlited -version`` and parse what it printed (whatever the file is called)."""
    try:
        out = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ClusterError(f"cannot run {binary} -version: {exc}") from exc
    if out.returncode != 0:
        first = (out.stderr or out.stdout).strip().splitlines()[:1]
        raise ClusterError(
            f"`{binary} -version` failed (exit {out.returncode}): {first[0] if first else ''}"
        )
    return parse_rqlited_version(out.stdout + "\n" + out.stderr)


def resolve_rqlited(path: str | os.PathLike | None) -> str:
    """The rqlited binary to run: ``path`` or the one on PATH; a clear error if missing."""
    if path is None:
        found = shutil.which("rqlited")
        if not found:
            raise ClusterError(
                "engine 'rqlited' needs the rqlited binary: none on PATH; install rqlite "
                "(https://rqlite.io) or pass --rqlited PATH"
            )
        return found
    p = Path(path)
    if not p.is_file() or not os.access(p, os.X_OK):
        raise ClusterError(f"rqlited binary {str(p)!r} does not exist or is not executable")
    return str(p.resolve())


# -- processes -----------------------------------------------------------------------------
def ephemeral_port_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux default 32768-60999)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that were free on ``host`` a moment ago.

    They are drawn from below the ephemeral range (``PORT_FLOOR`` up to it), so that a
    killed node's port is not handed to some client's outgoing connection before the
    node restarts on it; only when that range is too small does the kernel pick.
    """
    low, _ = ephemeral_port_range()
    candidates = list(range(PORT_FLOOR, low))
    random.shuffle(candidates)
    socks: list[socket.socket] = []
    try:
        for port in candidates:
            if len(socks) == count:
                break
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((host, port))  # no SO_REUSEADDR: lingering connections count as busy
            except OSError:
                s.close()
                continue
            socks.append(s)
        while len(socks) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def fixed_ports(base_port: int, count: int) -> list[int]:
    """HTTP and Raft port of ``count`` nodes from ``base_port``: ``[P, P+1, P+10, P+11, ...]``."""
    if isinstance(base_port, bool) or not isinstance(base_port, int) or base_port < 1:
        raise ClusterError(f"base port must be a positive integer, got {base_port!r}")
    last = base_port + PORT_STEP * (count - 1) + 1
    if last > 65535:
        raise ClusterError(
            f"base port {base_port} leaves no room for {count} nodes (the last Raft port "
            f"would be {last}; ports end at 65535)"
        )
    return [base_port + PORT_STEP * k + d for k in range(count) for d in (0, 1)]


def busy_ports(ports: Iterable[int], host: str = "127.0.0.1") -> list[int]:
    """Those of ``ports`` that a server cannot bind on ``host`` right now (with
    SO_REUSEADDR, as every node sets it: a stopped node's lingering connections do not
    count, a listening socket does)."""
    busy = []
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                busy.append(port)
    return busy


def process_environ(pid: int) -> dict[str, str] | None:
    """The environment of a live (non-zombie) process, or None if gone or unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return None
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except (OSError, IndexError):
        return None
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def is_ours(pid: int, directory: str) -> bool:
    """Whether ``pid`` is alive and a node of the cluster in ``directory``."""
    env = process_environ(pid)
    return env is not None and env.get(MARKER_ENV) == directory


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file (or a note that there is none)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    tail = text.splitlines()[-lines:]
    return "\n".join(f"    {line}" for line in tail) or "    (log is empty)"


def _require_free(ports: Sequence[int], host: str = "127.0.0.1") -> None:
    busy = busy_ports(ports, host)
    if busy:
        raise ClusterError(
            f"port{'s' if len(busy) > 1 else ''} {', '.join(map(str, busy))} on {host} "
            "already in use (another cluster? `python -m harness cluster down --all` reaps "
            "this project's leftovers); free them or choose another --base-port"
        )


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


# -- the cluster ---------------------------------------------------------------------------
class LocalCluster(Cluster):
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
    ) -> None:
        self.directory = Path(directory).resolve()
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
    ) -> LocalCluster:
        """Start ``nodes`` nodes and wait (``timeout``) for a leader and every node ready.

        ``base_port``: fixed loopback ports (see the module docstring) instead of free ones.
        ``rqlited_settings``: engine ``rqlited`` only, see :data:`RQLITED_SETTINGS`.
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
            _require_free(ports)
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
                    rqlited_settings,
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
        cluster = cls(
            directory,
            engine,
            specs,
            rqlited=binary,
            rqlited_version=version,
            faketime=faketime,
            network=network,
            rqlited_settings=rqlited_settings,
        )
        try:
            cluster._save()
            for s in specs:
                Path(s.dir).mkdir(parents=True, exist_ok=True)
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
    ) -> LocalCluster:
        """Start every node of the stopped cluster in ``directory`` again, on its data,
        ports and engine, and wait (``timeout``) for a leader and every node ready.
        Clock offsets restart at 0."""
        cluster = cls.attach(directory)
        specs = list(cluster._specs.values())
        if any(cluster._alive(s) for s in specs):
            raise ClusterError(f"a cluster is already running in {cluster.directory}")
        if cluster._network is not None:
            raise ClusterError(
                f"{cluster.directory} holds a stopped --netns cluster, whose namespaces are "
                "gone: restarting one is not supported; start a new cluster in an empty directory"
            )
        _require_free([p for s in specs for p in (s.http_port, s.raft_port)], specs[0].host)
        cluster._launch_all(specs, timeout, "half-restarted")
        return cluster

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
        root = str(Path(harness.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        if self.engine == "rqlited" and self._faketime:
            env.update(faketime_env(spec.clock_file, self._faketime))
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
            time.sleep(_POLL)
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
        return [
            NodeInfo(s.id, s.url, s.pid if s.state in ("running", "paused") else None)
            for s in self._specs.values()
        ]

    def node(self, node_id: str) -> NodeInfo:
        """One node by id."""
        s = self._spec(node_id)
        return NodeInfo(s.id, s.url, s.pid if s.state in ("running", "paused") else None)

    def _probe(self, timeout: float) -> list[tuple[NodeSpec, NodeStatus]]:
        live = [s for s in self._specs.values() if s.state == "running"]
        return list(zip(live, probe_nodes([s.url for s in live], timeout), strict=True))

    def leader(self, timeout: float = 1.0) -> NodeInfo | None:
        """The node a majority of the cluster's nodes agree is leader (probed via /status)."""
        probed = self._probe(timeout)
        lead = agreed_leader([st for _, st in probed], len(self._specs))
        if lead is None:
            return None
        for spec, st in probed:
            if st is lead:
                return self.node(spec.id)
        return None

    def wait_for_leader(
        self, timeout: float, *, all_ready: bool = True, exclude: Iterable[str] = ()
    ) -> NodeInfo:
        """Wait until an agreed leader exists and (``all_ready``) every running node is ready.

        Paused and killed nodes are not waited for. Pass ``all_ready=False`` while a
        partition cuts nodes off, and ``exclude`` to wait for a leader other than those
        nodes (right after a fault the others may still name the old leader). Raises
        :class:`ClusterError` with what each node said, or with the tail of its log if a
        node process died.
        """
        exclude = set(exclude)
        deadline = time.monotonic() + timeout
        while True:
            self._check_processes()
            probed = self._probe(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
            lead = agreed_leader([st for _, st in probed], len(self._specs))
            if (
                lead is not None
                and lead.node_id not in exclude
                and (not all_ready or all(st.ready for _, st in probed))
            ):
                return next(self.node(sp.id) for sp, st in probed if st is lead)
            if time.monotonic() >= deadline:
                what = "an agreed leader" + (f" other than {sorted(exclude)}" if exclude else "")
                what += " and every running node ready" if all_ready else ""
                seen = "; ".join(st.summary() for _, st in probed) or "no running nodes"
                raise ClusterError(
                    f"waited {timeout:.1f}s for {what} in {self.directory}, "
                    f"gave up. Nodes said: {seen}"
                )
            time.sleep(_POLL)

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
            _signal(spec.pid, signal.SIGKILL)
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
            if spec.state in ("new", "stopped"):
                raise ClusterError(
                    f"cannot restart node {node_id}: the cluster was stopped; start a new one"
                )
            self._launch(spec)

    def pause(self, node_id: str) -> None:
        """SIGSTOP the node."""
        with self._lock:
            spec = self._spec(node_id)
            if spec.state != "running" or not self._alive(spec):
                raise ClusterError(f"cannot pause node {node_id}: it is not running ({spec.state})")
            _signal(spec.pid, signal.SIGSTOP)
            spec.state = "paused"
            self._save()

    def resume(self, node_id: str) -> None:
        """SIGCONT a paused node."""
        with self._lock:
            spec = self._spec(node_id)
            if spec.state != "paused":
                raise ClusterError(f"cannot resume node {node_id}: it is not paused ({spec.state})")
            _signal(spec.pid, signal.SIGCONT)
            spec.state = "running"
            self._save()

    @property
    def supports_partitions(self) -> bool:
        return self._network is not None

    def partition(self, components: Iterable[Iterable[str]]) -> None:
        """Cut the network between components (see :mod:`harness.cluster.partition`).

        Any earlier partition is healed first. Needs a cluster started with ``netns=True``.
        """
        if self._network is None:
            raise ClusterError(
                "partitions need each node in its own network namespace: start the cluster "
                "with netns=True (--netns, root only) or use the Docker backend"
            )
        addresses = {i: s.host for i, s in self._specs.items()}
        try:
            rules = partition_rules.apply_rules(components, addresses)
        except ValueError as exc:
            raise ClusterError(str(exc)) from exc
        with self._lock:
            self.heal()
            self._partitioned = list(rules)  # saved first: a crash mid-way can still heal
            self._save()
            try:
                self._run_rules(rules, check=True)
            except BaseException:
                self.heal()
                raise

    def heal(self) -> None:
        """Remove exactly the rules :meth:`partition` added; nothing when there are none."""
        if self._network is None:
            return
        with self._lock:
            # a half-applied partition may lack some of these: ignore "not found"
            self._run_rules(partition_rules.heal_rules(self._partitioned), check=False)
            self._partitioned = []
            self._save()

    def _run_rules(self, rules: dict[str, list[list[str]]], check: bool) -> None:
        """Run each node's iptables argv lists in order, the nodes in parallel."""
        net = self._network
        assert net is not None

        def one_node(node_id: str) -> None:
            for argv in rules[node_id]:
                run_command(net.exec_prefix(node_id) + argv, check=check)

        if rules:
            with ThreadPoolExecutor(max_workers=len(rules)) as pool:
                for future in [pool.submit(one_node, n) for n in rules]:
                    future.result()

    def set_clock_offset(self, node_id: str, seconds: float) -> None:
        """Make the node's wall clock read ``seconds`` ahead (negative: behind).

        Embedded engine: writes the float to the node's ``--clock-offset-file``; the node
        re-reads it when the file changes and adds it to every wall-clock reading,
        including the "now" it writes into SQL.

        rqlited engine: the node was started with libfaketime preloaded
        (``LD_PRELOAD``, ``FAKETIME_TIMESTAMP_FILE`` = this file, ``FAKETIME_NO_CACHE=1``);
        the offset is written in libfaketime's format (``+2.500000``) and read on every
        libc clock call. That shifts what C code in the process sees
        (SQLite's own ``'now'``) but not Go's runtime clock, which bypasses libc: rqlite
        ≥ 8.33 rewrites ``now`` with Go's clock, so there the skew does not reach SQL.
        A statically linked rqlited cannot be preloaded at all; that raises.
        """
        if not isinstance(seconds, int | float) or not math.isfinite(seconds):
            raise ClusterError(f"clock offset must be a finite number of seconds, got {seconds!r}")
        spec = self._spec(node_id)
        if self.engine == "rqlited":
            if not self._faketime:
                raise ClusterError(
                    "skewing an rqlited node's clock needs libfaketime "
                    "(apt-get install libfaketime) when the cluster starts"
                )
            if self._rqlited and not is_dynamic_executable(self._rqlited):
                raise ClusterError(
                    f"{self._rqlited} is statically linked; libfaketime (LD_PRELOAD) "
                    "cannot change its clock"
                )
        self._write_clock(spec, float(seconds))

    def _write_clock(self, spec: NodeSpec, seconds: float) -> None:
        text = faketime_offset(seconds) if self.engine == "rqlited" else repr(seconds)
        tmp = spec.clock_file.with_suffix(".tmp")
        tmp.write_text(text + "\n")
        os.replace(tmp, spec.clock_file)

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
                _signal(s.pid, signal.SIGTERM)
                _signal(s.pid, signal.SIGCONT)  # a paused node must run to handle SIGTERM
            deadline = time.monotonic() + grace
            for s in running:
                if not self._wait_gone(s, max(0.0, deadline - time.monotonic())):
                    _signal(s.pid, signal.SIGKILL)
                    if not self._wait_gone(s, 5.0):
                        survivors.append(f"{s.id} (pid {s.pid})")
            for proc in self._procs.values():
                proc.poll()
            self._procs.clear()
            for s in self._specs.values():
                if s.state != "new":
                    s.state = "stopped"
            if self._network is not None:
                self._partitioned = []  # the rules die with the namespaces
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
        strays = [pid for pid, d in our_processes() if d == str(self.directory)]
        for pid in strays:
            _signal(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        for pid in strays:
            while process_environ(pid) is not None and time.monotonic() < deadline:
                time.sleep(_POLL)
        reap_networks(owner=str(self.directory))


# -- reaping -------------------------------------------------------------------------------
def our_processes(tag: str | None = None) -> list[tuple[int, str]]:
    """(pid, cluster dir) of every live node process started by this module.

    With ``tag``, only those whose environment has ``RQUEUE_REAP_TAG=tag``.
    """
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        env = process_environ(int(entry.name))
        if not env or MARKER_ENV not in env:
            continue
        if tag is not None and env.get(REAP_TAG_ENV) != tag:
            continue
        found.append((int(entry.name), env[MARKER_ENV]))
    return found


def reap(tag: str | None = None, timeout: float = 5.0) -> dict:
    """SIGKILL node processes and remove networks that earlier runs left behind.

    Without ``tag`` this takes *every* cluster started by this module on the machine
    (other users' too); with ``tag`` only what was started under ``RQUEUE_REAP_TAG=tag``.
    Returns ``{"processes": [pid, ...], "networks": [name, ...]}``.
    """
    procs = our_processes(tag)
    for pid, _ in procs:
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    for pid, _ in procs:
        while process_environ(pid) is not None and time.monotonic() < deadline:
            time.sleep(_POLL)
    networks = reap_networks(tag)
    return {"processes": [pid for pid, _ in procs], "networks": networks}
