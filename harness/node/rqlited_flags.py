"""rqlited's command line for the embedded node: a drop-in for ``rqlited`` in a container.

::

    python -m harness.node -node-id n1 -http-addr 0.0.0.0:4001 -http-adv-addr 127.0.0.1:4001 \\
        -raft-addr 0.0.0.0:4002 -raft-adv-addr n1:4002 \\
        -bootstrap-expect 3 -join n1:4002,n2:4002,n3:4002 /rqlite/file/data

Flags are Go's (``-flag value``, ``-flag=value``, one or two dashes), the data directory
comes last. Supported: ``-node-id`` (default: the advertised Raft address), ``-http-addr``,
``-http-adv-addr``, ``-raft-addr``, ``-raft-adv-addr``, ``-bootstrap-expect``,
``-bootstrap-expect-timeout``, ``-join`` (Raft addresses, as rqlite v8+ takes them),
``-fk`` (foreign key constraints enforced), ``-version`` and the embedded node's own
``-cluster-secret-file`` and ``-clock-offset-file``. The embedded node has no
authentication and no TLS, so rqlited's ``-auth``, ``-http-cert`` and the like are
refused like every other flag it lacks: one line naming the flag, exit status 2. An
advertised HTTP address that is unspecified (``0.0.0.0``, ``::``) is refused as rqlited
refuses it.

The embedded node starts a cluster from its members (``--peer ID,RAFT,HTTP`` each), but
rqlited's flags name only the peers' Raft addresses. So before the node starts, each node
introduces itself on its Raft port (:mod:`.discovery`): it tells every ``-join`` address
its id and HTTP addresses and learns theirs, keeps them in the data directory (a restarted
node needs nobody), then hands the port to Raft. A follower forwards to the leader's HTTP
API at the leader's Raft host and HTTP port when the leader binds every interface (in a
container the advertised address is the host's, unreachable from inside); ``/nodes``,
``/status`` and redirects name the advertised addresses, as rqlite does.

``-join`` without ``-bootstrap-expect`` joins a running cluster, as in rqlite: the node
asks each ``-join`` member's HTTP API, at its Raft host on this node's own HTTP port
(``--join``, :mod:`.membership`), and ignores ``-join`` once it has joined.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from . import VERSION
from .config import NodeConfig, Peer, build_parser, exposure_refusal, parse_args, read_secret
from .discovery import WILDCARDS, DiscoveryError, NodeCard, discover, reach_addr

#: flag name -> kind ("str", "int", "duration", "bool")
FLAGS: dict[str, str] = {
    "node-id": "str",
    "http-addr": "str",
    "http-adv-addr": "str",
    "raft-addr": "str",
    "raft-adv-addr": "str",
    "bootstrap-expect": "int",
    "bootstrap-expect-timeout": "duration",
    "join": "str",
    "cluster-secret-file": "str",
    "clock-offset-file": "str",
    "fk": "bool",
    "version": "bool",
    "h": "bool",
    "help": "bool",
}
DEFAULT_HTTP_ADDR = "localhost:4001"
DEFAULT_RAFT_ADDR = "localhost:4002"
DEFAULT_BOOTSTRAP_TIMEOUT = 120.0
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
USAGE = (
    "usage: python -m harness.node [-node-id ID] [-http-addr HOST:PORT] [-http-adv-addr "
    "HOST:PORT] [-raft-addr HOST:PORT] [-raft-adv-addr HOST:PORT] [-bootstrap-expect N "
    "-join RAFT_ADDR,...] [-bootstrap-expect-timeout DURATION] [-cluster-secret-file PATH] "
    "[-clock-offset-file PATH] [-fk] "
    "DATA_DIR"
)


class FlagError(ValueError):
    """A command line the embedded node cannot run; the message is one line."""


class InvalidConfig(FlagError):
    """A configuration rqlited's own validation refuses (``Config.Validate``): printed as
    rqlited prints it (``fatal: ...``), exit status 1."""


@dataclass(frozen=True)
class RqlitedFlags:
    """What rqlited's flags ask for."""

    data_dir: Path
    node_id: str = ""
    http_addr: str = DEFAULT_HTTP_ADDR
    http_adv_addr: str = ""
    raft_addr: str = DEFAULT_RAFT_ADDR
    raft_adv_addr: str = ""
    bootstrap_expect: int = 0
    bootstrap_timeout: float = DEFAULT_BOOTSTRAP_TIMEOUT
    join: tuple[str, ...] = field(default_factory=tuple)
    cluster_secret_file: str | None = None
    clock_offset_file: str | None = None
    foreign_keys: bool = False

    @property
    def raft_advertised(self) -> str:
        return self.raft_adv_addr or self.raft_addr

    @property
    def http_advertised(self) -> str:
        return self.http_adv_addr or self.http_addr

    @property
    def identity(self) -> str:
        return self.node_id or self.raft_advertised

    @property
    def peer_raft_addrs(self) -> list[str]:
        """The other members' Raft addresses, in ``-join`` order."""
        own = self.raft_advertised
        return [a for a in dict.fromkeys(self.join) if a != own]

    def card(self) -> NodeCard:
        return NodeCard(self.identity, self.raft_advertised, self.http_advertised, self.http_addr)


