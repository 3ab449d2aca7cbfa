"""The simulated network: a delay per message, and the links' faults.

Every message between two endpoints (node ids, or :data:`CLIENT`) goes through
:meth:`Net.deliver`, which drops it when the link is cut (a partition, symmetric or one
way) or loses it (a lossy link), and otherwise runs its handler after the link's delay.
The delays and losses are drawn from the world's seeded random source.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from .loop import Loop

#: the endpoint every client sends from (clients reach every node; partitions and link
#: faults act between nodes, as the real harness's do)
CLIENT = "client"
#: one way's delay of a healthy link, in seconds (a loopback or LAN round trip)
LATENCY = (0.0002, 0.0015)


class Net:
    """Which links are cut, lossy or slow; and delivery over them."""

    def __init__(self, loop: Loop, rng: random.Random) -> None:
        self.loop = loop
        self.rng = rng
        #: (from, to) pairs whose messages are dropped
        self.cut: set[tuple[str, str]] = set()
        #: (from, to) -> probability a message is lost
        self.loss: dict[tuple[str, str], float] = {}
        #: (from, to) -> extra delay in seconds
        self.slow: dict[tuple[str, str], float] = {}

    def reachable(self, src: str, dst: str) -> bool:
        return (src, dst) not in self.cut

    def deliver(self, src: str, dst: str, fn: Callable[..., Any], *args: Any) -> bool:
        """Run ``fn(*args)`` after the link's delay; False if the message is dropped."""
        link = (src, dst)
        if link in self.cut:
            return False
        lost = self.loss.get(link)
        if lost and self.rng.random() < lost:
            return False
        delay = self.rng.uniform(*LATENCY) + self.slow.get(link, 0.0)
        self.loop.after(delay, fn, *args)
        return True

    def heal(self) -> None:
        self.cut.clear()

    def restore_links(self) -> None:
        self.loss.clear()
        self.slow.clear()
