"""Members removed from and added to a running SSH cluster (capability ``membership``).

A mixin of :class:`harness.cluster.ssh.cluster.SshCluster` on the steps every backend
shares (:mod:`harness.cluster.membership`). One node per host, its id the host's name:

- :meth:`SshMembership.remove_node`: ``DELETE /remove {"id": ID}`` through another running
  member (:func:`~harness.cluster.membership.remove_through`), waited for until the leader
  no longer lists the node; then the node is killed on its host (SIGKILL, by pid and
  only after its run tag matched, waited for until it is gone) and its ``data`` folder
  emptied (the folder stays: it may be the mount point of the node's disk; only in the
  run's folder: the node's log stays there until :meth:`stop`). It is
  ``removed``: :meth:`nodes` no longer lists it.
- :meth:`SshMembership.add_node`: a removed node's host comes back, or a new id takes
  the next spare host: the inventory's hosts after the first N the cluster started on.
  The node starts with empty data and joins through every running member (the project's
  node: ``--join`` with their HTTP addresses; rqlited: ``-join`` with their Raft
  addresses, v6/v7 their HTTP URLs, no ``-bootstrap-expect``), waited for until the leader
  lists it and every running node is ready. A spare host's run folder is made when it is
  first used; its SSH session was opened, and the host checked, with the others at start.

Without a spare host left, a new id is refused in one line, and a scenario that grows
beyond the inventory is refused before it starts (:meth:`grow_problem`).
"""

from __future__ import annotations

import contextlib
import shlex
import threading
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from harness.cluster.base import ClusterError
from harness.cluster.membership import MembershipChanges, MembershipError
from harness.cluster.ssh import remote
from harness.cluster.ssh.inventory import Host, Inventory
from harness.cluster.ssh.session import Sessions
from harness.wording import plural

if TYPE_CHECKING:
    from harness.cluster.ssh.nodes import RemoteNode

#: how long a change waits: a node starts over SSH in seconds, more on a loaded host
CHANGE_TIMEOUT = 60.0
POLL = 0.25


def wipe_data(directory: str, run: str) -> str:
    """Shell text that empties the node's ``data`` folder in the run folder ``directory``
    and keeps the folder (nothing else: the log, pid and secret stay); refuses any folder
    that is not run ``run``'s. The folder stays because it may be the mount point of the
    node's own filesystem (:mod:`harness.cluster.ssh.disk`), which the node keeps for its
    return: ``rm -rf`` of it emptied it and then failed (``Device or resource busy``)."""
    if not directory.rstrip("/").endswith(f"/{remote.RUN_PREFIX}{run}"):
        raise ValueError(f"{directory} is not the run folder of run {run}")
    data = shlex.quote(directory.rstrip("/") + "/data")
    return f"if [ -d {data} ]; then find {data} -mindepth 1 -maxdepth 1 -exec rm -rf -- {{}} +; fi"


def grow_refusal(total: int, used: int, count: int = 1) -> str:
    """The one line for a grow beyond the inventory."""
    need = "a spare host" if count == 1 else f"{count} spare hosts"
    return f"grow needs {need}: the inventory has {plural(total, 'host')}, the cluster uses {used}"


