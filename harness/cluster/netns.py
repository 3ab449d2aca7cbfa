"""One network namespace per node, joined by a bridge of the project's own (root only).

Layout of a network (``cid`` is a short random id, ``X`` a free third octet)::

    root namespace   bridge rqbr<cid>  127.77.X.1/24   (the harness reaches nodes here)
                       |- veth rqv<cid>-1  <->  eth0 in netns rqueue-<cid>-n1  127.77.X.11
                       |- veth rqv<cid>-2  <->  eth0 in netns rqueue-<cid>-n2  127.77.X.12
                       ...

Addresses are loopback addresses (127.77.X.0/24), so no packet can ever be routed off
this machine. The kernel treats 127/8 as local only through the ``local 127.0.0.0/8``
route of ``lo``; a more specific route for the subnet in the ``local`` table plus the
``route_localnet`` sysctl on the bridge (and on ``eth0`` inside each namespace) sends it
over the bridge instead. Inside each namespace ``lo`` is up too, so that a node reaches its
own address (rqlited v8 dials every ``-join`` address, its own included), with the same
subnet route in the namespace's ``local`` table sending the peers' addresses to ``eth0``.
Nothing else of the host's routing is touched.

Every network is recorded in ``/run/rqueue-netns/<cid>.json`` (with the ``RQUEUE_REAP_TAG``
and the identity of the process that made it, :mod:`harness.cluster.owners`) so that
:func:`reap_networks` can remove what a crashed run left behind.
:meth:`NetnsNetwork.teardown` is idempotent and copes with half-built networks.

Bridged traffic between the namespaces passes the root namespace's iptables ``FORWARD``
chain whenever ``br_netfilter`` is loaded, and a running Docker daemon loads it and sets
that chain's policy to ``DROP``: the nodes would be cut off from each other. Each network
therefore adds one rule of its own at the head of ``FORWARD`` that accepts packets from its
bridge to its bridge, tagged with a comment naming the network (:func:`forward_rule`), and
removes exactly that rule on teardown. Nothing else in the host's firewall is touched, and
the rule matches only the network's own bridge.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.cluster.base import ClusterError
from harness.cluster.owners import REAP_TAG_ENV, identity

#: names of everything this module creates start with these
NETNS_PREFIX = "rqueue-"
BRIDGE_PREFIX = "rqbr"
VETH_PREFIX = "rqv"
#: the /16 whose /24s the networks use
SUBNET_PREFIX = "127.77"
REGISTRY = Path("/run/rqueue-netns")
#: the ports every node listens on, on its own namespace's address
NETNS_HTTP_PORT = 4001
NETNS_RAFT_PORT = 4002
#: the comment that tags each network's rule in the host's FORWARD chain
FORWARD_COMMENT_PREFIX = "rqueue-netns:"


def forward_rule(bridge: str, cid: str) -> list[str]:
    """The match and target of a network's ``FORWARD`` rule (after ``-I FORWARD 1``/``-D``).

    It accepts what the bridge forwards between its own ports, nothing else, so the
    namespaces reach each other whatever the chain's policy (Docker sets ``DROP``).
    """
    return [
        "-i", bridge, "-o", bridge,
        "-m", "comment", "--comment", f"{FORWARD_COMMENT_PREFIX}{cid}",
        "-j", "ACCEPT",
    ]  # fmt: skip


def _iptables() -> list[str]:
    return ["iptables", "-w", "5"]


def require_root() -> None:
    """Raise :class:`ClusterError` unless network namespaces can be made here."""
    if os.geteuid() != 0:
        raise ClusterError(
            "network partitions need root (network namespaces and iptables) "
            "or the Docker backend; run as root or use --backend docker"
        )
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            raise ClusterError(f"network partitions need the {tool!r} command, not found on PATH")


def run(argv: Sequence[str], *, check: bool = True, timeout: float = 15.0) -> bool:
    """Run one command; on failure raise :class:`ClusterError` (or return False if not check)."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        if check:
            raise ClusterError(f"{' '.join(argv)} did not finish within {timeout}s") from exc
        return False
    if proc.returncode != 0 and check:
        raise ClusterError(
            f"{' '.join(argv)} failed (exit {proc.returncode}): {proc.stderr.strip()}"
        )
    return proc.returncode == 0


@dataclass
class Member:
    """One node's namespace, its veth in the root namespace, and its address."""

    netns: str
    veth: str
    ip: str


