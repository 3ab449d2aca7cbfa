"""What every backend's membership changes share (capability ``membership``): asking a
member to remove a node (rqlite's ``DELETE /remove``), reading the members from the
leader's ``/status``, and waiting for a joiner to be listed.

Each backend's mixin applies them: :mod:`harness.cluster.local.membership`,
:mod:`harness.cluster.docker.membership`, :mod:`harness.cluster.ssh.membership`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from .base import ClusterError, http_request

#: how long a membership change waits for the cluster (a leader, the change committed)
CHANGE_TIMEOUT = 30.0
#: seconds between two looks at the members while a joiner is awaited
POLL = 0.05


class MembershipError(ClusterError):
    """A member could not be removed or added; the message says which and why."""


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
