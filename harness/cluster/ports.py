"""The host ports of a cluster: free ones, fixed ones from a base, busy ones.

Free ports (a local cluster's, and the host ports a Docker cluster publishes on its bind
address) are drawn from below the kernel's ephemeral range, so that a killed node's
port is not handed to some client's outgoing connection before the node restarts on it.
With a base port P, node k listens on P + 10k (HTTP) and the port after it (Raft).
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterable, Sequence
from pathlib import Path

from harness.cluster.base import ClusterError

#: loopback clusters take ports from here up to the kernel's ephemeral range
PORT_FLOOR = 20000
#: with ``base_port``: node k's HTTP port is ``base_port + PORT_STEP * k``, Raft the next
PORT_STEP = 10


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


def require_free(ports: Sequence[int], host: str = "127.0.0.1") -> None:
    """A clear error naming those of ``ports`` already in use on ``host``, if any."""
    busy = busy_ports(ports, host)
    if busy:
        raise ClusterError(
            f"port{'s' if len(busy) > 1 else ''} {', '.join(map(str, busy))} on {host} "
            "already in use (by another program, or a cluster: `python -m harness cluster "
            "down --dir DIR` stops one of yours); free them or choose another --base-port"
        )