@dataclass
class NetnsNetwork:
    """A bridge plus one namespace per node; see the module docstring."""

    cid: str
    octet: int
    members: dict[str, Member] = field(default_factory=dict)
    tag: str | None = None
    owner: str | None = None  # the cluster directory
    creator: str | None = None  # the identity of the process that made it

    @property
    def bridge(self) -> str:
        return f"{BRIDGE_PREFIX}{self.cid}"

    @property
    def gateway(self) -> str:
        return f"{SUBNET_PREFIX}.{self.octet}.1"

    @property
    def subnet(self) -> str:
        return f"{SUBNET_PREFIX}.{self.octet}.0/24"

    def exec_prefix(self, node_id: str) -> list[str]:
        """The argv prefix that runs a command inside the node's namespace."""
        return ["ip", "netns", "exec", self.members[node_id].netns]

    def run_in_members(self, commands: dict[str, list[list[str]]], check: bool) -> None:
        """Run each node's argv lists in order inside its namespace, the nodes in parallel
        (``check``: the first failure raises :class:`ClusterError`)."""

        def one_node(node_id: str) -> None:
            for argv in commands[node_id]:
                run(self.exec_prefix(node_id) + argv, check=check)

        if commands:
            with ThreadPoolExecutor(max_workers=len(commands)) as pool:
                for future in [pool.submit(one_node, n) for n in commands]:
                    future.result()

    # -- building -------------------------------------------------------------------------
    @classmethod
    def create(cls, node_ids: Sequence[str], owner: str | None = None) -> NetnsNetwork:
        """Build the bridge and one namespace per node; undo everything on failure."""
        require_root()
        REGISTRY.mkdir(parents=True, exist_ok=True)
        with open(REGISTRY / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # octet choice + bridge address are one step
            net = cls(
                cid=secrets.token_hex(3),
                octet=_free_octet(),
                tag=os.environ.get(REAP_TAG_ENV),
                owner=owner,
                creator=identity(),
            )
            for i, node in enumerate(node_ids, start=1):
                net.members[node] = Member(
                    netns=f"{NETNS_PREFIX}{net.cid}-{node}",
                    veth=f"{VETH_PREFIX}{net.cid}-{i}",
                    ip=f"{SUBNET_PREFIX}.{net.octet}.{10 + i}",
                )
            net._register()
            try:
                net._build_bridge()
            except BaseException:
                net.teardown()
                raise
        try:
            for node in node_ids:
                net._build_member(net.members[node])
        except BaseException:
            net.teardown()
            raise
        return net

    def _build_bridge(self) -> None:
        br = self.bridge
        run(["ip", "link", "add", br, "type", "bridge"])
        Path(f"/proc/sys/net/ipv4/conf/{br}/route_localnet").write_text("1")
        run(["ip", "link", "set", br, "up"])
        route = ["ip", "route", "add", "table", "local", self.subnet, "dev", br]
        run([*route, "proto", "kernel", "scope", "link", "src", self.gateway])
        run(["ip", "addr", "add", f"{self.gateway}/24", "dev", br])
        run([*_iptables(), "-I", "FORWARD", "1", *forward_rule(br, self.cid)])

    def _build_member(self, m: Member) -> None:
        run(["ip", "netns", "add", m.netns])
        run(["ip", "link", "add", m.veth, "type", "veth", "peer", "name", "eth0", "netns", m.netns])
        run(["ip", "link", "set", m.veth, "master", self.bridge, "up"])
        inside = ["ip", "netns", "exec", m.netns]
        for conf in ("all", "eth0"):
            run([*inside, "sysctl", "-qw", f"net.ipv4.conf.{conf}.route_localnet=1"])
        run([*inside, "ip", "addr", "add", f"{m.ip}/24", "dev", "eth0"])
        run([*inside, "ip", "link", "set", "eth0", "up"])
        # lo up: the node reaches its own address (an rqlited v8 node dials every -join
        # address, its own too). That brings lo's ``local 127.0.0.0/8`` route, which would
        # swallow the peers' addresses: the subnet's own route in the local table sends
        # them over eth0, and the node's /32 ``local`` route still wins for itself.
        run([*inside, "ip", "link", "set", "lo", "up"])
        route = ["ip", "route", "replace", "table", "local", self.subnet, "dev", "eth0"]
        run([*inside, *route, "proto", "kernel", "scope", "link", "src", m.ip])

    def add_member(self, node_id: str) -> Member:
        """A namespace on the bridge for a node that joins later (membership); the one it
        has already when it had one (a removed node joining again)."""
        if node_id in self.members:
            return self.members[node_id]
        k = max((int(m.veth.rsplit("-", 1)[1]) for m in self.members.values()), default=0) + 1
        if 10 + k > 254:
            raise ClusterError(f"no address left on {self.subnet} for node {node_id}")
        member = Member(
            netns=f"{NETNS_PREFIX}{self.cid}-{node_id}",
            veth=f"{VETH_PREFIX}{self.cid}-{k}",
            ip=f"{SUBNET_PREFIX}.{self.octet}.{10 + k}",
        )
        self.members[node_id] = member
        self._register()  # recorded first: a failed build is still torn down and reaped
        self._build_member(member)
        return member

    # -- teardown -------------------------------------------------------------------------
    def teardown(self) -> None:
        """Remove namespaces, veths and the bridge (with its route); safe to call twice.

        Kill the processes inside first: a namespace lives on while a process uses it.
        """
        for m in self.members.values():
            run(["ip", "netns", "del", m.netns], check=False)
            run(["ip", "link", "del", m.veth], check=False)
        run(["ip", "link", "del", self.bridge], check=False)
        _delete_forward_rules(self.cid)
        (REGISTRY / f"{self.cid}.json").unlink(missing_ok=True)

    # -- persistence ----------------------------------------------------------------------
    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> NetnsNetwork:
        members = {k: Member(**v) for k, v in data.get("members", {}).items()}
        return cls(
            cid=data["cid"],
            octet=data["octet"],
            members=members,
            tag=data.get("tag"),
            owner=data.get("owner"),
            creator=data.get("creator"),
        )

    def _register(self) -> None:
        path = REGISTRY / f"{self.cid}.json"
        path.write_text(json.dumps(self.to_json()))


def _free_octet() -> int:
    """A third octet of :data:`SUBNET_PREFIX` that no interface here uses yet."""
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True
    ).stdout
    used = set()
    for word in out.split():
        if word.startswith(SUBNET_PREFIX + "."):
            used.add(int(word.split(".")[2]))
    for octet in range(1, 255):
        if octet not in used:
            return octet
    raise ClusterError(f"no free /24 left in {SUBNET_PREFIX}.0.0/16 for a network namespace")


