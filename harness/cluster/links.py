"""Degraded links inside a node's network namespace: packet loss and slow links.

Two independent mechanisms, each undone on its own (both may hold one node at once, and
beside a partition):

- **loss** (:func:`loss_rules`): iptables rules in a chain of the project's own
  (:data:`CHAIN`) that drop each packet from and to the node's peers with probability
  ``rate`` (``-m statistic --mode random``), ``INPUT`` and ``OUTPUT`` jumping to it. Every
  rule and jump carries a comment naming the cluster (:data:`COMMENT_PREFIX`), and
  :func:`loss_heal_rules` deletes exactly those, so a partition's heal
  (:mod:`harness.cluster.partition`, chain ``RQUEUE-PARTITION``) and a loss's heal never
  touch each other's rules. Traffic to anything but a peer (the clients) is untouched.
- **shape** (:func:`shape_rules`): a root qdisc of handle :data:`HANDLE` on the node's
  interface (its egress): ``tbf`` at ``rate``; with a ``delay`` (and ``jitter``) ``netem``
  under it, where the kernel has netem (:func:`netem_problem` finds out once, in a
  namespace of its own). :func:`shape_heal_rules` deletes that root qdisc only when its
  handle is the project's.

:class:`LinkFaults` keeps which node suffers what and runs the argv lists through the
backend's runner (``ip netns exec NS`` locally, ``nsenter -t PID -n`` for a container),
so a container that starts again (a new namespace) gets its faults back.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness.cluster.base import LINKS, ClusterError

#: the iptables chain holding every loss rule the project adds in a namespace
CHAIN = "RQUEUE-LINKS"
#: the built-in chains that jump to :data:`CHAIN`
HOOKS = ("INPUT", "OUTPUT")
#: each loss rule's comment: this, then the cluster's tag
COMMENT_PREFIX = "rqueue-links:"
#: the handle of the root qdisc a slow link puts on the node's interface (netem's child
#: tbf takes :data:`CHILD_HANDLE`)
HANDLE = "5151:"
CHILD_HANDLE = "5152:"
#: the node's interface inside its namespace (the netns backend's and Docker's alike)
DEVICE = "eth0"
#: the mechanisms a nemesis op's value names
LOSS_MECHANISM = "iptables-statistic"
TBF, NETEM = "tbf", "netem+tbf"
#: a tbf's bucket: this many seconds of its rate, never under :data:`MIN_BURST` bytes (a
#: few full frames), and the longest a packet may wait in its queue before it is dropped
BURST_SECONDS, MIN_BURST, LATENCY_MS = 0.05, 8192, 500

_RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$")
_SCALE = {"bit": 1, "kbit": 1_000, "mbit": 1_000_000, "gbit": 1_000_000_000}


def rate_bits(rate: str) -> int:
    """Bits per second of a tc rate such as ``"256kbit"`` or ``"1.5mbit"`` (units: bit,
    kbit, mbit, gbit; tc's own meaning, powers of 1000). :class:`ValueError` when not one."""
    m = _RATE.match(rate.strip().lower()) if isinstance(rate, str) else None
    bits = int(float(m.group(1)) * _SCALE[m.group(2)]) if m else 0
    if bits < 8:
        raise ValueError(
            f"a rate as tc writes it, at least 8bit: a number and bit, kbit, mbit or gbit "
            f"(e.g. '256kbit'), got {rate!r}"
        )
    return bits


def _ipt(iptables: str) -> list[str]:
    return [iptables, "-w", "5"]


def _comment(tag: str) -> list[str]:
    return ["-m", "comment", "--comment", f"{COMMENT_PREFIX}{tag}"]


def loss_rules(
    peers: Iterable[str], rate: float, tag: str, *, iptables: str = "iptables"
) -> list[list[str]]:
    """The argv lists that drop packets from and to every address in ``peers`` with
    probability ``rate`` (0 < rate <= 1), run inside one node's namespace after
    :func:`loss_heal_rules` (they add the chain, which must not exist yet)."""
    if not 0 < rate <= 1:
        raise ValueError(f"a loss rate is a probability above 0 and at most 1, got {rate!r}")
    ipt, tagged = _ipt(iptables), _comment(tag)
    chance = ["-m", "statistic", "--mode", "random", "--probability", f"{rate:.6f}"]
    argvs = [[*ipt, "-N", CHAIN]]
    for peer in peers:
        for match in ("-s", "-d"):
            argvs.append([*ipt, "-A", CHAIN, match, peer, *chance, *tagged, "-j", "DROP"])
    argvs.extend([*ipt, "-I", hook, "1", *tagged, "-j", CHAIN] for hook in HOOKS)
    return argvs


def loss_heal_rules(tag: str, *, iptables: str = "iptables") -> list[list[str]]:
    """The argv lists that remove exactly what :func:`loss_rules` added under ``tag`` (each
    may fail as "not found" when nothing was added: run them unchecked)."""
    ipt = _ipt(iptables)
    argvs = [[*ipt, "-D", hook, *_comment(tag), "-j", CHAIN] for hook in HOOKS]
    return [*argvs, [*ipt, "-F", CHAIN], [*ipt, "-X", CHAIN]]


@dataclass(frozen=True)
class Shape:
    """A slow link: ``rate`` as tc writes it, and ``delay`` ± ``jitter`` milliseconds
    (netem only) on what the node sends."""

    rate: str
    delay: float = 0.0
    jitter: float = 0.0

    @property
    def needs_netem(self) -> bool:
        return self.delay > 0 or self.jitter > 0

    @property
    def mechanism(self) -> str:
        return NETEM if self.needs_netem else TBF


def _tbf(rate: str) -> list[str]:
    bits = rate_bits(rate)
    burst = max(MIN_BURST, int(bits / 8 * BURST_SECONDS))
    return ["tbf", "rate", rate, "burst", str(burst), "latency", f"{LATENCY_MS}ms"]


def shape_rules(shape: Shape, *, device: str = DEVICE) -> list[list[str]]:
    """The argv lists that slow what the node sends on ``device`` to ``shape``, run inside
    its namespace after :func:`shape_heal_rules`."""
    qdisc = ["tc", "qdisc", "add", "dev", device]
    if not shape.needs_netem:
        return [[*qdisc, "root", "handle", HANDLE, *_tbf(shape.rate)]]
    delay = ["delay", f"{shape.delay:g}ms"] + [f"{shape.jitter:g}ms"] * (shape.jitter > 0)
    return [
        [*qdisc, "root", "handle", HANDLE, "netem", *delay],
        [*qdisc, "parent", f"{HANDLE}1", "handle", CHILD_HANDLE, *_tbf(shape.rate)],
    ]


def shape_heal_rules(*, device: str = DEVICE) -> list[list[str]]:
    """Delete the root qdisc of ``device`` if, and only if, it is the project's
    (:data:`HANDLE`); the interface falls back to its default qdisc."""
    return [["tc", "qdisc", "del", "dev", device, "root", "handle", HANDLE]]


def shape_error(text: str) -> str:
    """What tc said when a shape could not be made, in one line (netem missing named)."""
    if "qdisc kind is unknown" in text and "netem" in text:
        return f"{NETEM_MISSING} ({text.strip()})"
    return " ".join(text.split()) or "tc failed"


#: the refusal of a delay on a kernel without netem
NETEM_MISSING = (
    "a link delay needs the kernel's netem qdisc (sch_netem), which this kernel lacks "
    "(tc: 'Specified qdisc kind is unknown')"
)


#: what :func:`netem_problem` found, once it found it for sure (a failure to test is not kept)
_netem: list[str | None] = []


def netem_problem() -> str | None:
    """Why a delay cannot be put on a link here (None: netem works), found once per process
    by adding a netem qdisc to ``lo`` in a namespace made for it and removed at once."""
    if not _netem:
        found, sure = _probe_netem()
        if not sure:
            return found
        _netem.append(found)
    return _netem[0]


def _probe_netem() -> tuple[str | None, bool]:
    """(the problem, None if none; whether the probe could tell)."""
    if os.geteuid() != 0 or not shutil.which("tc") or not shutil.which("ip"):
        return "a link delay needs root with ip and tc (netem), to test and to add it", False
    ns = f"rqueue-netem-probe-{secrets.token_hex(3)}"
    try:
        subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True, timeout=15)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot make a namespace to test for netem: {exc}", False
    argv = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem"]
    try:
        res = subprocess.run([*argv, "delay", "1ms"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot test for netem: {exc}", False
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=15)
    if res.returncode == 0:
        return None, True
    if "qdisc kind is unknown" in res.stderr:
        return NETEM_MISSING, True
    return f"a netem qdisc could not be added: {' '.join(res.stderr.split())}", False


#: runs a node's argv lists in its namespace: (node id, argv lists, check) -> None,
#: raising :class:`ClusterError` on the first failure when ``check``
Runner = Callable[[str, Sequence[Sequence[str]], bool], None]


class LinkFaults:
    """The degraded links of one cluster's nodes, applied through ``run``.

    ``tag`` names the cluster in every loss rule; ``peers(node)`` is the addresses of the
    node's peers now; ``reachable(node)`` whether its namespace exists now (a stopped
    container's does not: its faults wait for :meth:`reapply`). ``lock``: the backend's
    own, when it calls :meth:`reapply` holding it and ``peers`` takes it (one lock, one
    order).
    """

    def __init__(
        self,
        tag: str,
        run: Runner,
        peers: Callable[[str], list[str]],
        reachable: Callable[[str], bool] = lambda node: True,
        lock: threading.RLock | None = None,
    ) -> None:
        self.tag, self._run, self._peers, self._reachable = tag, run, peers, reachable
        self.loss: dict[str, float] = {}
        self.shapes: dict[str, Shape] = {}
        self._lock = lock or threading.RLock()

    def set_loss(self, node: str, rate: float) -> None:
        """Drop ``rate`` of the packets between ``node`` and its peers (replacing any loss
        it had)."""
        with self._lock:
            self.loss[node] = rate
            self._apply_loss(node)

    def clear_loss(self, node: str) -> None:
        with self._lock:
            self.loss.pop(node, None)
            if self._reachable(node):
                self._run(node, loss_heal_rules(self.tag), False)

    def set_shape(self, node: str, shape: Shape) -> None:
        """Slow what ``node`` sends to ``shape`` (replacing any shape it had)."""
        with self._lock:
            self.shapes[node] = shape
            self._apply_shape(node)

    def clear_shape(self, node: str) -> None:
        with self._lock:
            self.shapes.pop(node, None)
            if self._reachable(node):
                self._run(node, shape_heal_rules(), False)

    def reapply(self, node: str) -> None:
        """Put ``node``'s faults on it again (its namespace is new: a container started)."""
        with self._lock:
            if node in self.loss:
                self._apply_loss(node)
            if node in self.shapes:
                self._apply_shape(node)

    def forget(self) -> None:
        """Drop every record: the namespaces, and the rules in them, are gone."""
        with self._lock:
            self.loss.clear()
            self.shapes.clear()

    def _apply_loss(self, node: str) -> None:
        if not self._reachable(node):
            return
        rules = loss_rules(self._peers(node), self.loss[node], self.tag)
        self._run(node, loss_heal_rules(self.tag), False)
        try:
            self._run(node, rules, True)
        except BaseException:
            self._run(node, loss_heal_rules(self.tag), False)
            raise

    def _apply_shape(self, node: str) -> None:
        if not self._reachable(node):
            return
        self._run(node, shape_heal_rules(), False)
        try:
            self._run(node, shape_rules(self.shapes[node]), True)
        except ClusterError as exc:
            self._run(node, shape_heal_rules(), False)
            why = shape_error(str(exc))
            raise ClusterError(f"cannot slow the links of {node}: {why}") from None


def addresses_except(addresses: Mapping[str, str], node: str) -> list[str]:
    """The addresses of every node but ``node``, in the mapping's order."""
    return [a for n, a in addresses.items() if n != node]


class LinkControl:
    """The link faults of :class:`harness.cluster.base.Cluster` (``set_link_loss`` and the
    rest) for a backend that keeps a :class:`LinkFaults`: mixed in before ``Cluster``, the
    backend gives it by :meth:`_link_faults`, and has it when ``"links"`` is in its
    ``capabilities``."""

    def _link_faults(self) -> LinkFaults:
        raise NotImplementedError

    def _link_target(self, node_id: str) -> LinkFaults:
        """The cluster's :class:`LinkFaults`, once ``node_id`` is known to be one of its nodes
        and the cluster can degrade links."""
        problem = self.capability_problem(LINKS)
        if problem is not None:
            raise ClusterError(problem)
        ids = [n.id for n in self.nodes()]
        if node_id not in ids:
            raise ClusterError(f"no node {node_id!r} in this cluster (nodes: {', '.join(ids)})")
        return self._link_faults()

    def set_link_loss(self, node_id: str, rate: float) -> None:
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate <= 1:
            raise ClusterError(f"a loss rate is a probability in (0, 1], got {rate!r}")
        self._link_target(node_id).set_loss(node_id, float(rate))

    def clear_link_loss(self, node_id: str) -> None:
        if LINKS in self.capabilities:
            self._link_target(node_id).clear_loss(node_id)

    def set_link_shape(
        self, node_id: str, rate: str, delay: float = 0.0, jitter: float = 0.0
    ) -> None:
        try:
            rate_bits(rate)
        except ValueError as exc:
            raise ClusterError(str(exc)) from None
        shape = Shape(rate, float(delay), float(jitter))
        target = self._link_target(node_id)
        if shape.needs_netem and (problem := self.link_delay_problem()) is not None:
            raise ClusterError(problem)
        target.set_shape(node_id, shape)

    def clear_link_shape(self, node_id: str) -> None:
        if LINKS in self.capabilities:
            self._link_target(node_id).clear_shape(node_id)

    def link_delay_problem(self) -> str | None:
        return self.capability_problem(LINKS) or netem_problem()
