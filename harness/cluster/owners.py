"""Who is in charge of a cluster, and whether that process is provably gone.

``python -m harness cluster down --all`` reaps only clusters that nobody can be using:
those whose owner, the process that started them and stops them when it is done (a run,
a test, a benchmark), is gone. A cluster carries its owner's identity: in its node
processes' environment (``RQUEUE_CLUSTER_OWNER``, :data:`OWNER_ENV`), on its containers,
network and volumes (the label ``io.rqueue.owner``), in its netns network's record.

A cluster started by ``python -m harness cluster up`` has no owner: it is meant to
outlive the command, its directory names it, and only ``cluster down --dir DIR`` (or the
explicit ``--all --yes-kill-live``) stops it. The same holds for the compose file's
stack and for clusters made before owners were recorded.

An identity is ``HOST:BOOT:PID:START``: the host's name, the kernel's boot id, the
process id and its start time in clock ticks since boot (field 22 of ``/proc/PID/stat``),
so that a process id the kernel gave to another process since is not taken for the owner.
An identity from another host is never judged gone: this host cannot see its processes.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

#: environment variable of a local cluster's node processes: their owner's identity
OWNER_ENV = "RQUEUE_CLUSTER_OWNER"
#: environment variable whose value tags what a test session or run started (every
#: backend records it, and ``cluster down --all --tag TAG`` reaps by it)
REAP_TAG_ENV = "RQUEUE_REAP_TAG"
PROC = Path("/proc")


def _boot_id(proc: Path = PROC) -> str:
    try:
        return (proc / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _start_ticks(pid: int, proc: Path = PROC) -> str | None:
    """The process's start time (clock ticks after boot), or None when there is none."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
    return fields[19] if len(fields) > 19 else None  # field 22 of the whole line


def identity(pid: int | None = None, proc: Path = PROC) -> str:
    """The identity of process ``pid`` (default: this one), ``HOST:BOOT:PID:START``."""
    pid = os.getpid() if pid is None else pid
    start = _start_ticks(pid, proc)
    if start is None:
        raise ProcessLookupError(f"no process {pid}")
    return f"{socket.gethostname()}:{_boot_id(proc)}:{pid}:{start}"


def owner_gone(owner: str | None, proc: Path = PROC) -> bool:
    """True only when ``owner`` names a process of this host that no longer runs: the
    host was restarted since, or no process has its id, or the one that has it started
    at another time. No owner, an identity of another host or one that cannot be read:
    False (not provably gone)."""
    if not owner:
        return False
    parts = owner.rsplit(":", 3)
    if len(parts) != 4 or not parts[2].isdigit():
        return False
    host, boot, pid, start = parts
    if host != socket.gethostname():
        return False
    if boot != _boot_id(proc):
        return True
    return _start_ticks(int(pid), proc) != start


def describe_owner(owner: str | None) -> str:
    """A few words on whose a cluster is, for the list of what ``down --all`` left."""
    if not owner:
        return "no owner (started by `cluster up`, compose, or an older harness)"
    parts = owner.rsplit(":", 3)
    pid = parts[2] if len(parts) == 4 else "?"
    if len(parts) == 4 and parts[0] != socket.gethostname():
        return f"owned by pid {pid} on another host ({parts[0]})"
    return f"owned by pid {pid}, still running"
