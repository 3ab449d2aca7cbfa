"""The one small interface every cluster backend implements.

Backends (embedded processes, real ``rqlited`` processes, Docker containers) sit behind
:class:`Cluster`, as httpx's transports sit behind one interface: the harness, the
tests and the CLI never care which one runs.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass


class ClusterError(RuntimeError):
    """A cluster could not be started, reached or controlled; the message says why."""


@dataclass(frozen=True)
class NodeInfo:
    """One node as the outside world sees it."""

    id: str
    url: str  # HTTP API base URL, e.g. "http://127.0.0.1:4001"
    pid: int | None = None  # process id (None for containers)

    def to_json(self) -> dict:
        return asdict(self)


class Cluster(abc.ABC):
    """A running rqlite-compatible cluster that the harness can inspect and break."""

    #: a short name for reports: "embedded", "rqlited", "docker"
    engine: str = "?"

    @abc.abstractmethod
    def nodes(self) -> Sequence[NodeInfo]:
        """All nodes, in a stable order (killed ones included)."""

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes()]

    @abc.abstractmethod
    def leader(self, timeout: float = 1.0) -> NodeInfo | None:
        """The node that currently calls itself leader and is agreed on, or None."""

    @abc.abstractmethod
    def wait_for_leader(self, timeout: float) -> NodeInfo:
        """Wait until a leader is elected and every live node is ready.

        Raises :class:`ClusterError` naming what it waited for when ``timeout`` passes.
        """

    # -- faults ---------------------------------------------------------------------------
    @abc.abstractmethod
    def kill(self, node_id: str) -> None:
        """SIGKILL the node (or its container)."""

    @abc.abstractmethod
    def restart(self, node_id: str) -> None:
        """Start a killed node again with its data directory."""

    @abc.abstractmethod
    def pause(self, node_id: str) -> None:
        """SIGSTOP the node."""

    @abc.abstractmethod
    def resume(self, node_id: str) -> None:
        """SIGCONT the node."""

    def partition(self, components: Iterable[Iterable[str]]) -> None:
        """Cut the network so nodes talk only within their component.

        ``components`` lists node ids per side, e.g. ``[["n1"], ["n2", "n3"]]``.
        A bridge is given as overlapping components: ``[["n1","n2","n3"],["n3","n4","n5"]]``.
        """
        raise ClusterError(f"the {self.engine} backend cannot partition the network")

    def heal(self) -> None:
        """Remove exactly the partition rules this cluster added."""

    def set_clock_offset(self, node_id: str, seconds: float) -> None:
        """Make the node's wall clock read ``seconds`` ahead (negative: behind)."""
        raise ClusterError(f"the {self.engine} backend cannot skew a node's clock")

    @property
    def supports_partitions(self) -> bool:
        return False

    # -- lifecycle ------------------------------------------------------------------------
    @abc.abstractmethod
    def stop(self) -> None:
        """Stop every node and remove every rule and namespace this cluster made."""

    def describe(self) -> dict:
        """The JSON shape printed by ``python -m harness cluster up/status``."""
        lead = self.leader()
        return {
            "engine": self.engine,
            "leader": lead.url if lead else None,
            "nodes": [n.to_json() for n in self.nodes()],
        }

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
