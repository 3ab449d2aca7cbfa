"""The one small interface every cluster backend implements.

Backends (embedded processes, real ``rqlited`` processes, Docker containers) sit behind
:class:`Cluster`, as httpx's transports sit behind one interface: the harness, the
tests and the CLI never care which one runs.
"""

from __future__ import annotations

import abc
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ..errors import HarnessError

#: one statement as rqlite's HTTP API takes it: SQL text, or ``[sql, *params]``
Statement = str | Sequence[Any]

#: what a backend can do to its nodes (a fault kind names those it needs: harness.faults)
KILL, PAUSE, PARTITIONS, CLOCK_SKEW, TIME_ZONES, LINKS, MEMBERSHIP = (
    "kill",
    "pause",
    "partitions",
    "clock-skew",
    "time-zones",
    "links",
    "membership",
)
#: a cluster whose nodes' data directories are filesystems of their own (harness.cluster.disk)
DISK = "disk"
#: each capability as the default refusal names it: "the <engine> backend cannot ..."
_CANNOT = {
    KILL: "kill or restart a node",
    PAUSE: "pause a node",
    PARTITIONS: "partition the network",
    CLOCK_SKEW: "skew a node's clock",
    TIME_ZONES: "set a node's time zone",
    DISK: "fill a node's disk",
    LINKS: "degrade a node's links (packet loss, rate limits)",
    MEMBERSHIP: "add or remove a cluster member",
}
CAPABILITY_NAMES = tuple(_CANNOT)
#: what a local cluster can do only with each node in a network namespace of its own
NETNS_CAPABILITIES = frozenset({PARTITIONS, LINKS})


class ClusterError(HarnessError):
    """A cluster could not be started, reached or controlled; the message says why."""