class SshMembership(MembershipChanges):
    """:meth:`remove_node`, :meth:`add_node` and :meth:`members` of an SSH cluster; its
    waits probe over HTTP only (:attr:`change_checks_dead`): a joiner that died is named
    when its wait ends (:meth:`_joiner_problem`)."""

    change_timeout = CHANGE_TIMEOUT
    change_poll = POLL
    change_checks_dead = False

    inventory: Inventory
    sessions: Sessions
    run: str
    _nodes: dict[str, RemoteNode]
    _lock: threading.RLock
    _secret: str
    #: the inventory's hosts after the cluster's first N, in inventory order
    spares: tuple[Host, ...] = ()
    #: nodes removed (their hosts free to come back), by id; replaced, never changed in
    #: place (nodes() and stop() read it unlocked)
    _removed: Mapping[str, RemoteNode] = MappingProxyType({})

    # SshCluster provides _launch, _save, _clock_text, wait_for_leader (no stubs here:
    # they would come first in its method order)

    # -- hosts ------------------------------------------------------------------------------
    @property
    def all_hosts(self) -> tuple[Host, ...]:
        """The cluster's hosts from the start, then the spare ones."""
        return (*self.inventory.hosts, *self.spares)

    def used_nodes(self) -> list[RemoteNode]:
        """Every node this run started on a host: the members and the removed ones."""
        return [*self._nodes.values(), *self._removed.values()]

    def _free_spares(self) -> list[Host]:
        """Spare hosts never used by this run, in inventory order."""
        used = {n.host.name for n in self.used_nodes()}
        return [h for h in self.spares if h.name not in used]

    def new_node_ids(self, members: Sequence[str], count: int) -> list[str]:
        """New nodes take the spare hosts, under their names: the ones that left first
        (a grown node removed again), then those never used."""
        back = [h.name for h in self.spares if h.name in self._removed]
        fresh = [h.name for h in self._free_spares()]
        return [*back, *fresh][:count]

    def grow_problem(self, count: int) -> str | None:
        free = len(self.new_node_ids([], count))
        if count <= free:
            return None
        return grow_refusal(len(self.all_hosts), len(self.all_hosts) - free, count)

    # -- state ------------------------------------------------------------------------------
    def membership_state(self) -> dict[str, Any]:
        """What ``ssh-cluster.json`` keeps of membership: the spare hosts and the removed
        nodes (the added ones are among ``nodes``)."""
        removed = {
            n: {"dir": x.dir, "pid": x.pid, "join": x.join} for n, x in self._removed.items()
        }
        return {"spares": [h.name for h in self.spares], "removed": removed}

    def restore_membership(self, data: dict[str, Any], hosts: Sequence[Host]) -> None:
        """After :meth:`attach` made the nodes of the first hosts: the spare hosts
        (``hosts``: the inventory's), the nodes added on them and the removed ones."""
        from harness.cluster.ssh.nodes import RemoteNode

        by_name = {h.name: h for h in hosts}
        self.spares = tuple(by_name[n] for n in data.get("spares", ()) if n in by_name)
        nodes = dict(self._nodes)
        for name in data["nodes"]:
            if name not in nodes and name in by_name:
                host = by_name[name]
                nodes[name] = RemoteNode(host, remote.run_dir(host.data_dir, self.run))
        removed = {}
        for name, saved in data.get("removed", {}).items():
            node = nodes.pop(name, None) or RemoteNode(by_name[name], saved["dir"])
            node.dir, node.pid, node.state = saved["dir"], saved["pid"], "removed"
            node.join = saved.get("join", "")
            removed[name] = node
        self._nodes, self._removed = nodes, removed

    # -- membership -------------------------------------------------------------------------
    def _removal_via(self, node_id: str) -> list[tuple[str, str]]:
        node = self._nodes.get(node_id)
        if node is None or node.state != "running":
            state = node.state if node else "no member"
            raise MembershipError(f"cannot remove node {node_id}: it is {state}")
        via = [n for n in self._nodes.values() if n.state == "running" and n is not node]
        return [(n.host.name, n.host.url) for n in via or [node]]

    def _retire_member(self, node_id: str) -> None:
        self._retire(self._nodes[node_id])

    def _retire(self, node: RemoteNode) -> None:
        """Stop the node on its host, wipe its data; it is ``removed``."""
        stop = ""
        if node.pid is not None:  # no longer a member, its data about to go: no grace
            stop = remote.signal_node(node.pid, self.run, "KILL", wait_gone=True) + "; "
        self.sessions[node.host.name].run(stop + wipe_data(node.dir, self.run), timeout=60)
        node.state, node.pid = "removed", None
        # new dicts, not ones changed in place: nodes() iterates them unlocked
        self._nodes = {k: v for k, v in self._nodes.items() if v is not node}
        self._removed = {**self._removed, node.host.name: node}
        self._save()  # type: ignore[attr-defined]

    def add_node(self, node_id: str | None = None, timeout: float | None = None) -> str:
        """Start a node that joins the running cluster (a removed one, ``node_id``, or the
        next spare host) and wait until it is a member and every running node is ready;
        its id."""
        with self._lock:
            running = [n for n in self._nodes.values() if n.state == "running"]
            if not running:
                raise MembershipError("no running member to join through")
            node = self._joiner(node_id)
            fresh = node.host.name not in self._removed  # a spare host's first use
            node.join = ",".join(n.spec.http_addr for n in running)
            node_id = node.host.name
            self._removed = {k: v for k, v in self._removed.items() if v is not node}
            node.state, node.pid = "new", None
            self._nodes = {**self._nodes, node_id: node}
            self._save()  # type: ignore[attr-defined]
            try:
                self._prepare_joiner(node, ship=fresh and node.host.project_node)
                self._launch(node)  # type: ignore[attr-defined]
            except BaseException:
                with contextlib.suppress(Exception):
                    self._retire(node)
                raise

        def give_up(last: str) -> str:
            last = self._joiner_problem(node) or last
            self._discard_joiner(node)
            return last

        return self._await_joiner(node_id, timeout, give_up)

    def _joiner(self, node_id: str | None) -> RemoteNode:
        """The node to add: a removed one's, or a new one on a spare host."""
        from harness.cluster.ssh.nodes import RemoteNode

        if node_id is None:
            back = sorted(self._removed)
            free = self._free_spares()
            if back:
                return self._removed[back[0]]
            if not free:
                total = len(self.all_hosts)
                raise MembershipError(grow_refusal(total, total))
            node_id = free[0].name
        if node_id in self._nodes:
            raise MembershipError(f"cannot add node {node_id}: it is a member")
        if node_id in self._removed:
            return self._removed[node_id]
        free = self._free_spares()
        host = next((h for h in free if h.name == node_id), None)
        if host is None:
            total = len(self.all_hosts)
            if not free:
                raise MembershipError(grow_refusal(total, total))
            names = ", ".join(h.name for h in free)
            raise MembershipError(
                f"cannot add node {node_id}: no spare host of that name (spare: {names})"
            )
        return RemoteNode(host, remote.run_dir(host.data_dir, self.run))

    def _prepare_joiner(self, node: RemoteNode, ship: bool) -> None:
        """The joiner's run folder: made (a spare host's first use) or its data emptied,
        with the cluster secret, the clock at offset 0 and (``ship``) the project's node;
        one round trip."""
        d = shlex.quote(node.dir)
        clock = remote.write_file(f"{node.dir}/clock-offset", self._clock_text(node, 0.0) + "\n")  # type: ignore[attr-defined]
        secret = remote.write_file(f"{node.dir}/secret", self._secret + "\n")
        wipe = wipe_data(node.dir, self.run)
        pyz = remote.node_zipapp() if ship else None
        tail = f" && cat > {d}/node.pyz" if ship else ""
        self.sessions[node.host.name].run(
            f"{wipe} && mkdir -p {d}/data && chmod 700 {d} && {secret} && {clock}{tail}",
            stdin=pyz,
            timeout=60,
        )

    def _joiner_problem(self, node: RemoteNode) -> str | None:
        """Why the joiner did not join when it is no longer running: its log's end."""
        if node.pid is None:
            return None
        s = self.sessions[node.host.name]
        if s.run(remote.alive(node.pid, self.run), check=False).out.strip() == "yes":
            return None
        tail = s.run(f"tail -n 5 {shlex.quote(node.dir)}/node.log", check=False).out
        return f"it exited; its log ends: {' | '.join(tail.strip().splitlines())}"

    def _discard_joiner(self, node: RemoteNode) -> None:
        """A node that did not join in time: removed as a member would be (it may be one
        already), else stopped and wiped all the same; it is ``removed`` either way."""
        try:
            self.remove_node(node.host.name, timeout=20.0)
        except ClusterError:
            with self._lock:
                if node.host.name in self._nodes:
                    self._retire(node)
