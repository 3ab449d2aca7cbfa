"""What every backend's membership changes share (capability ``membership``): asking a
member to remove a node (rqlite's ``DELETE /remove``), reading the members from the
leader's ``/status``, waiting for a joiner to be listed, and the steps of a removal
(:class:`MembershipChanges`).

Each backend's mixin subclasses :class:`MembershipChanges`:
:mod:`harness.cluster.local.membership`, :mod:`harness.cluster.docker.membership`,
:mod:`harness.cluster.ssh.membership`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .base import ClusterError, NodeInfo, http_request

#: how long a membership change waits for the cluster (a leader, the change committed)
CHANGE_TIMEOUT = 30.0
#: seconds between two looks at the members while a joiner is awaited
POLL = 0.05


class MembershipError(ClusterError):
    """A member could not be removed or added; the message says which and why."""


class MembershipChanges:
    """:meth:`members`, :meth:`remove_node` and the wait of an ``add_node``, as every
    backend does them; a backend's mixin gives :meth:`_removal_via`,
    :meth:`_retire_member`, ``add_node`` and, when some clusters of it cannot change
    members, :meth:`membership_problem`. The cluster gives ``wait_for_leader``."""

    #: how long a change waits for the cluster by default
    change_timeout: float = CHANGE_TIMEOUT
    #: seconds between two looks at the members while a joiner is awaited
    change_poll: float = POLL
    #: whether a change's waits ask the cluster for dead nodes between probes (SSH: no,
    #: a round trip per host, seconds on a loaded machine, held each change up)
    change_checks_dead: bool = True
    _lock: threading.RLock

    def membership_problem(self) -> str | None:
        """Why members cannot be added or removed here (None: they can)."""
        return None

    def members(self, timeout: float = 5.0) -> list[str]:
        """The ids of the members as the leader's ``/status`` lists them, sorted."""
        return leader_members(self._change_leader(timeout, all_ready=False), timeout)

    def _change_leader(self, timeout: float, all_ready: bool = True) -> NodeInfo:
        """The leader, waited for as a change waits (:attr:`change_checks_dead`)."""
        wait = self.wait_for_leader  # type: ignore[attr-defined]
        return wait(timeout, all_ready=all_ready, check_dead=self.change_checks_dead)

    def remove_node(self, node_id: str, timeout: float | None = None) -> None:
        """Remove a running member through ``/remove`` (asking the others, else itself),
        then stop it and wipe its data (:meth:`_retire_member`); wait for a leader."""
        problem = self.membership_problem()
        if problem:
            raise MembershipError(problem)
        timeout = self.change_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        with self._lock:
            via = self._removal_via(node_id)
        remove_through(via, node_id, self.members, deadline, timeout)
        with self._lock:
            self._retire_member(node_id)
        self._change_leader(max(1.0, deadline - time.monotonic()))

    def _removal_via(self, node_id: str) -> list[tuple[str, str]]:
        """(id, URL) of the members to ask to remove ``node_id``, which must be running
        (else :class:`MembershipError` saying what it is); under the lock."""
        raise NotImplementedError

    def _retire_member(self, node_id: str) -> None:
        """Stop the removed ``node_id`` and wipe its data; under the lock."""
        raise NotImplementedError

    def _await_joiner(
        self, node_id: str, timeout: float | None, give_up: Callable[[str], str]
    ) -> str:
        """Wait (``timeout``, else :attr:`change_timeout`) until ``node_id`` is a member
        (:func:`wait_until_member`); its id."""
        wait = self.change_timeout if timeout is None else timeout
        return wait_until_member(
            node_id, wait, self._change_leader, self.members, give_up, self.change_poll
        )


def leader_members(lead: Any, timeout: float) -> list[str]:
    """The ids of the members as the leader ``lead`` (a NodeInfo) lists them in
    ``/status``, sorted."""
    code, body = http_request("GET", f"{lead.url}/status", None, timeout)
    if code != 200:
        raise MembershipError(f"{lead.id}: /status answered HTTP {code}")
    return sorted(n["id"] for n in json.loads(body)["store"]["nodes"])


def wait_until_member(
    node_id: str,
    timeout: float,
    wait_leader: Callable[[float], Any],
    members: Callable[[], list[str]],
    give_up: Callable[[str], str],
    poll: float = POLL,
) -> str:
    """Wait up to ``timeout`` seconds until the leader (``wait_leader(seconds)``) lists
    ``node_id`` among the ``members()``; return the id. When the time is up,
    ``give_up(last)`` discards the joiner and returns what went wrong (``last``, what the
    last try said, or more), which :class:`MembershipError` names."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            wait_leader(max(1.0, deadline - time.monotonic()))
            if node_id in members():
                return node_id
            last = "the leader does not list it yet"
        except ClusterError as exc:
            last = str(exc)
        if time.monotonic() >= deadline:
            raise MembershipError(f"node {node_id} did not join in {timeout:g}s: {give_up(last)}")
        time.sleep(poll)


def remove_through(
    via: Sequence[tuple[str, str]],
    node_id: str,
    members: Callable[[], list[str]],
    deadline: float,
    timeout: float,
) -> None:
    """Ask the nodes ``via`` ((id, URL), in turn) to remove ``node_id`` (rqlite's
    ``DELETE /remove``) until one agrees and ``members()`` no longer lists it; by
    ``deadline`` (``timeout`` s after the start), else :class:`MembershipError` naming
    the last answer."""
    body = json.dumps({"id": node_id}).encode()
    last = ""
    while True:
        code = 0
        for nid, url in via:
            try:
                code, text = http_request("DELETE", f"{url}/remove", body, 20.0)
            except OSError as exc:
                code, text = 0, str(exc).encode()
            if code == 200:
                break
            last = f"{nid} answered {code or 'nothing'}: {text[:200].decode(errors='replace')}"
        if code == 200:
            try:
                if node_id not in members():
                    return
                last = "the leader still lists it"
            except ClusterError as exc:
                last = str(exc)
        if time.monotonic() >= deadline:
            raise MembershipError(f"could not remove node {node_id} in {timeout:g}s: {last}")
        time.sleep(0.5)