class QueryRefused(ClusterError):
    """A node answered a read but refused it (HTTP 4xx or a statement's error)."""


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

    #: what "every node ready" means here, in :meth:`wait_for_leader`'s error
    ready_phrase: str = " and every node ready"
    #: seconds between two probes in :meth:`wait_for_leader`
    leader_poll: float = 0.1

    def leader(self, timeout: float = 1.0) -> NodeInfo | None:
        """The node that currently calls itself leader and is agreed on, or None."""
        return self._leader_round(timeout)[0]

    def wait_for_leader(
        self,
        timeout: float,
        *,
        all_ready: bool = True,
        exclude: Iterable[str] = (),
        check_dead: bool = True,
    ) -> NodeInfo:
        """Wait until a leader is elected and every live node is ready.

        ``all_ready=False`` waits for the leader only (nodes cut off by a partition are
        never ready); ``exclude`` waits for a leader other than those node ids (right
        after a fault the others may still name the old leader for a moment).
        Raises :class:`ClusterError` naming what it waited for when ``timeout`` passes
        (:meth:`_leader_wait_error`), or earlier when :meth:`_raise_if_dead`, asked after
        each round that did not end the wait, finds a node dead (``check_dead=False``:
        over HTTP only, for polls a slow check would hold up).
        """
        exclude = set(exclude)
        deadline = time.monotonic() + timeout
        while True:
            lead, statuses = self._leader_round(min(1.0, max(0.1, deadline - time.monotonic())))
            if (
                lead is not None
                and lead.id not in exclude
                and (not all_ready or all(s.ready for s in statuses))
            ):
                return lead
            # only while it has to wait: over SSH the check costs a round trip per host,
            # seconds on a loaded machine, which made the faults that look for the leader
            # start late
            if check_dead:
                self._raise_if_dead()
            if time.monotonic() >= deadline:
                what = "an agreed leader" + (f" other than {sorted(exclude)}" if exclude else "")
                what += self.ready_phrase if all_ready else ""
                raise self._leader_wait_error(timeout, what, statuses)
            time.sleep(self.leader_poll)

    # -- hooks of leader and wait_for_leader ----------------------------------------------
    def _live_nodes(self) -> Sequence[NodeInfo]:
        """The nodes to probe for a leader (those killed or paused answer nobody)."""
        return self.nodes()

    def _leader_round(self, timeout: float) -> tuple[NodeInfo | None, list[NodeStatus]]:
        """Probe the live nodes once: the agreed leader (or None) and what each said."""
        live = self._live_nodes()
        statuses = probe_nodes([n.url for n in live], timeout)
        lead = agreed_leader(statuses, len(self.nodes()))
        info = next((n for n, s in zip(live, statuses, strict=True) if s is lead), None)
        return info, statuses

    def _raise_if_dead(self) -> None:
        """Raise :class:`ClusterError` if a node died on its own (checked every probe)."""
        return

    def _raise_if_exited(self) -> None:
        """Raise :class:`ClusterError` naming a node that exited on its own, with its log's
        end: asked once a wait for a node gave up (a check too slow for every probe)."""
        return

    def _leader_wait_error(
        self, timeout: float, what: str, statuses: Sequence[NodeStatus]
    ) -> ClusterError:
        """The error :meth:`wait_for_leader` raises after waiting ``timeout`` for ``what``."""
        seen = "; ".join(s.summary() for s in statuses) or "no live node"
        return ClusterError(f"waited {timeout:.1f}s for {what}, gave up. Nodes said: {seen}")

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

    def partition_one_way(self, cuts: Iterable[Iterable[str]]) -> None:
        """Drop every packet ``a`` sends to ``b`` for each ``(a, b)`` in ``cuts`` while
        ``b``'s packets to ``a`` pass (docs/faults.md, "One-way partitions"); replaces an
        earlier partition, undone by :meth:`heal`. Capability ``partitions``."""
        raise ClusterError(f"the {self.engine} backend cannot partition the network")

    def heal(self) -> None:
        """Remove exactly the partition rules this cluster added (none by default)."""
        return

    def set_clock_offset(self, node_id: str, seconds: float) -> None:
        """Make the node's wall clock read ``seconds`` ahead (negative: behind)."""
        raise ClusterError(f"the {self.engine} backend cannot skew a node's clock")

    #: seconds :meth:`set_time_zone` waits for the restarted node by default
    zone_timeout: float = 30.0

    def set_time_zone(self, node_id: str, tzif: bytes | None, timeout: float | None = None) -> None:
        """Give the node the local time zone in ``tzif`` (a TZif file's bytes, e.g. from
        :mod:`harness.zonefile`; None: back to UTC) and restart it so that it reads it,
        waiting (``timeout``, else :attr:`zone_timeout`) until it answers ``/readyz``
        again. rqlite and the embedded node rewrite ``'now'`` in their local time
        (docs/embedded-node.md). A paused node comes back running; a killed one keeps the
        zone for its :meth:`restart`. Capability ``time-zones``: a backend gives the node
        its zone in :meth:`_apply_time_zone`."""
        problem = self.time_zone_problem()
        if problem is not None:
            raise ClusterError(problem)
        if tzif is not None and (not isinstance(tzif, bytes) or tzif[:4] != b"TZif"):
            raise ClusterError(
                f"a time zone is a TZif file's bytes (b'TZif...'), got {repr(tzif)[:40]}"
            )
        restarted = self._apply_time_zone(node_id, tzif)
        if restarted is not None:
            url, zone = restarted
            wait = self.zone_timeout if timeout is None else timeout
            self.wait_node_ready(node_id, url, wait, f"its restart with {zone}")

    def _apply_time_zone(self, node_id: str, tzif: bytes | None) -> tuple[str, str] | None:
        """Give node ``node_id`` the zone ``tzif`` (checked) and restart it: the URL to wait
        on and the zone in words, or None when it stays down (killed)."""
        raise ClusterError(f"the {self.engine} backend cannot {_CANNOT[TIME_ZONES]}")

    def wait_node_ready(self, node_id: str, url: str, timeout: float, after: str) -> None:
        """Wait up to ``timeout`` seconds until node ``node_id`` (at ``url``) answers
        ``/readyz`` after ``after`` (words for the error), asking :meth:`_raise_if_dead`
        between probes and :meth:`_raise_if_exited` when the time is up."""
        deadline = time.monotonic() + timeout
        while True:
            self._raise_if_dead()
            status = probe_node(url, timeout=1.0)
            if status.error is None and status.ready:
                return
            if time.monotonic() >= deadline:
                self._raise_if_exited()
                raise ClusterError(
                    f"waited {timeout:.1f}s for node {node_id} to answer /readyz after "
                    f"{after}; it said: {status.summary()}"
                )
            time.sleep(self.leader_poll)

    def fill_disk(self, node_id: str) -> None:
        """Fill the filesystem of the node's data directory (writes there fail: ENOSPC)."""
        raise ClusterError(f"the {self.engine} backend cannot {_CANNOT[DISK]}")

    def free_disk(self, node_id: str) -> None:
        """Undo :meth:`fill_disk`: the node's filesystem has its room back."""
        raise ClusterError(f"the {self.engine} backend cannot {_CANNOT[DISK]}")

    def set_link_loss(self, node_id: str, rate: float) -> None:
        """Drop each packet between the node and its peers, both ways, with probability
        ``rate`` (0 < rate <= 1), until :meth:`clear_link_loss`; replaces an earlier loss
        of the node and leaves partitions alone (:mod:`harness.cluster.links`)."""
        raise ClusterError(f"the {self.engine} backend cannot {_CANNOT[LINKS]}")

    def clear_link_loss(self, node_id: str) -> None:
        """Remove exactly the loss :meth:`set_link_loss` put on the node (none: nothing)."""
        return

    def set_link_shape(
        self, node_id: str, rate: str, delay: float = 0.0, jitter: float = 0.0
    ) -> None:
        """Slow what the node sends to ``rate`` (tc's form, ``"256kbit"``), delayed by
        ``delay`` ± ``jitter`` ms (netem: :meth:`link_delay_problem`), until
        :meth:`clear_link_shape`; replaces an earlier shape of the node."""
        raise ClusterError(f"the {self.engine} backend cannot {_CANNOT[LINKS]}")

    def clear_link_shape(self, node_id: str) -> None:
        """Remove exactly the shape :meth:`set_link_shape` put on the node (none: nothing)."""
        return

    def link_delay_problem(self) -> str | None:
        """Why :meth:`set_link_shape` cannot delay packets here (None: it can), one line."""
        return self.capability_problem(LINKS)

    def remove_node(self, node_id: str) -> None:
        """Remove the member ``node_id`` (rqlite's ``/remove``), stop it and wipe its data;
        :meth:`nodes` no longer lists it. Optional: capability ``membership``."""
        raise ClusterError(f"the {self.engine} backend cannot {_CANNOT[MEMBERSHIP]}")

    def add_node(self, node_id: str | None = None) -> str:
        """Start a node (``node_id``: a removed one's, or a new one) that joins the running
        cluster; return once it is a member and ready; its id. Optional: ``membership``."""
        raise ClusterError(f"the {self.engine} backend cannot {_CANNOT[MEMBERSHIP]}")

    def new_node_ids(self, members: Sequence[str], count: int) -> list[str]:
        """The ids :meth:`add_node` gives ``count`` new nodes beside ``members``: ``nK``
        after the highest ``nK`` (a backend whose ids are its hosts' names: theirs)."""
        top = max((int(i[1:]) for i in members if i[:1] == "n" and i[1:].isdigit()), default=0)
        return [f"n{top + k}" for k in range(1, count + 1)]

    def grow_problem(self, count: int) -> str | None:
        """Why ``count`` new nodes cannot join here at once (None: they can), one line."""
        return None

    # -- capabilities ---------------------------------------------------------------------
    #: what the backend can do at best (a class declares it; see :data:`CAPABILITY_NAMES`)
    CAPABILITIES: ClassVar[frozenset[str]] = frozenset()

    @property
    def capabilities(self) -> frozenset[str]:
        """What this cluster, as it was started, can do: its backend's ``CAPABILITIES``
        less what it lacks here (root for partitions, say)."""
        return self.CAPABILITIES

    def capability_problem(self, capability: str) -> str | None:
        """Why this cluster cannot do ``capability`` (None: it can), in one line."""
        if capability == TIME_ZONES:
            return self.time_zone_problem()
        if capability in self.capabilities:
            return None
        return f"the {self.engine} backend cannot {_CANNOT.get(capability, capability)}"

    def time_zone_problem(self) -> str | None:
        """Why :meth:`set_time_zone` cannot work here (None: it can), in one line."""
        if TIME_ZONES in self.capabilities:
            return None
        return f"the {self.engine} backend cannot {_CANNOT[TIME_ZONES]}"

    # -- reading one replica --------------------------------------------------------------
    def read_node(
        self, node_id: str, statements: Sequence[Statement], timeout: float
    ) -> list[dict]:
        """Run read ``statements`` on node ``node_id`` alone (``level=none``): its results.

        Over the node's HTTP URL by default; a backend whose URLs this process cannot
        reach overrides it. Raises :class:`ClusterError` naming the node and the problem.
        """
        urls = {n.id: n.url for n in self.nodes()}
        if node_id not in urls:
            raise ClusterError(f"no node {node_id!r} in this cluster ({', '.join(urls)})")
        return query_node(urls[node_id], statements, timeout)

    # -- lifecycle ------------------------------------------------------------------------
    @abc.abstractmethod
    def stop(self) -> None:
        """Stop every node and remove every rule and namespace this cluster made."""

    def close(self) -> None:
        """Let go of what this process holds to reach the nodes (SSH: its sessions); the
        nodes keep running (``cluster up`` and ``status`` close what they attached to)."""
        return

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


