"""The node's command-line flags (modelled on rqlited's) and their validation.

Also the rule for listening beyond this machine: PySyncObj unpickles what arrives on the
Raft port, so a node whose Raft or HTTP address is not a loopback address must be given a
cluster secret (``--cluster-secret-file`` or :data:`SECRET_ENV`), which PySyncObj uses to
authenticate and encrypt every Raft message (see docs/embedded-node.md).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import versions

#: environment variable holding the cluster secret (``--cluster-secret-file`` wins)
SECRET_ENV = "RQUEUE_CLUSTER_SECRET"


@dataclass(frozen=True)
class Peer:
    """Another member of the static cluster."""

    node_id: str
    raft_addr: str  # host:port
    http_addr: str  # host:port, as it advertises it (API addresses, redirects)
    reach_addr: str = ""  # host:port this node reaches its HTTP API at, if not http_addr

    @property
    def reach(self) -> str:
        """Where to forward requests and send probes to."""
        return self.reach_addr or self.http_addr


@dataclass(frozen=True)
class NodeConfig:
    node_id: str
    http_addr: str
    raft_addr: str
    data_dir: Path
    peers: tuple[Peer, ...] = field(default_factory=tuple)
    http_adv_addr: str = ""  # the HTTP address others are told, if not http_addr (bound)
    clock_offset_file: Path | None = None
    apply_timeout: float = 10.0  # how long a request waits for its log entry's outcome
    compaction_entries: int = 20000  # snapshot the database once the log holds this many
    compaction_bytes: int = 64 * 1024 * 1024  # ... or once its journal holds this many bytes
    #: authenticates (and encrypts) Raft traffic; every member must have the same one
    cluster_secret: bytes | None = field(default=None, repr=False)
    rqlite_version: str = versions.DEFAULT  # the rqlite release the node follows
    foreign_keys: bool = False  # SQLite enforces foreign keys (rqlited's -fk)
    #: HTTP addresses of members to join through, for a node added to a running cluster
    join: tuple[str, ...] = ()

    @property
    def http_advertised(self) -> str:
        """The HTTP address this node tells others and names in ``X-RQLITE-SERVED-BY``
        (rqlited's ``cfg.HTTPAdv``: ``-http-adv-addr``, else the bound address)."""
        return self.http_adv_addr or self.http_addr

    @property
    def members(self) -> tuple[Peer, ...]:
        """Every member, this node included (as advertised)."""
        return (
            Peer(self.node_id, self.raft_addr, self.http_advertised, self.http_addr),
            *self.peers,
        )

    def by_raft_addr(self, raft_addr: str) -> Peer | None:
        return next((p for p in self.members if p.raft_addr == raft_addr), None)


def _host_port(flag: str, value: str) -> str:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{flag} must be HOST:PORT, got {value!r}")
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        if not host.replace("-", "").replace(".", "").isalnum():
            raise argparse.ArgumentTypeError(f"{flag} has a bad host in {value!r}") from None
    return value


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (an address, ``[v6]``, or a name: all it resolves to) is loopback."""
    host = host.strip("[]")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return False  # unresolvable: cannot be shown to stay on this machine
        return bool(infos) and all(is_loopback_host(str(info[4][0])) for info in infos)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def exposure_refusal(cfg: NodeConfig) -> str | None:
    """Why the node must not start (one line), or None: listening beyond loopback needs a
    cluster secret, since anyone who reaches the Raft port could otherwise run code here."""
    if cfg.cluster_secret is not None:
        return None
    for flag, addr in (("--raft-addr", cfg.raft_addr), ("--http-addr", cfg.http_addr)):
        if not is_loopback_host(addr.rpartition(":")[0]):
            return (
                f"refusing to listen on {addr} ({flag}) without a cluster secret: it is not "
                "a loopback address, and an unauthenticated Raft peer can run code in the "
                f"node; give every node the same secret with --cluster-secret-file PATH or "
                f"the {SECRET_ENV} environment variable"
            )
    return None


def read_secret(path: Path | None, environ: Mapping[str, str]) -> bytes | None:
    """The cluster secret: the file's bytes if given, else the environment variable's;
    surrounding whitespace (a trailing newline) is not part of it. Raises ValueError
    when it is given but empty or unreadable."""
    if path is not None:
        try:
            secret = path.read_bytes().strip()
        except OSError as exc:
            raise ValueError(
                f"cannot read --cluster-secret-file {path}: {exc.strerror or exc}"
            ) from None
        if not secret:
            raise ValueError(f"--cluster-secret-file {path} is empty")
        return secret
    value = environ.get(SECRET_ENV)
    if value is None:
        return None
    if not value.strip():
        raise ValueError(f"{SECRET_ENV} is set but empty")
    return value.strip().encode("utf-8", "surrogateescape")


def _peer(value: str) -> Peer:
    parts = value.split(",")
    if len(parts) != 3 or not parts[0]:
        raise argparse.ArgumentTypeError(f"--peer must be ID,RAFT_ADDR,HTTP_ADDR, got {value!r}")
    return Peer(
        parts[0], _host_port("--peer RAFT_ADDR", parts[1]), _host_port("--peer HTTP_ADDR", parts[2])
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m harness.node",
        description="An rqlite-compatible node: SQLite replicated by PySyncObj Raft.",
    )
    p.add_argument("--node-id", required=True, help="this node's id, e.g. n1")
    p.add_argument(
        "--http-addr",
        required=True,
        type=lambda v: _host_port("--http-addr", v),
        help="HOST:PORT of the HTTP API",
    )
    p.add_argument(
        "--raft-addr",
        required=True,
        type=lambda v: _host_port("--raft-addr", v),
        help="HOST:PORT for Raft traffic",
    )
    p.add_argument(
        "--peer",
        action="append",
        default=[],
        type=_peer,
        metavar="ID,RAFT_ADDR,HTTP_ADDR",
        help="another member of the cluster; once per peer",
    )
    p.add_argument(
        "--join",
        action="append",
        default=[],
        type=lambda v: _host_port("--join", v),
        metavar="HTTP_ADDR",
        help="join a running cluster through this member's HTTP API (once per member "
        "to try); ignored once the node has joined (harness.node.membership)",
    )
    p.add_argument("--data-dir", required=True, type=Path, help="journal and snapshot directory")
    p.add_argument(
        "--clock-offset-file",
        type=Path,
        default=None,
        help="file holding seconds to add to this node's wall clock (re-read on change)",
    )
    p.add_argument(
        "--apply-timeout",
        type=float,
        default=10.0,
        help="seconds a request waits for its log entry (then: unknown outcome)",
    )
    p.add_argument(
        "--compaction-entries",
        type=int,
        default=20000,
        help="snapshot the database and truncate the Raft log past this many entries",
    )
    p.add_argument(
        "--compaction-mib",
        type=float,
        default=64.0,
        help="... or once the log's journal holds this many MiB (default 64)",
    )
    p.add_argument(
        "--cluster-secret-file",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"file holding the secret every member shares: Raft traffic is authenticated and "
        f"encrypted with it (default: ${SECRET_ENV}); needed to listen beyond loopback",
    )
    p.add_argument(
        "--rqlite-version",
        choices=versions.SUPPORTED,
        default=versions.DEFAULT,
        help="the rqlite release to follow: its rewriting, its version in /status, its "
        f"/debug/vars counter names (default {versions.DEFAULT}, the current release)",
    )
    p.add_argument(
        "--fk",
        action="store_true",
        help="enforce foreign key constraints (rqlited's -fk; SQLite's default is not to)",
    )
    return p


def parse_args(
    argv: list[str] | None = None, environ: Mapping[str, str] | None = None
) -> NodeConfig:
    """The node's configuration from its flags and (for the secret) ``environ``."""
    parser = build_parser()
    a = parser.parse_args(argv)
    try:
        secret = read_secret(a.cluster_secret_file, os.environ if environ is None else environ)
    except ValueError as exc:
        parser.error(str(exc))
    cfg = NodeConfig(
        node_id=a.node_id,
        http_addr=a.http_addr,
        raft_addr=a.raft_addr,
        data_dir=a.data_dir,
        peers=tuple(a.peer),
        clock_offset_file=a.clock_offset_file,
        apply_timeout=a.apply_timeout,
        compaction_entries=a.compaction_entries,
        compaction_bytes=int(a.compaction_mib * 1024 * 1024) if a.compaction_mib > 0 else 0,
        cluster_secret=secret,
        rqlite_version=a.rqlite_version,
        foreign_keys=a.fk,
        join=tuple(a.join),
    )
    ids = [m.node_id for m in cfg.members]
    if len(set(ids)) != len(ids):
        parser.error(f"node ids must be unique, got {ids}")
    addrs = [m.raft_addr for m in cfg.members] + [m.http_addr for m in cfg.members]
    if len(set(addrs)) != len(addrs):
        parser.error("every Raft and HTTP address must be different")
    if not a.apply_timeout > 0 or a.apply_timeout == float("inf"):
        parser.error(f"--apply-timeout must be a positive number of seconds, got {a.apply_timeout}")
    if a.compaction_entries < 10:
        parser.error("--compaction-entries must be at least 10")
    if not 1 <= a.compaction_mib <= 3072:
        # PySyncObj's journal records its end in 32 bits: it must stay below 4 GiB
        parser.error(f"--compaction-mib must be between 1 and 3072, got {a.compaction_mib}")
    return cfg
