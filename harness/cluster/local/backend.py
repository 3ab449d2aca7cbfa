"""The local backend's entry in the registry (:mod:`harness.cluster.backends`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

from harness.wording import plural

from .. import disk
from ..backend import Backend, ClusterOptions
from ..base import NETNS_CAPABILITIES, PARTITIONS, Cluster, ClusterError
from .cluster import STATE_FILE, LocalCluster
from .processes import node_processes, reap


class Local(Backend):
    """Processes on this machine: the embedded node or rqlited, on loopback ports or, as
    root, each in a network namespace of its own."""

    name = "local"
    summary = "processes on this machine (default)"
    title = "local"
    state_file = STATE_FILE
    options: ClassVar[frozenset[str]] = frozenset({"rqlited", "base_port", "netns"})
    reaps = True
    matrix_forms = ("embedded", "rqlited:PATH")

    @classmethod
    def cluster_class(cls) -> type[Cluster]:
        return LocalCluster

    @classmethod
    def start(cls, options: ClusterOptions) -> Cluster:
        o = options.with_defaults(3)
        return LocalCluster.start(
            nodes=o.nodes or 3,
            directory=o.directory,
            engine=o.engine or "embedded",
            rqlited=o.rqlited,
            netns=o.netns,
            timeout=o.timeout,
            base_port=o.base_port,
            detached=o.detached,
            disk_mb=o.disk_mb,
        )

    @classmethod
    def attach(cls, directory: Path) -> Cluster:
        return LocalCluster.attach(directory)

    @classmethod
    def start_again(cls, directory: Path, options: ClusterOptions) -> Cluster:
        """The stopped cluster in ``directory`` started again, if ``options`` agree with
        it; in a running one, the nodes whose process is gone started again."""
        old = LocalCluster.attach(directory)
        running = any(old._alive(s) for s in old._specs.values() if s.state != "removed")
        differs = _differences(old, options)
        if differs:
            raise ClusterError(
                f"{old.directory} holds a {'running' if running else 'stopped'} cluster with "
                f"{'; '.join(differs)}: `up --dir` starts "
                f"{'its dead nodes' if running else 'it'} again as it was; give a new "
                "directory for a different cluster"
            )
        if running:
            return _revive(old.directory, options.timeout)
        cluster = LocalCluster.restart_stopped(directory, options.timeout, detached=True)
        print(f"started the stopped cluster in {old.directory} again on its data", file=sys.stderr)
        return cluster

    @classmethod
    def busy(cls) -> set[str]:
        return {p.directory for p in node_processes()}

    @classmethod
    def reap(cls, tag: str | None, live_too: bool, busy: set[str]) -> dict:
        result = reap(tag, live_too=live_too)  # it sees its own busy directories
        for c in result["left"]:
            print(f"left the cluster in {c['dir']}: {c['why']}", file=sys.stderr)
        if result["left"]:
            print(
                "(`cluster down --dir DIR` stops one of yours; --yes-kill-live would kill them "
                "all, whoever uses them)",
                file=sys.stderr,
            )
        left = result.pop("left")
        return {"reaped": result, "left": left}

    @classmethod
    def preflight(cls, scenario: str, needs: frozenset[str], chaos_all: bool) -> bool:
        disk.preflight(scenario, needs)
        if not needs & NETNS_CAPABILITIES:
            return False
        if os.geteuid() != 0 and chaos_all:  # "all" the cluster can do: partitions are not
            return False
        if os.geteuid() != 0:
            what = "partitions the network" if PARTITIONS in needs else "degrades links"
            raise ClusterError(
                f"scenario {scenario!r} {what}: on the local backend that needs root "
                "(network namespaces + iptables); run as root or use --backend docker"
            )
        return True

    @classmethod
    def matrix_engine(cls, spec: str) -> tuple[str, tuple[str, ...]] | None:
        if spec == "embedded":
            return "embedded", ("--engine", "embedded")
        kind, _, path = spec.partition(":")
        if kind != "rqlited" or not path:
            return None
        if not os.access(path, os.X_OK):
            raise ValueError(f"engine {spec!r}: {path} is not an executable file")
        return Path(path).name, ("--engine", "rqlited", "--rqlited", path)


def _differences(old: LocalCluster, o: ClusterOptions) -> list[str]:
    """How ``o`` differs from the cluster ``old`` it would start again, in words."""
    nodes = old.nodes()
    port = urlsplit(nodes[0].url).port
    differs = []
    if o.nodes is not None and o.nodes != len(nodes):
        differs.append(f"{len(nodes)} nodes, not {o.nodes}")
    if o.engine is not None and o.engine != old.engine:
        differs.append(f"engine {old.engine}, not {o.engine}")
    if o.base_port is not None and o.base_port != port:
        differs.append(f"base port {port}, not {o.base_port}")
    if o.rqlited is not None:
        differs.append("the rqlited binary it was started with (leave --rqlited out)")
    if o.netns and PARTITIONS not in old.capabilities:
        differs.append("no network namespaces (leave --netns out)")
    return differs


def _revive(directory: Path, timeout: float) -> Cluster:
    """The running cluster in ``directory``, its dead nodes started again (and named)."""
    cluster, started = LocalCluster.revive_dead(directory, timeout)
    if not started:
        raise ClusterError(
            f"a cluster is already running in {directory}, every node alive; stop it "
            f"first (python -m harness cluster down --dir {directory})"
        )
    print(
        f"started {plural(len(started), 'dead node')} of the running cluster in "
        f"{directory} again on {'its' if len(started) == 1 else 'their'} data: "
        + ", ".join(started),
        file=sys.stderr,
    )
    return cluster