# -- probing nodes over HTTP (shared by every backend) -----------------------------------
#: urllib opener that ignores proxy settings: cluster traffic never leaves this machine
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class NodeStatus:
    """What one node said about itself in ``GET /status`` (and ``GET /readyz``)."""

    url: str
    node_id: str | None = None
    state: str | None = None  # Raft state as the node names it: "Leader", "Follower", ...
    leader_id: str | None = None
    leader_addr: str | None = None
    ready: bool = False
    error: str | None = None  # why the node could not be probed
    #: the last Raft log index the node applied (``store.raft.applied_index``)
    applied_index: int | None = None
    #: the last index its state machine (the database) applied (``store.fsm_index``; rqlite)
    fsm_index: int | None = None

    @property
    def is_leader(self) -> bool:
        return (self.state or "").lower() == "leader"

    def summary(self) -> str:
        if self.error:
            return f"{self.url}: unreachable ({self.error})"
        return (
            f"{self.node_id or self.url}: state={self.state} leader={self.leader_id}"
            f" ready={self.ready}"
        )


def http_get(url: str, timeout: float) -> tuple[int, bytes]:
    """GET ``url`` without proxies; return (status, body), HTTP errors included."""
    return http_request("GET", url, None, timeout)


def http_request(method: str, url: str, body: bytes | None, timeout: float) -> tuple[int, bytes]:
    """``method`` on ``url`` without proxies, ``body`` sent as JSON when given; return
    (status, body), HTTP errors included (a failed connection raises :class:`OSError`)."""
    req = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def probe_node(url: str, timeout: float = 1.0) -> NodeStatus:
    """Ask one node for ``/status`` and ``/readyz``; never raises."""
    try:
        code, body = http_get(f"{url}/status", timeout)
        if code != 200:
            return NodeStatus(url, error=f"/status answered HTTP {code}")
        store = json.loads(body).get("store", {})
        leader = store.get("leader") or {}
        if isinstance(leader, str):  # very old rqlite: the leader's Raft address only
            leader = {"addr": leader}
        ready_code, _ = http_get(f"{url}/readyz", timeout)
        raft = store.get("raft") or {}
        return NodeStatus(
            url,
            node_id=store.get("node_id"),
            state=raft.get("state"),
            leader_id=leader.get("node_id") or None,
            leader_addr=leader.get("addr") or None,
            ready=ready_code == 200,
            applied_index=raft_index(raft.get("applied_index")),
            fsm_index=raft_index(store.get("fsm_index")),
        )
    except (OSError, ValueError, AttributeError) as exc:
        return NodeStatus(url, error=f"{type(exc).__name__}: {exc}")