def _registered() -> list[NetnsNetwork]:
    found = []
    if REGISTRY.is_dir():
        for path in sorted(REGISTRY.glob("*.json")):
            try:
                found.append(NetnsNetwork.from_json(json.loads(path.read_text())))
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return found


def _cid_of(name: str) -> str:
    """The network id in a namespace's, bridge's or veth's name."""
    for prefix in (NETNS_PREFIX, BRIDGE_PREFIX, VETH_PREFIX):
        if name.startswith(prefix):
            return name[len(prefix) :].split("-")[0]
    return ""


def reap_networks(
    tag: str | None = None,
    owner: str | None = None,
    keep: Callable[[NetnsNetwork], bool] | None = None,
) -> list[str]:
    """Tear down registered networks: all of them, or those made under ``tag`` / for the
    cluster directory ``owner`` when given, except those ``keep`` says are in use.

    With neither ``tag`` nor ``owner``, also removes the pieces of networks no record
    names any more (:func:`sweep_unrecorded`). Returns the names of what was removed.
    """
    removed: list[str] = []
    for net in _registered():
        if (tag is not None and net.tag != tag) or (owner is not None and net.owner != owner):
            continue
        if keep is not None and keep(net):
            continue
        net.teardown()
        removed.append(net.bridge)
    if tag is None and owner is None:
        removed += sweep_unrecorded()
    return removed


def sweep_unrecorded() -> list[str]:
    """Remove the pieces of networks that no record names any more (a teardown that was
    interrupted): namespaces and links with the project's prefixes, and ``FORWARD`` rules.
    A registered network, live or not, is never touched. Returns what was removed."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        return []
    removed: list[str] = []
    namespaces, links = _list_netns(), _list_links()
    rules = forward_rule_cids() if shutil.which("iptables") else []
    # read after listing: a network is recorded before any piece of it is made
    recorded = {net.cid for net in _registered()}
    for ns in namespaces:
        if ns.startswith(NETNS_PREFIX) and _cid_of(ns) not in recorded:
            run(["ip", "netns", "del", ns], check=False)
            removed.append(ns)
    for link in links:
        if link.startswith((BRIDGE_PREFIX, VETH_PREFIX)) and _cid_of(link) not in recorded:
            run(["ip", "link", "del", link], check=False)
            removed.append(link)
    for cid in rules:
        if cid not in recorded:
            _delete_forward_rules(cid)
            removed.append(f"FORWARD rule {FORWARD_COMMENT_PREFIX}{cid}")
    return removed


def forward_rule_cids() -> list[str]:
    """The network ids whose ``FORWARD`` rule is in the host's firewall now."""
    proc = subprocess.run(
        [*_iptables(), "-S", "FORWARD"], capture_output=True, text=True, timeout=15
    )
    cids = []
    for line in proc.stdout.splitlines():
        for word in line.replace('"', " ").split():
            if word.startswith(FORWARD_COMMENT_PREFIX):
                cids.append(word[len(FORWARD_COMMENT_PREFIX) :])
    return cids


def _delete_forward_rules(cid: str) -> None:
    """Delete the network's ``FORWARD`` rule (every copy of it; none is fine)."""
    if shutil.which("iptables") is None or os.geteuid() != 0:
        return
    rule = forward_rule(f"{BRIDGE_PREFIX}{cid}", cid)
    for _ in range(16):  # a bound: a rule is added once per network
        if not run([*_iptables(), "-D", "FORWARD", *rule], check=False):
            return


def _list_netns() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _list_links() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@")[0])
    return names