def is_rqlited_argv(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is rqlited's style: a single-dash long flag anywhere, or a first
    argument that is not a flag. The embedded node's own flags all have two dashes."""
    if argv and not argv[0].startswith("--"):
        return True
    return any(len(a) > 2 and a[0] == "-" and a[1] != "-" for a in argv)


def go_duration(flag: str, text: str) -> float:
    """Seconds in a Go duration such as ``120s``, ``2m``, ``1m30s``, ``500ms``."""
    rest, total = text.strip(), 0.0
    if not rest:
        raise FlagError(f"-{flag} needs a duration such as 120s, got {text!r}")
    while rest:
        num = ""
        while rest and (rest[0].isdigit() or rest[0] == "."):
            num, rest = num + rest[0], rest[1:]
        unit = next(
            (u for u in sorted(_DURATION_UNITS, key=len, reverse=True) if rest.startswith(u)), None
        )
        if not num or unit is None:
            raise FlagError(f"-{flag} needs a duration such as 120s, got {text!r}")
        try:
            total += float(num) * _DURATION_UNITS[unit]
        except ValueError:
            raise FlagError(f"-{flag} needs a duration such as 120s, got {text!r}") from None
        rest = rest[len(unit) :]
    return total


def _split(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Go's flag parsing: flags until the first non-flag (or ``--``), then positionals."""
    values: dict[str, str] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        name, eq, value = arg.lstrip("-").partition("=")
        kind = FLAGS.get(name)
        if kind is None:
            raise FlagError(
                f"rqlited flag -{name} is not supported by the embedded node (it takes "
                + ", ".join(f"-{f}" for f in FLAGS if f not in ("h", "help"))
                + "; no authentication, no TLS)"
            )
        if kind == "bool":
            if eq and value.lower() not in ("true", "false", "1", "0"):
                raise FlagError(f"-{name} is a switch: -{name} or -{name}=true, got {arg!r}")
            values[name] = "true" if not eq else value.lower()
        elif eq:
            values[name] = value
        else:
            if i + 1 >= len(args):
                raise FlagError(f"flag -{name} needs a value")
            i += 1
            values[name] = args[i]
        i += 1
    return values, args[i:]


def parse(argv: Sequence[str]) -> RqlitedFlags | str:
    """rqlited's flags -> :class:`RqlitedFlags`, or the text to print and exit 0 with
    (``-version``, ``-h``); :class:`FlagError` for what the embedded node cannot run."""
    values, rest = _split(argv)
    if values.get("version") in ("true", "1"):
        return f"rqlited {VERSION} (python -m harness.node, the embedded rqlite-compatible node)"
    if values.get("h") in ("true", "1") or values.get("help") in ("true", "1"):
        return USAGE
    if len(rest) != 1:
        what = "none" if not rest else " ".join(rest)
        raise FlagError(
            f"give the data directory as the last argument, after the flags (got {what})"
        )
    try:
        expect = int(values.get("bootstrap-expect", "0"))
    except ValueError:
        raise FlagError(
            f"-bootstrap-expect needs a number, got {values['bootstrap-expect']!r}"
        ) from None
    join = tuple(a.strip() for a in values.get("join", "").split(",") if a.strip())
    for addr in join:
        if "://" in addr:
            raise FlagError(
                f"-join takes Raft addresses (HOST:PORT, as rqlite v8+ does), got {addr!r}"
            )
    flags = RqlitedFlags(
        data_dir=Path(rest[0]),
        node_id=values.get("node-id", ""),
        http_addr=values.get("http-addr", DEFAULT_HTTP_ADDR),
        http_adv_addr=values.get("http-adv-addr", ""),
        raft_addr=values.get("raft-addr", DEFAULT_RAFT_ADDR),
        raft_adv_addr=values.get("raft-adv-addr", ""),
        bootstrap_expect=expect,
        bootstrap_timeout=go_duration(
            "bootstrap-expect-timeout", values.get("bootstrap-expect-timeout", "120s")
        ),
        join=join,
        cluster_secret_file=values.get("cluster-secret-file"),
        clock_offset_file=values.get("clock-offset-file"),
        foreign_keys=values.get("fk") in ("true", "1"),
    )
    _check(flags)
    return flags


def _unspecified_ip(host: str) -> bool:
    """Whether ``host`` is an IP address that names no host (``0.0.0.0``, ``::``); a name,
    or nothing at all, is not (Go's ``net.ParseIP(host).IsUnspecified()``)."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _check(flags: RqlitedFlags) -> None:
    http_host = flags.http_advertised.rpartition(":")[0].strip("[]")
    if _unspecified_ip(http_host):  # as rqlited's flag validation refuses it
        raise InvalidConfig(
            f"advertised HTTP address is not routable ({http_host}), "
            "specify it via -http-addr or -http-adv-addr"
        )
    if flags.raft_advertised.rpartition(":")[0] in WILDCARDS:
        raise FlagError(
            f"-raft-addr {flags.raft_addr} binds every interface: give -raft-adv-addr, the "
            "address the other nodes reach this one at"
        )
    bind_port = flags.raft_addr.rpartition(":")[2]
    adv_port = flags.raft_advertised.rpartition(":")[2]
    if bind_port != adv_port:
        raise FlagError(
            f"-raft-addr {flags.raft_addr} and -raft-adv-addr {flags.raft_advertised} have "
            "different ports: the embedded node listens on its advertised Raft port"
        )
    if flags.join and flags.bootstrap_expect == 0:
        return  # joins a running cluster (harness.node.membership)
    members = len(flags.peer_raft_addrs) + 1
    if flags.bootstrap_expect and flags.bootstrap_expect != members:
        raise FlagError(
            f"-bootstrap-expect {flags.bootstrap_expect}, but -join names {members} nodes "
            f"with this one ({flags.raft_advertised}): the embedded node needs every member "
            "in -join"
        )


def join_http(raft_addr: str, http_port: str) -> str:
    """The HTTP API of the member at ``raft_addr`` that a joining node asks: its host on
    this node's own HTTP port (rqlite's -join names Raft addresses; the embedded node joins
    over HTTP, and the clusters it runs in give every member the same ports)."""
    return f"{raft_addr.rpartition(':')[0]}:{http_port}"


def to_config(flags: RqlitedFlags, peers: Sequence[NodeCard]) -> NodeConfig:
    """The node's configuration, validated by the embedded node's own parser."""
    by_raft = {p.raft: p for p in peers}
    reach = {p.raft: reach_addr(p, p.raft) for p in peers}
    argv = [
        "--node-id",
        flags.identity,
        "--http-addr",
        flags.http_addr,
        "--raft-addr",
        flags.raft_advertised,
        "--data-dir",
        str(flags.data_dir),
    ]
    for addr in flags.peer_raft_addrs:
        if flags.bootstrap_expect:
            argv += ["--peer", f"{by_raft[addr].node_id},{addr},{reach[addr]}"]
        else:  # joining a running cluster: through its members' HTTP APIs
            argv += ["--join", join_http(addr, flags.http_addr.rpartition(":")[2])]
    if flags.clock_offset_file is not None:
        argv += ["--clock-offset-file", flags.clock_offset_file]
    if flags.foreign_keys:
        argv.append("--fk")
    if flags.cluster_secret_file is not None:
        if "--cluster-secret-file" not in build_parser()._option_string_actions:
            raise FlagError(
                "this node has no cluster secret yet: -cluster-secret-file is not supported"
            )
        argv += ["--cluster-secret-file", flags.cluster_secret_file]
    try:
        cfg = parse_args(argv)
    except SystemExit as exc:  # argparse printed why
        raise FlagError("the flags above do not make a valid node") from exc
    advertised = tuple(
        Peer(p.node_id, p.raft_addr, by_raft[p.raft_addr].http, p.http_addr) for p in cfg.peers
    )
    return replace(cfg, peers=advertised, http_adv_addr=flags.http_advertised)


def _refusal(flags: RqlitedFlags) -> str | None:
    """Why the node would refuse to start (listening beyond loopback without a cluster
    secret, or an unreadable one), told before the peers are waited for."""
    path = Path(flags.cluster_secret_file) if flags.cluster_secret_file is not None else None
    try:
        secret = read_secret(path, os.environ)
    except ValueError as exc:
        return str(exc)
    probe = NodeConfig(
        flags.identity, flags.http_addr, flags.raft_advertised, flags.data_dir,
        cluster_secret=secret,
    )  # fmt: skip
    return exposure_refusal(probe)


def main(argv: Sequence[str]) -> int:
    """Run the node from rqlited's flags; exit status 2 with one line when it cannot (1,
    as rqlited, for what rqlited's own validation refuses)."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        flags = parse(argv)
        if isinstance(flags, str):
            print(flags)
            return 0
        why = _refusal(flags)
        if why is not None:  # before waiting for peers that would be refused too
            print(f"harness.node: {why}", file=sys.stderr)
            return 2
        peers = []
        if flags.bootstrap_expect or not flags.join:
            peers = discover(
                flags.card(),
                flags.raft_addr,
                flags.peer_raft_addrs,
                flags.data_dir,
                timeout=flags.bootstrap_timeout,
                secret_file=flags.cluster_secret_file,
            )
        cfg = to_config(flags, peers)
    except InvalidConfig as exc:
        print(f"fatal: {exc}", file=sys.stderr)
        return 1
    except FlagError as exc:
        print(f"harness.node: {exc}", file=sys.stderr)
        return 2
    except DiscoveryError as exc:
        print(f"harness.node: {exc}", file=sys.stderr)
        return 1
    from .server import run

    return run(cfg)
