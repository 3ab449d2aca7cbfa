"""The faults a :class:`harness.cluster.local.cluster.LocalCluster` makes on its own nodes besides
killing and pausing them: partitions (iptables rules in the nodes' namespaces), degraded
links (:mod:`harness.cluster.links`), full disks (:mod:`harness.cluster.disk`), skewed
clocks (the node's clock-offset file, or libfaketime's for rqlited) and time zones (a
restart with ``TZ``). A mixin: it works on the cluster's specs, lock and processes."""

from __future__ import annotations

import math
import os
import signal
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness import zonefile
from harness.cluster import disk as disks
from harness.cluster import partition as partition_rules
from harness.cluster.base import ClusterError
from harness.cluster.engines import NodeSpec, faketime_offset, is_dynamic_executable
from harness.cluster.forward_loss import ForwardLoss
from harness.cluster.links import LinkFaults, addresses_except
from harness.cluster.local.processes import send_signal


class LocalFaults:
    """Partitions, links, disks, clocks and zones of a local cluster (see the module)."""

    directory: Path
    engine: str
    _specs: dict[str, NodeSpec]
    _lock: threading.RLock
    _network: Any
    _partitioned: list[str]
    _links: LinkFaults | None
    _disk_mb: int | None
    _faketime: str | None
    _rqlited: str | None

    # LocalCluster provides _spec, _alive, _wait_gone, _launch, _save and _check_processes

    def fill_disk(self, node_id: str) -> None:
        self._require_disk()
        disks.fill(disks.node_disk(self.directory, node_id, self._spec(node_id).data_dir))

    def free_disk(self, node_id: str) -> None:
        self._require_disk()
        disks.free(disks.node_disk(self.directory, node_id, self._spec(node_id).data_dir))

    def _require_disk(self) -> None:
        if not self._disk_mb:
            raise ClusterError("this cluster was started without disks of its own (disk_mb)")

    def _link_faults(self) -> LinkFaults:
        """Degraded links (:mod:`harness.cluster.links`) inside the nodes' namespaces,
        tagged with the network's id; their rules die with the namespaces."""
        net = self._network
        assert net is not None  # LinkControl asks only with "links" in capabilities
        if self._links is None:
            addresses = {i: s.host for i, s in self._specs.items()}
            self._links = LinkFaults(
                net.cid,
                lambda node, argvs, check: net.run_in_members({node: list(argvs)}, check),
                lambda node: addresses_except(addresses, node),
            )
        return self._links

    def _forward_loss(self) -> ForwardLoss:
        """Forwarded replies lost in the followers' namespaces (``forward-reply-loss``),
        tagged with the network's id; their rules die with the namespaces."""
        net = self._network
        assert net is not None  # ForwardLossControl asks only with "links" in capabilities
        if self.__dict__.get("_fwd_loss") is None:
            self._fwd_loss = ForwardLoss(
                net.cid, lambda node, argvs, check: net.run_in_members({node: list(argvs)}, check)
            )
        return self._fwd_loss

    def _node_address(self, node_id: str) -> str:
        return self._spec(node_id).host

    def forward_port(self, node_id: str) -> int:
        """rqlited forwards to the leader's Raft port (its cluster service is muxed
        there), the embedded node to its HTTP port."""
        spec = self._spec(node_id)
        return spec.raft_port if self.engine == "rqlited" else spec.http_port

    def partition(self, components: Iterable[Iterable[str]]) -> None:
        """Cut the network between components (see :mod:`harness.cluster.partition`).

        Any earlier partition is healed first. Needs a cluster started with ``netns=True``.
        """
        self._require_netns()
        addresses = {i: s.host for i, s in self._specs.items()}
        try:
            rules = partition_rules.apply_rules(components, addresses)
        except ValueError as exc:
            raise ClusterError(str(exc)) from exc
        self._cut(rules)

    def partition_one_way(self, cuts: Iterable[Iterable[str]]) -> None:
        """Drop what ``a`` sends to ``b`` for each ``(a, b)`` in ``cuts``, not the reverse
        (:func:`harness.cluster.partition.one_way_rules`); :meth:`heal` undoes it."""
        self._require_netns()
        addresses = {i: s.host for i, s in self._specs.items()}
        try:
            rules = partition_rules.one_way_rules(cuts, addresses)
        except ValueError as exc:
            raise ClusterError(str(exc)) from exc
        self._cut(rules)

    def _require_netns(self) -> None:
        if self._network is None:
            raise ClusterError(
                "partitions need each node in its own network namespace: start the cluster "
                "with netns=True (--netns, root only) or use the Docker backend"
            )

    def _cut(self, rules: dict[str, list[list[str]]]) -> None:
        """Heal, then run ``rules`` (per node) in the nodes' namespaces."""
        with self._lock:
            self.heal()
            self._partitioned = list(rules)  # saved first: a crash mid-way can still heal
            self._save()
            try:
                self._network.run_in_members(rules, check=True)
            except BaseException:
                self.heal()
                raise

    def heal(self) -> None:
        """Remove exactly the rules :meth:`partition` added; nothing when there are none."""
        if self._network is None:
            return
        with self._lock:
            # a half-applied partition may lack some of these: ignore "not found"
            self._network.run_in_members(partition_rules.heal_rules(self._partitioned), check=False)
            self._partitioned = []
            self._save()

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

    def _apply_time_zone(self, node_id: str, tzif: bytes | None) -> tuple[str, str] | None:
        """The bytes go to ``DIR/<id>/zone.tzif`` (rewritten in place, see
        :mod:`harness.zonefile`) and the node restarts with ``TZ=<that file>`` (both
        engines read ``TZ`` once, at start): SIGTERM, SIGKILL after 5 s, start on its data
        (:meth:`~harness.cluster.base.Cluster.set_time_zone` then waits for it)."""
        with self._lock:
            spec = self._spec(node_id)
            if spec.state in ("new", "stopped"):
                raise ClusterError(f"cannot set node {node_id}'s time zone: it is {spec.state}")
            if tzif is not None:
                zonefile.write(spec.zone_file, tzif)
            spec.tz = "UTC" if tzif is None else str(spec.zone_file)
            self._save()
            if spec.state == "killed":
                return None
            if self._alive(spec):
                send_signal(spec.pid, signal.SIGTERM)
                send_signal(spec.pid, signal.SIGCONT)  # a paused node must run to exit
                if not self._wait_gone(spec, 5.0):
                    send_signal(spec.pid, signal.SIGKILL)
                    if not self._wait_gone(spec, 5.0):
                        raise ClusterError(f"node {node_id} (pid {spec.pid}) survived SIGKILL")
            self._launch(spec)
        return spec.url, f"TZ={spec.tz}"
