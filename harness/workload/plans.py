"""What a claimer does with a lease, drawn up front, and the steps of its loop.

The claimer loop is written once as a generator of steps (:class:`Wait`, :class:`ClientCall`)
that a thread or an asyncio task drives (:mod:`harness.workload.workers`).
"""

from __future__ import annotations

import random
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from ..scenario import WorkloadSpec
from .record import Fused, Single


@dataclass(frozen=True)
class Plan:
    """One lease's fate: work ``work`` seconds (extending midway?), then ack or nack."""

    action: str  # "ack" | "nack"
    work: float
    delay: float = 0.0
    extend: bool = False
    stalled: bool = False


def plan_lease(rng: random.Random, spec: WorkloadSpec, stall_probability: float) -> Plan:
    """Draw what to do with a fresh lease (pure given ``rng``)."""
    r = rng.random()
    work = rng.uniform(*spec.work)
    if r < stall_probability:
        stall = spec.visibility * rng.uniform(1.3, 2.0)
        return Plan("ack", stall, stalled=True)
    r -= stall_probability
    if r < spec.nack_probability:
        return Plan("nack", work)
    r -= spec.nack_probability
    if r < spec.nack_delay_probability:
        return Plan("nack", work, delay=rng.uniform(*spec.nack_delay))
    extend = rng.random() < spec.extend_probability
    if extend:
        work = max(work, spec.visibility * rng.uniform(0.5, 1.2))
    return Plan("ack", work, extend=extend)


def release_action(plan: Plan, stopping: bool, rng: random.Random, ack_and_claim: float) -> str:
    """How a worked lease is let go: ``nack``, ``ack`` or ``ack_and_claim``.

    A nack needs the workload running (a stopping claimer acks); an ack becomes
    ``ack_and_claim`` with probability ``ack_and_claim`` while running (``rng`` is drawn
    only when that is above 0, so runs without it keep their random streams).
    """
    if stopping:
        return "ack"
    if plan.action == "nack":
        return "nack"
    if ack_and_claim > 0 and rng.random() < ack_and_claim:
        return "ack_and_claim"
    return "ack"


@dataclass(frozen=True)
class Wait:
    """A claimer step: pause ``seconds`` or until the workload stops."""

    seconds: float


@dataclass(frozen=True)
class ClientCall:
    """A claimer step: call ``method(*args)`` on the client, completing ``record``."""

    record: Single | Fused
    method: str
    args: tuple[Any, ...]
    #: keyword arguments (a long poll's ``wait``)
    kwargs: dict[str, Any] = field(default_factory=dict)


Steps = Generator[Wait | ClientCall, Any, Any]