def raft_index(value: object) -> int | None:
    """A Raft index as /status reports it (an int, or a decimal string), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def query_node(url: str, statements: Sequence[Statement], timeout: float) -> list[dict]:
    """Run read ``statements`` on the node at ``url`` alone (``level=none``): its results.

    A statement is SQL text, or rqlite's ``[sql, *params]`` form.

    Raises :class:`ClusterError` naming the node and the problem when the request fails,
    :class:`QueryRefused` when the node refuses it or a statement returns an error.
    """
    body = json.dumps(list(statements)).encode()
    req = urllib.request.Request(
        f"{url}/db/query?level=none",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            results = json.loads(resp.read()).get("results")
    except urllib.error.HTTPError as exc:
        text = exc.read()[:200].decode("utf-8", "replace").strip()
        error = QueryRefused if 400 <= exc.code < 500 else ClusterError
        raise error(f"{url}: /db/query answered HTTP {exc.code}: {text}") from None
    except (OSError, ValueError, AttributeError) as exc:
        raise ClusterError(f"{url}: /db/query failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(results, list) or len(results) != len(statements):
        raise ClusterError(f"{url}: /db/query returned no result per statement")
    for stmt, res in zip(statements, results, strict=True):
        if not isinstance(res, dict) or res.get("error"):
            error = res.get("error") if isinstance(res, dict) else res
            raise QueryRefused(f"{url}: {stmt!r} failed: {error}")
    return results


def probe_nodes(urls: Sequence[str], timeout: float = 1.0) -> list[NodeStatus]:
    """Probe every URL in parallel, in the given order."""
    if not urls:
        return []
    with ThreadPoolExecutor(max_workers=len(urls)) as pool:
        return list(pool.map(lambda u: probe_node(u, timeout), urls))


def agreed_leader(statuses: Sequence[NodeStatus], cluster_size: int) -> NodeStatus | None:
    """The node that calls itself leader and that a majority of the cluster names leader.

    A node cut off in a minority may keep calling itself leader for a while; it is not
    returned because fewer than ``cluster_size // 2 + 1`` nodes (itself included) agree.
    """
    quorum = cluster_size // 2 + 1
    best: tuple[int, NodeStatus] | None = None
    for cand in statuses:
        if cand.error or not cand.is_leader or not cand.node_id:
            continue
        votes = sum(1 for s in statuses if not s.error and s.leader_id == cand.node_id)
        if votes >= quorum and (best is None or votes > best[0]):
            best = (votes, cand)
    return best[1] if best else None
