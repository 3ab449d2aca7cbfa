"""Lose the leader's replies to a follower's forwarded requests (``forward-reply-loss``).

A follower forwards a write to the leader over a TCP connection it opens itself: real
rqlite to the leader's Raft address (its cluster service shares the Raft port through
rqlite's mux: ``cmd/rqlited/main.go``, ``mux.Listen(cluster.MuxClusterHeader)``), the
project's node to the leader's HTTP port. On such a connection every packet the leader
sends comes *from the leader's listening port*; on a connection the leader opened (Raft's
AppendEntries, InstallSnapshot) its packets come from an ephemeral port. So one rule in
the follower's namespace (or on its host) drops exactly the leader's side of the
connections the follower opened to it::

    -I INPUT 1 -p tcp -s LEADER --sport PORT ! --tcp-flags SYN SYN -j DROP

The SYN-ACK passes (the connection opens and the request is sent, so the leader applies
it); the leader's ACKs, its reply and its FIN do not, so the follower's read times out at
its deadline: rqlite's ``writeCommandReadResponse`` with the request's ``?timeout``. No
conntrack match: a keep-alive connection opened before the rule would be picked up mid
stream with its direction guessed from the first packet seen; the port alone tells.

Every rule carries a comment naming the cluster (:data:`COMMENT_PREFIX` and its tag); the
heal deletes exactly the rules it added (the same argv with ``-D``, until none is left).
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable, Sequence

from harness.cluster.base import LINKS, ClusterError

#: each rule's comment: this, then the cluster's tag
COMMENT_PREFIX = "rqueue-fwd:"
#: how many copies of a rule the heal deletes at most (one is added per window)
MAX_COPIES = 8


def _match(leader: str, port: int) -> list[str]:
    return ["-p", "tcp", "-s", leader, "--sport", str(port), "!", "--tcp-flags", "SYN", "SYN"]


def comment(tag: str) -> str:
    """The comment of the rules of the cluster ``tag`` (local and Docker backends)."""
    return f"{COMMENT_PREFIX}{tag}"


def rule(leader: str, port: int, note: str) -> list[str]:
    """The rule's spec (after ``-I INPUT 1`` or ``-D INPUT``): drop what the leader at
    ``leader`` sends from ``port``, its SYN-ACK excepted; ``note``: its comment."""
    if not leader or not 0 < int(port) < 65536:
        raise ValueError(f"a leader address and a port in 1-65535, got {leader!r}:{port!r}")
    return [
        *_match(leader, port),
        "-m",
        "comment",
        "--comment",
        note,
        "-j",
        "DROP",
    ]


def apply_argvs(leader: str, port: int, note: str, iptables: str = "iptables") -> list[list[str]]:
    """The argv list that adds the rule in a follower's namespace."""
    return [[iptables, "-w", "5", "-I", "INPUT", "1", *rule(leader, port, note)]]


def heal_argvs(leader: str, port: int, note: str, iptables: str = "iptables") -> list[list[str]]:
    """The argv lists that delete the rule (run unchecked: the last ones find none)."""
    return [[iptables, "-w", "5", "-D", "INPUT", *rule(leader, port, note)]] * MAX_COPIES


def apply_text(leader: str, port: int, note: str) -> str:
    """The shell text that adds the rule on a host (after removing any copy of it)."""
    add = shlex.join(apply_argvs(leader, port, note)[0])
    return f"{heal_text(leader, port, note)}; {add}"


def heal_text(leader: str, port: int, note: str) -> str:
    """The shell text that deletes every copy of the rule on a host."""
    delete = shlex.join(heal_argvs(leader, port, note)[0])
    return f"while {delete} 2>/dev/null; do :; done; true"


#: runs a node's argv lists in its namespace: (node id, argv lists, check)
Runner = Callable[[str, Sequence[Sequence[str]], bool], None]


class ForwardLoss:
    """The forwarded-reply loss of one cluster's followers: which follower drops whose
    replies (``held``: follower -> (leader address, port)), applied through ``run``."""

    def __init__(self, tag: str, run: Runner) -> None:
        self.tag, self._run = tag, run
        self.held: dict[str, tuple[str, int]] = {}
        self._lock = threading.RLock()

    def set(self, follower: str, leader: str, port: int) -> None:
        with self._lock:
            self.clear(follower)
            self.held[follower] = (leader, port)
            try:
                self._run(follower, apply_argvs(leader, port, comment(self.tag)), True)
            except BaseException:
                self.clear(follower)
                raise

    def clear(self, follower: str) -> None:
        with self._lock:
            held = self.held.pop(follower, None)
            if held is not None:
                self._run(follower, heal_argvs(*held, comment(self.tag)), False)


class ForwardLossControl:
    """``forward_port``, ``set_forward_reply_loss`` and ``clear_forward_reply_loss`` for a
    backend: mixed in before ``Cluster``, it gives :meth:`_forward_loss` (a
    :class:`ForwardLoss`, or anything with ``set``/``clear``), :meth:`_node_address` (where
    the peers reach a node) and :meth:`forward_port`; it needs ``"links"`` (iptables in the
    nodes' namespaces or on their hosts)."""

    def _forward_loss(self) -> ForwardLoss:
        raise NotImplementedError

    def _node_address(self, node_id: str) -> str:
        raise NotImplementedError

    def forward_port(self, node_id: str) -> int:
        """The port a follower forwards to on ``node_id``: rqlited's Raft port, the
        project node's HTTP port."""
        raise ClusterError(f"the {self.engine} backend cannot lose forwarded replies")  # type: ignore[attr-defined]

    def _check_node(self, node_id: str) -> None:
        problem = self.capability_problem(LINKS)  # type: ignore[attr-defined]
        if problem is not None:
            raise ClusterError(problem)
        ids = [n.id for n in self.nodes()]  # type: ignore[attr-defined]
        if node_id not in ids:
            raise ClusterError(f"no node {node_id!r} in this cluster (nodes: {', '.join(ids)})")

    def set_forward_reply_loss(self, follower: str, leader: str) -> None:
        """Drop, at ``follower``, what ``leader`` sends on the connections ``follower``
        opened to its forwarding port (SYN-ACKs excepted), until
        :meth:`clear_forward_reply_loss`."""
        self._check_node(follower)
        self._check_node(leader)
        if follower == leader:
            raise ClusterError(f"{follower} cannot lose its own forwarded replies")
        self._forward_loss().set(follower, self._node_address(leader), self.forward_port(leader))

    def clear_forward_reply_loss(self, follower: str) -> None:
        if LINKS in self.capabilities:  # type: ignore[attr-defined]
            self._forward_loss().clear(follower)
