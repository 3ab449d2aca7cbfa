"""What the SSH backend knows of a host and of each node on it: :class:`HostFacts`
(what the preflight learnt) and :class:`RemoteNode` (a node's host, folder and state).
Their own module, which the backend's other modules import, so none imports another's
to reach them."""

from __future__ import annotations

from dataclasses import dataclass

from harness.cluster.engines import NodeSpec
from harness.cluster.ssh.inventory import Host


@dataclass(frozen=True)
class HostFacts:
    """What preflight learnt about one host."""

    name: str
    rqlited_version: tuple[int, int, int] | None
    faketime: str | None  # the libfaketime library on the host (rqlited hosts)
    firewall_problem: str | None  # why partitions cannot run there (None: they can)
    links_problem: str | None = None  # why links cannot be degraded there (ssh/links.py)
    netem_problem: str | None = None  # why links cannot be delayed there
    disk_problem: str | None = None  # why nodes' disks cannot be filled there (.disk)


@dataclass
class RemoteNode:
    host: Host
    dir: str  # the run's folder on the host
    pid: int | None = None
    state: str = "new"  # new | running | paused | killed | stopped | removed
    tz: str = "UTC"  # the node's TZ: UTC, or the path of its zone file on the host
    join: str = ""  # a node added to the running cluster: the members it joins through

    @property
    def spec(self) -> NodeSpec:
        h = self.host
        return NodeSpec(h.name, h.address, h.http_port, h.raft_port, self.dir, join=self.join)
