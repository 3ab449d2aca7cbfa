"""One simulated world: the loop, the network, the nodes, and what is made deterministic.

Every random choice comes from a source seeded by the run's seed and a fixed name
(``random.Random(f"{seed}-...")``, stable across processes whatever the hash seed). The
few places where the code under test draws from the operating system's randomness (the
idempotency keys and lease tokens of :mod:`rqueue._core`, rqlite's ``random()``
rewriting in :mod:`harness.node.sql.rewrite`) are given seeded stand-ins for the length
of a run by :func:`seeded`.
"""

from __future__ import annotations

import contextlib
import random
import uuid
from collections.abc import Iterator

from .cluster import SimCluster, SimProxies
from .loop import Loop
from .net import Net
from .node import EPOCH, SimNode


class _SeededUuid:
    """``uuid.uuid4`` from a seeded source (what :mod:`rqueue._core` calls)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)


class _SeededSecrets:
    """``secrets.randbits`` and ``token_bytes`` from a seeded source."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def randbits(self, k: int) -> int:
        return self._rng.getrandbits(k)

    def token_bytes(self, n: int | None = None) -> bytes:
        return self._rng.randbytes(32 if n is None else n)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Give the code under test seeded random sources for the length of a run."""
    import rqueue._core as core

    from ..node.sql import rewrite

    saved = core.uuid, rewrite.secrets
    core.uuid = _SeededUuid(random.Random(f"{seed}-uuid"))  # type: ignore[assignment]
    rewrite.secrets = _SeededSecrets(random.Random(f"{seed}-secrets"))  # type: ignore[assignment]
    try:
        yield
    finally:
        core.uuid, rewrite.secrets = saved


class _VirtualTime:
    """The ``time`` module as the fault kinds read it: the nodes' wall clock (without
    skew), in virtual time."""

    def __init__(self, loop: Loop) -> None:
        self._loop = loop

    def time(self) -> float:
        return EPOCH + self._loop.now

    def monotonic(self) -> float:
        return self._loop.now


@contextlib.contextmanager
def virtual_time(loop: Loop) -> Iterator[None]:
    """Let the fault kinds that read the wall clock (``timezone``: when its transition
    is) read the simulation's, for the length of a run."""
    from ..faults import timezone

    saved = timezone.time
    timezone.time = _VirtualTime(loop)  # type: ignore[assignment]
    try:
        yield
    finally:
        timezone.time = saved


class World:
    """``nodes`` simulated rqlite nodes (``n1``...) on one loop and network."""

    def __init__(self, seed: int, nodes: int) -> None:
        self.seed = seed
        self.loop = Loop()
        self.net = Net(self.loop, random.Random(f"{seed}-net"))
        ids = [f"n{i + 1}" for i in range(nodes)]
        self.nodes: dict[str, SimNode] = {}
        for i in ids:
            rng = random.Random(f"{seed}-{i}")
            self.nodes[i] = SimNode(i, ids, self.loop, self.net, rng, self.nodes)
        self.urls = [f"http://{i}:4001" for i in ids]
        self.by_url = dict(zip(self.urls, self.nodes.values(), strict=True))
        self.cluster = SimCluster(
            self.loop, self.net, self.nodes, dict(zip(ids, self.urls, strict=True))
        )
        self.proxies = SimProxies(self.nodes, random.Random(f"{seed}-proxies"))

    def settled(self) -> bool:
        """Whether every node is up and has applied the same, whole, log."""
        nodes = list(self.nodes.values())
        if not all(n.up and not n.paused for n in nodes):
            return False
        applied = {(n.applied, len(n.log)) for n in nodes}
        return len(applied) == 1 and nodes[0].applied == len(nodes[0].log)
