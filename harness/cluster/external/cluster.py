"""A cluster someone else runs, named by its URLs (``RQLITE_URLS``); it can only be probed.

::

    RQLITE_URLS=http://10.0.0.5:4001,http://10.0.0.6:4001 python -m pytest

The backend ``external`` of the registry (:mod:`.backend`): ``harness list`` shows what
its clusters can do (nothing), but no command starts one (``--backend`` does not offer
it): ``bench --urls`` and the tests under ``RQLITE_URLS`` reach one by its URLs.

Leadership comes from each node's ``/status`` like for local clusters. Every fault
(kill, restart, pause, resume, partition, clock skew) raises :class:`ClusterError`
"cannot control an external cluster"; :meth:`ExternalCluster.stop` does nothing.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterable, Sequence

from harness.cluster.base import (
    Cluster,
    ClusterError,
    NodeInfo,
    NodeStatus,
    agreed_leader,
    probe_nodes,
)

URLS_ENV = "RQLITE_URLS"


def parse_urls(text: str) -> list[str]:
    """``"http://a:4001, http://b:4011"`` → list of base URLs; a clear error if malformed."""
    urls = [u.strip().rstrip("/") for u in text.split(",") if u.strip()]
    if not urls:
        raise ClusterError(f"{URLS_ENV} names no URL: {text!r}")
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or not parts.port:
            raise ClusterError(f"bad node URL {url!r} in {URLS_ENV}: expected http(s)://HOST:PORT")
    if len(set(urls)) != len(urls):
        raise ClusterError(f"{URLS_ENV} names a URL twice: {text!r}")
    return urls


class ExternalCluster(Cluster):
    """A running rqlite-compatible cluster reached over HTTP; see the module docstring."""

    engine = "external"
    #: someone else's cluster: the harness breaks nothing in it
    CAPABILITIES: frozenset[str] = frozenset()

    def __init__(self, urls: Iterable[str]) -> None:
        self._urls = parse_urls(",".join(urls))
        self._ids: dict[str, str] = {}  # url -> node id, learnt from /status

    @classmethod
    def from_env(cls, value: str | None = None) -> ExternalCluster:
        """The cluster named by ``value`` or by the ``RQLITE_URLS`` environment variable."""
        value = value if value is not None else os.environ.get(URLS_ENV)
        if not value:
            raise ClusterError(f"set {URLS_ENV}=http://host:port,... to use an external cluster")
        return cls(parse_urls(value))

    def nodes(self) -> list[NodeInfo]:
        return [NodeInfo(self._ids.get(u, f"e{i}"), u) for i, u in enumerate(self._urls, 1)]

    # -- hooks of Cluster.leader and Cluster.wait_for_leader -----------------------------
    def _leader_round(self, timeout: float) -> tuple[NodeInfo | None, list[NodeStatus]]:
        """Probe every URL once, learning node ids from the answers."""
        statuses = probe_nodes(self._urls, timeout)
        for st in statuses:
            if st.node_id:
                self._ids[st.url] = st.node_id
        lead = agreed_leader(statuses, len(self._urls))
        info = NodeInfo(lead.node_id or lead.url, lead.url) if lead else None
        return info, statuses

    def _leader_wait_error(
        self, timeout: float, what: str, statuses: Sequence[NodeStatus]
    ) -> ClusterError:
        seen = "; ".join(s.summary() for s in statuses)
        return ClusterError(
            f"waited {timeout:.1f}s for {what} in the external cluster, gave up. Nodes said: {seen}"
        )

    def _refuse(self, *_: object) -> None:
        raise ClusterError("cannot control an external cluster")

    kill = restart = pause = resume = _refuse

    def partition(self, components: Iterable[Iterable[str]]) -> None:
        self._refuse()

    def set_clock_offset(self, node_id: str, seconds: float) -> None:
        self._refuse()

    def stop(self) -> None:
        """Nothing to stop: the cluster belongs to someone else."""
        return
