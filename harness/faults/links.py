"""Degrade the links of the ``target`` nodes and restore them: ``lossy-link`` (each packet
between a node and its peers dropped with probability ``rate``, both ways) and
``slow-link`` (what a node sends limited to ``rate``, and delayed by ``delay`` ± ``jitter``
ms where the kernel has netem). Recorded as ``link-loss`` then ``link-restore`` and
``link-slow`` then ``link-restore``, the value naming the ``nodes``, the parameters, the
``mechanism`` that made it (``iptables-statistic``; ``tbf``, or ``netem+tbf`` with a
delay) and the ``detail`` a fault's label shows (``lossy-link n1 30%``). The cluster side
is :mod:`harness.cluster.links`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from ..cluster.base import LINKS, Cluster
from ..cluster.links import LOSS_MECHANISM, Shape, rate_bits
from .base import NODE_TARGETS, RECOVERY, Action, FaultKind, ParamReader, Stage
from .nodes import on_every_node, start_each


def _per_node(
    kind: type[FaultKind],
    value: dict[str, Any],
    nodes: list[str],
    apply: Callable[[str], None],
    restore: Callable[[str], None],
) -> Action:
    """``apply`` to every node (restoring those done when one fails), ``restore`` every
    node at the end (all of them, also after one fails; then raise)."""

    def restore_all(which: Sequence[str]) -> None:
        on_every_node("restore the links of", which, restore)

    def act() -> None:
        start_each(kind.f_start, nodes, apply, restore_all)

    return kind.action(value, act, lambda: restore_all(nodes))


class LossyLink(FaultKind):
    name = "lossy-link"
    f_start, f_end = "link-loss", "link-restore"
    #: ``rate``: the probability that a packet between the node and a peer is dropped
    params: ClassVar[Mapping[str, Any]] = {"rate": 0.3, "target": "leader"}
    #: heavy loss on the leader's links costs elections (Raft's heartbeats lost)
    recovery = RECOVERY
    needs = frozenset({LINKS})
    min_nodes = 2

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        rate = r.probability("rate", 0.3)
        if rate == 0:
            raise r.fail("rate", "a probability above 0 (the share of packets dropped)", 0)
        return {"rate": rate, "target": r.text("target", "leader", choices=NODE_TARGETS)}

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        nodes, rate, c = stage.targets(params["target"]), params["rate"], stage.cluster
        value = {
            "nodes": nodes,
            "rate": rate,
            "mechanism": LOSS_MECHANISM,
            "detail": f"{rate * 100:g}%",
        }
        return _per_node(
            cls,
            value,
            nodes,
            lambda n: c.set_link_loss(n, rate),
            c.clear_link_loss,
        )


class SlowLink(FaultKind):
    name = "slow-link"
    f_start, f_end = "link-slow", "link-restore"
    #: ``rate``: what the node may send, as tc writes it (``"256kbit"``); ``delay`` and
    #: ``jitter``: milliseconds added to each packet it sends (netem: refused before the
    #: run on a kernel without it)
    params: ClassVar[Mapping[str, Any]] = {
        "rate": "1mbit",
        "delay": 0.0,
        "jitter": 0.0,
        "target": "leader",
    }
    #: a leader that cannot send its heartbeats in time loses its followers
    recovery = RECOVERY
    needs = frozenset({LINKS})

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        rate = r.text("rate", "1mbit")
        try:
            rate_bits(rate)
        except ValueError:
            raise r.fail(
                "rate", "a rate as tc writes it, e.g. '256kbit' or '1mbit'", rate
            ) from None
        delay = r.number("delay", 0.0)
        jitter = r.number("jitter", 0.0)
        if jitter > 0 and delay == 0:
            raise r.fail("jitter", "0 unless a 'delay' is given (netem varies a delay)", jitter)
        target = r.text("target", "leader", choices=NODE_TARGETS)
        return {"rate": rate, "delay": delay, "jitter": jitter, "target": target}

    @classmethod
    def cluster_problem(cls, cluster: Cluster, params: Mapping[str, Any]) -> str | None:
        if not (params["delay"] or params["jitter"]):
            return None
        return cluster.link_delay_problem()

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        nodes, c = stage.targets(params["target"]), stage.cluster
        shape = Shape(params["rate"], params["delay"], params["jitter"])
        detail = shape.rate
        if shape.needs_netem:
            detail += f" +{shape.delay:g}" + (f"±{shape.jitter:g}" if shape.jitter else "") + "ms"
        value: dict[str, Any] = {"nodes": nodes, "rate": shape.rate}
        if shape.needs_netem:
            value.update(delay=shape.delay, jitter=shape.jitter)
        value.update(mechanism=shape.mechanism, detail=detail)
        return _per_node(
            cls,
            value,
            nodes,
            lambda n: c.set_link_shape(n, shape.rate, shape.delay, shape.jitter),
            c.clear_link_shape,
        )
