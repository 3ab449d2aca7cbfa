"""Members removed from and added to a running local cluster (capability ``membership``).

A mixin of :class:`harness.cluster.local.cluster.LocalCluster` (embedded engine, loopback):

- :meth:`remove_node`: ``DELETE /remove {"id": ID}`` sent to a running member other than
  the node (a follower forwards it to the leader; a leader removing itself steps down once the
  removal commits: :mod:`harness.node.membership`), waited for until the leader's ``/status`` no
  longer lists it; then the node's process is stopped and its data directory wiped. Its
  state is ``removed``: :meth:`nodes` no longer lists it.
- :meth:`add_node`: a node started empty with ``--join`` (every running member's HTTP
  address), waited for until the leader lists it and every running node is ready. A
  removed node's id comes back on its old ports; a new id gets new ones.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import Any

from ..base import ClusterError
from ..engines import NodeSpec
from ..membership import MembershipChanges, MembershipError
from ..netns import NETNS_HTTP_PORT, NETNS_RAFT_PORT
from ..ports import free_ports
from .processes import send_signal


class LocalMembership(MembershipChanges):
    """:meth:`remove_node`, :meth:`add_node` and :meth:`members` of a local cluster."""

    directory: Path
    engine: str
    _specs: dict[str, NodeSpec]
    _network: Any

    # LocalCluster provides _spec, _alive, _wait_gone, _launch, _save, _write_clock and
    # wait_for_leader (no stubs here: they would come first in its method order)

    def membership_problem(self) -> str | None:
        """Why members cannot be added or removed here (None: they can)."""
        if self.engine != "embedded":
            return f"the {self.engine} engine's local cluster cannot add or remove a member"
        return None

    def _removal_via(self, node_id: str) -> list[tuple[str, str]]:
        spec = self._spec(node_id)
        if spec.state != "running" or not self._alive(spec):
            raise MembershipError(f"cannot remove node {node_id}: it is {spec.state}")
        others = [s for s in self._specs.values() if s.state == "running" and s is not spec]
        return [(s.id, s.url) for s in others or [spec]]

    def _retire_member(self, node_id: str) -> None:
        spec = self._spec(node_id)
        _stop(self, spec)
        shutil.rmtree(spec.data_dir, ignore_errors=True)
        spec.state, spec.pid = "removed", None
        self._save()

    def add_node(self, node_id: str | None = None, timeout: float | None = None) -> str:
        """Start a node that joins the running cluster (a removed one's id, or ``node_id``,
        or a new ``nK``) and wait until it is a member and every running node is ready;
        its id."""
        problem = self.membership_problem()
        if problem:
            raise MembershipError(problem)
        with self._lock:
            running = [s for s in self._specs.values() if s.state == "running"]
            if not running:
                raise MembershipError("no running member to join through")
            if node_id is None:
                removed = sorted(i for i, s in self._specs.items() if s.state == "removed")
                node_id = removed[0] if removed else _next_id(self._specs)
            spec = self._specs.get(node_id)
            if spec is None:
                spec = self._new_spec(node_id)
                spec.tz = running[0].tz
                # a new dict, not one changed in place: nodes() iterates it unlocked
                self._specs = {**self._specs, node_id: spec}
            elif spec.state != "removed":
                raise MembershipError(f"cannot add node {node_id}: it is {spec.state}")
            spec.join = ",".join(s.http_addr for s in running)
            shutil.rmtree(spec.data_dir, ignore_errors=True)
            Path(spec.dir).mkdir(parents=True, exist_ok=True)
            self._write_clock(spec, 0.0)
            self._launch(spec)

        def give_up(last: str) -> str:
            self._discard_joiner(node_id)
            return last

        return self._await_joiner(node_id, timeout, give_up)

    def _new_spec(self, node_id: str) -> NodeSpec:
        """Where a node new to the cluster listens: free loopback ports, or, in a
        ``--netns`` cluster, a namespace of its own on the bridge (saved at once, so stop
        and the reaper remove it)."""
        directory = str(self.directory / node_id)
        if self._network is None:
            http, raft = free_ports(2)
            return NodeSpec(node_id, "127.0.0.1", http, raft, directory)
        ip = self._network.add_member(node_id).ip
        self._save()
        return NodeSpec(node_id, ip, NETNS_HTTP_PORT, NETNS_RAFT_PORT, directory)

    def _discard_joiner(self, node_id: str) -> None:
        """A node that did not join in time: removed as a member would be (it may be one
        already), else stopped and wiped all the same; it is ``removed`` either way."""
        try:
            self.remove_node(node_id, timeout=15.0)
        except ClusterError:
            with self._lock:
                self._retire_member(node_id)


def _next_id(specs: dict[str, NodeSpec]) -> str:
    taken = {int(i[1:]) for i in specs if i[:1] == "n" and i[1:].isdigit()}
    return f"n{max(taken, default=0) + 1}"


def _stop(cluster: LocalMembership, spec: NodeSpec) -> None:
    """SIGTERM the node (SIGKILL after 5 s) and wait for its process to be gone."""
    if not cluster._alive(spec):
        return
    send_signal(spec.pid, signal.SIGTERM)
    send_signal(spec.pid, signal.SIGCONT)
    if not cluster._wait_gone(spec, 5.0):
        send_signal(spec.pid, signal.SIGKILL)
        if not cluster._wait_gone(spec, 5.0):
            raise MembershipError(f"node {spec.id} (pid {spec.pid}) survived SIGKILL")
