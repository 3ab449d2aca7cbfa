"""The node processes of local clusters, as /proc shows them: finding, signalling, reaping.

Every node process carries ``RQUEUE_CLUSTER_DIR=<DIR>`` (:data:`MARKER_ENV`) in its
environment, and inherits ``RQUEUE_REAP_TAG`` when the caller set one; that is how
:func:`reap` recognises what earlier runs left behind, and how a pid read from a state
file is checked to still be a node of that cluster (:func:`is_ours`) before it is
signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

from harness.cluster.netns import REAP_TAG_ENV, reap_networks

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
def our_processes(tag: str | None = None) -> list[tuple[int, str]]:
    """(pid, cluster dir) of every live node process started by a local cluster.

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

    Without ``tag`` this takes *every* local cluster on the machine (other users' too);
    with ``tag`` only what was started under ``RQUEUE_REAP_TAG=tag``.
    Returns ``{"processes": [pid, ...], "networks": [name, ...]}``.
    """
    pids = [pid for pid, _ in our_processes(tag)]
    kill_and_wait(pids, timeout)
    networks = reap_networks(tag)
    return {"processes": pids, "networks": networks}
