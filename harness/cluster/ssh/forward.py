"""Forwarded replies lost on SSH hosts (``forward-reply-loss``): the rule of
:mod:`harness.cluster.forward_loss` on the follower's host, with the comment
``rqueue-ssh:fwd:<run>`` (:func:`comment`): under the backend's prefix, so the
inventory's sweep deletes it, but not a partition's (``rqueue-ssh:<run>``), so a heal
never touches it. The host's other traffic (SSH included) never matches: the rule names
the leader's address and its forwarding port as the source.
"""

from __future__ import annotations

from harness.cluster.forward_loss import ForwardLossControl, apply_text, heal_text
from harness.cluster.ssh import remote


def comment(run: str) -> str:
    """The comment of every forward-loss rule of ``run``."""
    return f"{remote.COMMENT_PREFIX}fwd:{run}"


class HostForwardLoss:
    """The forwarded-reply loss of one :class:`SshForward` cluster on its hosts."""

    def __init__(self, cluster: SshForward) -> None:
        self._c = cluster
        self.held: dict[str, tuple[str, int]] = {}

    def _text(self, leader: str, port: int, add: bool) -> str:
        return (apply_text if add else heal_text)(leader, port, comment(self._c.run))

    def set(self, follower: str, leader: str, port: int) -> None:
        self.clear(follower)
        self.held[follower] = (leader, port)
        self._c.sessions[follower].run(self._text(leader, port, True), sudo=True, timeout=60)

    def clear(self, follower: str) -> None:
        held = self.held.pop(follower, None)
        if held is not None:
            text = self._text(*held, False)
            self._c.sessions[follower].run(text, sudo=True, check=False, timeout=60)


class SshForward(ForwardLossControl):
    """``set_forward_reply_loss`` and the rest for :class:`.cluster.SshCluster`."""

    def _forward_loss(self) -> HostForwardLoss:  # type: ignore[override]
        with self._lock:
            if "_host_fwd" not in self.__dict__:
                self._host_fwd = HostForwardLoss(self)
            return self._host_fwd

    def _node_address(self, node_id: str) -> str:
        return self._nodes[node_id].host.address

    def forward_port(self, node_id: str) -> int:
        """The project's node forwards to the leader's HTTP port, rqlited to its Raft port."""
        h = self._nodes[node_id].host
        return h.http_port if h.project_node else h.raft_port
