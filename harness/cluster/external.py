"""A cluster someone else runs, named by its URLs (``RQLITE_URLS``); it can only be probed.

::

    RQLITE_URLS=http://10.0.0.5:4001,http://10.0.0.6:4001 python -m pytest

Leadership comes from each node's ``/status`` like for local clusters. Every fault
(kill, restart, pause, resume, partition, clock skew) raises :class:`ClusterError`
"cannot control an external cluster"; :meth:`ExternalCluster.stop` does nothing.
"""

from __future__ import annotations

import os
import time
import urllib.parse
from collections.abc import Iterable

from harness.cluster.base import Cluster, ClusterError, NodeInfo, agreed_leader, probe_nodes

URLS_ENV = "RQLITE_URLS"
_POLL = 0.1


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

    def _leader(self, timeout: float) -> tuple[NodeInfo | None, list]:
        statuses = probe_nodes(self._urls, timeout)
        for st in statuses:
            if st.node_id:
                self._ids[st.url] = st.node_id
        lead = agreed_leader(statuses, len(self._urls))
        info = NodeInfo(lead.node_id or lead.url, lead.url) if lead else None
        return info, statuses

    def leader(self, timeout: float = 1.0) -> NodeInfo | None:
        return self._leader(timeout)[0]

    def wait_for_leader(
        self, timeout: float, *, all_ready: bool = True, exclude: Iterable[str] = ()
    ) -> NodeInfo:
        exclude = set(exclude)
        deadline = time.monotonic() + timeout
        while True:
            lead, statuses = self._leader(min(1.0, max(0.1, deadline - time.monotonic())))
            if (
                lead is not None
                and lead.id not in exclude
                and (not all_ready or all(s.ready for s in statuses))
            ):
                return lead
            if time.monotonic() >= deadline:
                seen = "; ".join(s.summary() for s in statuses)
                what = "an agreed leader" + (f" other than {sorted(exclude)}" if exclude else "")
                what += " and every node ready" if all_ready else ""
                raise ClusterError(
                    f"waited {timeout:.1f}s for {what} in the external cluster, gave up. "
                    f"Nodes said: {seen}"
                )
            time.sleep(_POLL)

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
