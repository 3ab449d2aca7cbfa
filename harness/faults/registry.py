"""Every fault kind by name, in the order ``harness list`` and the scenario errors name
them. A new kind is a class in a module of this package, imported and listed here."""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import HarnessError
from .base import FaultKind
from .clock_jumps import ClockJumpBackNode, ClockJumpBackWorker, ClockStrobeNode, ClockStrobeWorker
from .clock_skew import ClockSkewNode, ClockSkewWorker
from .disk import DiskFull
from .kills import KillAll, KillLeader, KillRandom
from .lease_expiry import LeaseExpiry
from .links import LossyLink, SlowLink
from .membership import Grow, RemoveNode, Shrink
from .one_way import OneWayLeader, OneWayMinority
from .partitions import PartitionBridge, PartitionLeader, PartitionMajority
from .pause import PauseLeader
from .reply_loss import ForwardReplyLoss, ReplyLoss
from .timezone import Timezone

KINDS: dict[str, type[FaultKind]] = {
    k.name: k
    for k in (
        KillLeader,
        KillRandom,
        KillAll,
        PauseLeader,
        PartitionLeader,
        PartitionMajority,
        PartitionBridge,
        OneWayLeader,
        OneWayMinority,
        ClockSkewNode,
        ClockSkewWorker,
        LeaseExpiry,
        Timezone,
        DiskFull,
        ClockStrobeNode,
        ClockStrobeWorker,
        ClockJumpBackNode,
        ClockJumpBackWorker,
        LossyLink,
        SlowLink,
        RemoveNode,
        Grow,
        Shrink,
        ReplyLoss,
        ForwardReplyLoss,
    )
}


class UnknownFaultKind(HarnessError, ValueError):
    """A name no fault kind has."""


def kind_of(name: str) -> type[FaultKind]:
    """The kind called ``name``; :class:`UnknownFaultKind` when there is none."""
    try:
        return KINDS[name]
    except KeyError:
        known = ", ".join(sorted(KINDS))
        raise UnknownFaultKind(f"no fault kind {name!r}; known: {known}") from None


def needs_of(names: Iterable[str]) -> frozenset[str]:
    """The cluster capabilities the kinds ``names`` need together."""
    return frozenset(c for n in names for c in kind_of(n).needs)
