"""The simulated cluster as the fault kinds see a cluster, and its reply proxies.

The harness's own fault kinds (:mod:`harness.faults`) act through a small part of the
:class:`harness.cluster.base.Cluster` interface (kill, restart, pause, partitions,
clocks, links, forwarded replies) and the reply proxies' (``set_loss``,
``set_timeout``); :class:`SimCluster` and :class:`SimProxies` give exactly that over the
simulated nodes, so faults are drawn, targeted and recorded by the real kinds.
Waiting for a leader runs the simulation itself until one is agreed on.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from ..cluster.base import (
    CLOCK_SKEW,
    DISK,
    KILL,
    LINKS,
    PARTITIONS,
    PAUSE,
    TIME_ZONES,
    ClusterError,
    NodeInfo,
)
from ..cluster.links import rate_bits
from ..node import tzif
from ..node.localzone import LocalZone
from ..node.statements import parse_duration
from .loop import Loop
from .net import Net
from .node import SimNode

#: what the simulated cluster can do (the fault kinds' ``needs``)
CAPABILITIES = frozenset({KILL, PAUSE, PARTITIONS, CLOCK_SKEW, LINKS, TIME_ZONES, DISK})


class SimCluster:
    """The nodes of one simulation, driven as the fault kinds drive a cluster."""

    engine = "sim"

    def __init__(self, loop: Loop, net: Net, nodes: dict[str, SimNode], urls: dict[str, str]):
        self.loop, self.net, self.by_id, self._urls = loop, net, nodes, urls
        #: time zones to set (the timezone kind sets them from threads): applied in the
        #: nodes' order by :meth:`flush`, so that no thread's timing leaks into the run
        self._zones: dict[str, bytes | None] = {}

    # -- reading ---------------------------------------------------------------------------
    def nodes(self) -> list[NodeInfo]:
        return [NodeInfo(n, self._urls[n]) for n in self.by_id]

    def leader_now(self) -> str | None:
        """The leader a majority of the live nodes name (None: none agreed)."""
        named = [n.known_leader() for n in self.by_id.values() if n.up and not n.paused]
        for cand in sorted({x for x in named if x is not None}):
            node = self.by_id[cand]
            if node.is_leader() and not node.paused and 2 * named.count(cand) > len(self.by_id):
                return cand
        return None

    def wait_for_leader(
        self, timeout: float, *, all_ready: bool = True, exclude: Iterable[str] = ()
    ) -> NodeInfo:
        """Run the simulation (up to ``timeout`` virtual seconds) until a leader is agreed."""
        excluded = set(exclude)
        found = self.leader_now()
        if found is None or found in excluded:
            end = self.loop.now + timeout

            def agreed() -> bool:
                lead = self.leader_now()
                return lead is not None and lead not in excluded

            self.loop.run(end, stop=agreed)
            found = self.leader_now()
            if found is None or found in excluded:
                raise ClusterError(f"no agreed leader within {timeout:g}s")
        return NodeInfo(found, self._urls[found])

    def capability_problem(self, capability: str) -> str | None:
        return None if capability in CAPABILITIES else f"the sim backend cannot {capability}"

    # -- faults ----------------------------------------------------------------------------
    def kill(self, node_id: str) -> None:
        self.by_id[node_id].crash()

    def restart(self, node_id: str) -> None:
        self.by_id[node_id].restart()

    def pause(self, node_id: str) -> None:
        self.by_id[node_id].pause()

    def resume(self, node_id: str) -> None:
        self.by_id[node_id].resume()

    def partition(self, components: Iterable[Iterable[str]]) -> None:
        groups = [set(c) for c in components]
        for a in self.by_id:
            for b in self.by_id:
                if a != b and not any(a in g and b in g for g in groups):
                    self.net.cut.add((a, b))

    def partition_one_way(self, cuts: Iterable[Iterable[str]]) -> None:
        for src, dst in cuts:
            self.net.cut.add((src, dst))

    def heal(self) -> None:
        self.net.heal()

    def set_clock_offset(self, node_id: str, seconds: float) -> None:
        self.by_id[node_id].skew = seconds

    def _links(self, node_id: str) -> list[tuple[str, str]]:
        others = [n for n in self.by_id if n != node_id]
        return [(node_id, o) for o in others] + [(o, node_id) for o in others]

    def set_link_loss(self, node_id: str, rate: float) -> None:
        for link in self._links(node_id):
            self.net.loss[link] = rate

    def clear_link_loss(self, node_id: str) -> None:
        for link in self._links(node_id):
            self.net.loss.pop(link, None)

    def set_link_shape(
        self, node_id: str, rate: str, delay: float = 0.0, jitter: float = 0.0
    ) -> None:
        """What the node sends to its peers comes late: ``delay`` (+ half the ``jitter``)
        milliseconds, plus a kilobyte's time at ``rate`` (a message's, roughly)."""
        extra = (delay + jitter / 2) / 1000.0 + 8192.0 / rate_bits(rate)
        for o in self.by_id:
            if o != node_id:
                self.net.slow[(node_id, o)] = extra

    def clear_link_shape(self, node_id: str) -> None:
        for o in self.by_id:
            self.net.slow.pop((node_id, o), None)

    def fill_disk(self, node_id: str) -> None:
        self.by_id[node_id].disk_full = True

    def free_disk(self, node_id: str) -> None:
        self.by_id[node_id].disk_full = False

    def set_time_zone(self, node_id: str, zone: bytes | None) -> None:
        """Restart ``node_id`` in the zone of the TZif data ``zone`` (None: UTC), as the
        real backends do; done by :meth:`flush`."""
        if zone is not None:
            found, problem = tzif.parse(zone)
            if found is None:
                raise ClusterError(f"{node_id}: not a zone file: {problem}")
        self._zones[node_id] = zone

    def flush(self) -> None:
        """Apply the time zones set since the last flush, node by node in order."""
        for node_id in sorted(self._zones):
            zone = self._zones.pop(node_id)
            node = self.by_id[node_id]
            node.crash()
            if zone is None:
                node.zone = LocalZone.utc()
            else:
                node.zone = LocalZone("sim", "the timezone fault", tzif.parse(zone)[0])
            node.restart()

    def forward_port(self, leader: str) -> int:
        return 4002

    def set_forward_reply_loss(self, node_id: str, leader: str) -> None:
        self.by_id[node_id].forward_loss = 1.0

    def clear_forward_reply_loss(self, node_id: str) -> None:
        self.by_id[node_id].forward_loss = None


class SimProxies:
    """The reply proxies in front of the nodes: lose a share of the ``/db/`` answers to
    clients (after the node acted), and set a forwarding deadline (``?timeout``)."""

    def __init__(self, nodes: dict[str, SimNode], rng: random.Random) -> None:
        self.nodes, self.rng = nodes, rng

    def set_loss(self, loss: Any) -> None:
        for n in self.nodes.values():
            n.reply_loss = loss.rate
            n.loss_weights = tuple(loss.weights)
            n.lost = {"close": 0, "reset": 0, "hold": 0}

    def clear_loss(self) -> dict[str, int]:
        lost = {"close": 0, "reset": 0, "hold": 0}
        for n in self.nodes.values():
            n.reply_loss = 0.0
            for k, v in getattr(n, "lost", {}).items():
                lost[k] += v
        return lost

    def set_timeout(self, timeout: str | None) -> None:
        seconds = None if timeout is None else parse_duration(timeout)
        for n in self.nodes.values():
            n.forward_deadline = seconds
