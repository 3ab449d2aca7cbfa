"""The node processes of local clusters, as /proc shows them: finding, signalling, reaping.

Every node process carries ``RQUEUE_CLUSTER_DIR=<DIR>`` (:data:`MARKER_ENV`) in its
environment, its owner's identity (``RQUEUE_CLUSTER_OWNER``, :mod:`harness.cluster.owners`)
unless ``cluster up`` started it, and inherits ``RQUEUE_REAP_TAG`` when the caller set
one; that is how :func:`reap` recognises what earlier runs left behind (and tells it from
clusters someone may still be using), and how a pid read from a state file is checked to
still be a node of that cluster (:func:`is_ours`) before it is signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harness.cluster import disk
from harness.cluster.netns import NetnsNetwork, reap_networks
from harness.cluster.owners import OWNER_ENV, REAP_TAG_ENV, describe_owner, owner_gone

#: environment variable that marks a process as a node of the cluster in that directory
MARKER_ENV = "RQUEUE_CLUSTER_DIR"
POLL = 0.05  # seconds between checks of a condition we wait for


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


def send_signal(pid: int, sig: int) -> None:
    """Signal ``pid``; nothing if it is already gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def kill_and_wait(pids: Iterable[int], timeout: float) -> None:
    """SIGKILL every pid, then wait (``timeout`` s in all) until each is gone."""
    pids = list(pids)
    for pid in pids:
        send_signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    for pid in pids:
        while process_environ(pid) is not None and time.monotonic() < deadline:
            time.sleep(POLL)


# -- reaping -------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeProcess:
    """A live node process of a local cluster, as its environment describes it."""

    pid: int
    directory: str
    owner: str | None  # the owner's identity; None: nobody owns it (``cluster up``)
    tag: str | None


def node_processes(tag: str | None = None) -> list[NodeProcess]:
    """Every live node process started by a local cluster on this machine (with ``tag``:
    only those whose environment has ``RQUEUE_REAP_TAG=tag``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        env = process_environ(int(entry.name))
        if not env or MARKER_ENV not in env:
            continue
        if tag is not None and env.get(REAP_TAG_ENV) != tag:
            continue
        found.append(
            NodeProcess(int(entry.name), env[MARKER_ENV], env.get(OWNER_ENV), env.get(REAP_TAG_ENV))
        )
    return found


def our_processes(tag: str | None = None) -> list[tuple[int, str]]:
    """(pid, cluster dir) of every live node process started by a local cluster.

    With ``tag``, only those whose environment has ``RQUEUE_REAP_TAG=tag``.
    """
    return [(p.pid, p.directory) for p in node_processes(tag)]


@dataclass
class LiveCluster:
    """A cluster :func:`reap` left alone: someone may be using it."""

    directory: str
    why: str
    pids: list[int] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"dir": self.directory, "pids": self.pids, "why": self.why}


def reap(tag: str | None = None, timeout: float = 5.0, *, live_too: bool = False) -> dict:
    """SIGKILL node processes and remove networks that earlier runs left behind.

    Only what is provably abandoned: node processes whose owner is gone
    (:func:`harness.cluster.owners.owner_gone`), and netns networks whose maker is gone
    and whose cluster has no live node. ``live_too`` takes every cluster as well, live
    ones, ones ``cluster up`` started and other users' included. ``tag``: only what was
    started under ``RQUEUE_REAP_TAG=tag``. Nodes' filesystems (:mod:`harness.cluster.disk`) go with
    their reaped nodes, and without ``tag`` those of every abandoned cluster directory.
    Returns ``{"processes": [pid, ...], "networks": [name, ...], "disks": [mount or
    device, ...], "left": [{"dir", "pids", "why"}, ...]}`` (``left``: the live clusters
    it did not touch).
    """
    found = node_processes(tag)
    doomed = [p for p in found if live_too or owner_gone(p.owner)]
    kill_and_wait([p.pid for p in doomed], timeout)
    left: dict[str, LiveCluster] = {}
    for p in found:
        if p not in doomed:
            left.setdefault(p.directory, LiveCluster(p.directory, describe_owner(p.owner)))
            left[p.directory].pids.append(p.pid)

    def in_use(net: NetnsNetwork) -> bool:
        if not owner_gone(net.creator):
            return True  # being built, or by an unknown maker: not provably abandoned
        return any(p.directory == net.owner for p in node_processes())

    networks = reap_networks(tag, keep=None if live_too else in_use)
    disks = disk.reap({p.directory for p in doomed}, set(left), tag is None, live_too)
    return {
        "processes": [p.pid for p in doomed],
        "networks": networks,
        "disks": disks,
        "left": [c.to_json() for c in left.values()],
    }
