"""The SSH backend: one node per inventory host, driven over SSH (docs/ssh.md).

:meth:`SshCluster.start` connects to every host (:mod:`.session`), checks each before
anything starts (:mod:`.preflight`), ships the project's node where the inventory asks
for it, starts the nodes with the flags their version takes (:mod:`harness.cluster.engines`)
and waits for a leader. Faults: kill/restart (SIGKILL by pid, start again on its data),
pause/resume (SIGSTOP/SIGCONT), partitions (iptables rules tagged with the run, between
node addresses on node ports only: :func:`.remote.partition_rules`), clock skew (the
project node's clock file; an rqlited's through libfaketime when the host has it).
:meth:`SshCluster.stop` brings each node's log and a listing of its data folder into the
cluster directory, stops only this run's nodes, deletes only its rules and its run folder.
:func:`sweep_inventory` (``cluster down --backend ssh --inventory F``) does that for every
run a crashed harness left on the hosts. The cluster's state is ``DIR/ssh-cluster.json``.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from harness.cluster.base import (
    CLOCK_SKEW,
    DISK,
    KILL,
    LINKS,
    MEMBERSHIP,
    PARTITIONS,
    PAUSE,
    TIME_ZONES,
    Cluster,
    ClusterError,
    NodeInfo,
)
from harness.cluster.engines import (
    embedded_argv,
    faketime_env,
    faketime_offset,
    rqlited_argv,
)
from harness.cluster.partition import normalise, one_way_drops
from harness.cluster.ssh import forward, links, remote
from harness.cluster.ssh.disk import SshDisks, refuse_disks, sweep_disks
from harness.cluster.ssh.forward import SshForward
from harness.cluster.ssh.inventory import Inventory, load_inventory
from harness.cluster.ssh.membership import SshMembership
from harness.cluster.ssh.nodes import HostFacts, RemoteNode
from harness.cluster.ssh.preflight import check_host, needs_secret
from harness.cluster.ssh.session import Sessions, run_all

STATE_FILE = "ssh-cluster.json"


class SshCluster(links.SshLinks, SshForward, SshDisks, SshMembership, Cluster):
    """A cluster on the inventory's hosts (see the module docstring)."""

    engine = "ssh"
    ready_phrase = " and /readyz 200 on every live node"
    leader_poll = 0.25
    CAPABILITIES = frozenset(
        {KILL, PAUSE, PARTITIONS, CLOCK_SKEW, TIME_ZONES, LINKS, DISK, MEMBERSHIP}
    )

    def __init__(
        self, inventory: Inventory, sessions: Sessions, facts: Sequence[HostFacts], directory: Path
    ) -> None:
        self.inventory = inventory
        self.sessions = sessions
        self.facts = {f.name: f for f in facts}
        self.directory = directory
        self.run = secrets.token_hex(4)
        self._nodes = {
            h.name: RemoteNode(h, remote.run_dir(h.data_dir, self.run)) for h in inventory.hosts
        }
        self._partitioned: set[str] = set()
        self._lock = threading.RLock()
        self._secret = secrets.token_hex(16)
        self._next_alive_check = 0.0

    # -- starting ---------------------------------------------------------------------------
    @classmethod
    def start(
        cls,
        inventory: Path | str | Inventory,
        nodes: int | None,
        directory: Path,
        timeout: float = 60.0,
        disk_mb: int | None = None,
    ) -> SshCluster:
        """Check every host, then start a node on each and wait for a leader; on any
        failure everything started so far is stopped and removed. ``disk_mb``: each node's
        data on a filesystem of its own of that size (:mod:`.disk`)."""
        full = inventory if isinstance(inventory, Inventory) else load_inventory(inventory)
        inv = full if nodes is None else full.first(nodes)  # the rest: spare hosts
        directory = Path(directory).resolve()
        directory.mkdir(parents=True, exist_ok=True)
        sessions = Sessions(full.hosts)  # spare hosts too: checked before anything starts
        try:
            sessions.open()
            secret = needs_secret(full.hosts)
            facts = run_all(list(sessions.by_name.values()), lambda s: check_host(s, secret))
            refuse_disks(facts, disk_mb)  # before anything is made on a host
        except BaseException:
            sessions.close()
            raise
        cluster = cls(inv, sessions, facts, directory)
        cluster._disk_mb = disk_mb
        cluster.spares = full.hosts[len(inv.hosts) :]
        try:
            cluster._save()
            cluster._prepare()
            run_all(list(cluster._nodes.values()), cluster._launch)
            cluster.wait_for_leader(timeout)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _prepare(self) -> None:
        """Make each run folder, with the node's zipapp and the cluster secret."""
        pyz = remote.node_zipapp() if any(h.project_node for h in self.inventory.hosts) else b""

        def one(node: RemoteNode) -> None:
            s = self.sessions[node.host.name]
            d = shlex.quote(node.dir)
            clock = remote.write_file(
                f"{node.dir}/clock-offset", self._clock_text(node, 0.0) + "\n"
            )
            secret = remote.write_file(f"{node.dir}/secret", self._secret + "\n")
            ship = f" && cat > {d}/node.pyz" if node.host.project_node else ""
            s.run(
                f"mkdir -p {d}/data && chmod 700 {d} && {secret} && {clock}{ship}",
                stdin=pyz if ship else None,
                timeout=60,
            )

        run_all(list(self._nodes.values()), one)
        self._make_disks()

    def _argv(self, node: RemoteNode) -> list[str]:
        specs = [n.spec for n in self._nodes.values()]
        h = node.host
        if h.project_node:
            argv = embedded_argv(node.spec, specs, python=h.python)
            argv = [h.python, f"{node.dir}/node.pyz", *argv[3:]]
            if needs_secret(self.all_hosts):  # else the node needs no cryptography
                argv += ["--cluster-secret-file", f"{node.dir}/secret"]
            return argv
        version = self.facts[h.name].rqlited_version
        assert h.rqlited and version
        return rqlited_argv(h.rqlited, version, node.spec, specs)

    def _env(self, node: RemoteNode) -> dict[str, str]:
        env = {remote.TAG_ENV: self.run, "TZ": node.tz}
        lib = self.facts[node.host.name].faketime
        if not node.host.project_node and lib:
            env.update(faketime_env(Path(node.dir) / "clock-offset", lib))
        return env

    def _launch(self, node: RemoteNode) -> None:
        stamp = time.strftime("%FT%TZ", time.gmtime())
        banner = f"--- starting {node.host.name} at {stamp} (run {self.run})"
        cmd = remote.launch(node.dir, self._argv(node), self._env(node), banner)
        out = self.sessions[node.host.name].run(cmd).out.strip()
        if not out.isdigit():
            raise ClusterError(f"host {node.host.name}: the node did not start: {out!r}")
        with self._lock:
            node.pid, node.state = int(out), "running"
            self._save()

    # -- state ------------------------------------------------------------------------------
    def _save(self) -> None:
        data = {
            "inventory": str(self.inventory.path.resolve()),
            "hosts": [h.name for h in self.inventory.hosts],
            "run": self.run,
            "nodes": {
                n: {"dir": x.dir, "pid": x.pid, "state": x.state, "tz": x.tz, "join": x.join}
                for n, x in self._nodes.items()
            },
            **self.membership_state(),
        }
        tmp = self.directory / f"{STATE_FILE}.tmp"
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, self.directory / STATE_FILE)

    @classmethod
    def attach(cls, directory: Path) -> SshCluster:
        """The cluster ``cluster up`` started in ``directory``, reconnected."""
        directory = Path(directory).resolve()
        try:
            data = json.loads((directory / STATE_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise ClusterError(f"{directory} holds no SSH cluster: {exc}") from None
        inv = load_inventory(data["inventory"])
        hosts = tuple(h for h in inv.hosts if h.name in data["hosts"])
        spares = tuple(h for h in inv.hosts if h.name in data.get("spares", ()))
        sessions = Sessions(hosts + spares)
        sessions.open()
        facts = [HostFacts(h.name, None, None, None) for h in hosts + spares]
        cluster = cls(Inventory(inv.path, hosts), sessions, facts, directory)
        cluster.run = data["run"]
        cluster.restore_membership(data, spares + hosts)
        for name, saved in data["nodes"].items():
            node = cluster._nodes[name]
            node.dir, node.pid, node.state = saved["dir"], saved["pid"], saved["state"]
            node.tz, node.join = saved.get("tz", "UTC"), saved.get("join", "")
        return cluster

    def close(self) -> None:
        """End the SSH sessions; the nodes keep running (``cluster up``)."""
        self.sessions.close()

    # -- inspection -------------------------------------------------------------------------
    def nodes(self) -> list[NodeInfo]:
        return [NodeInfo(n.host.name, n.host.url, n.pid) for n in self._nodes.values()]

    def _live_nodes(self) -> list[NodeInfo]:
        return [
            NodeInfo(n.host.name, n.host.url, n.pid)
            for n in self._nodes.values()
            if n.state == "running"
        ]

    def _raise_if_dead(self) -> None:
        if time.monotonic() < self._next_alive_check:
            return  # each check costs a round trip per host: at most one every 2 s
        self._next_alive_check = time.monotonic() + 2.0
        running = {n.host.name: (n, n.pid) for n in self._nodes.values() if n.state == "running"}
        running = {k: v for k, v in running.items() if v[1]}
        answers = run_all(
            [self.sessions[name] for name in running],
            lambda s: s.run(remote.alive(running[s.host.name][1], self.run)).out.strip(),
        )
        for (node, pid), answer in zip(running.values(), answers, strict=True):
            if answer != "yes":
                with self._lock:  # a node restarting right now (set_time_zone) is no death
                    if node.state != "running" or node.pid != pid:
                        continue
                tail = self.sessions[node.host.name].run(
                    f"tail -n 5 {shlex.quote(node.dir)}/node.log", check=False
                )
                raise ClusterError(
                    f"host {node.host.name}: the node (pid {node.pid}) exited; its log ends: "
                    + " | ".join(tail.out.strip().splitlines())
                )

    def _node(self, node_id: str) -> RemoteNode:
        if node_id not in self._nodes:
            raise ClusterError(f"no node {node_id!r} in this cluster ({', '.join(self._nodes)})")
        return self._nodes[node_id]

    # -- faults -----------------------------------------------------------------------------
    def _signal(self, node_id: str, sig: str, state: str, wait_gone: bool = False) -> None:
        with self._lock:
            node = self._node(node_id)
            if node.pid is None or node.state == "killed":
                return
            s = self.sessions[node_id]
            s.run(remote.signal_node(node.pid, self.run, sig, wait_gone))
            node.state = state
            self._save()

    def kill(self, node_id: str) -> None:
        self._signal(node_id, "KILL", "killed", wait_gone=True)

    def restart(self, node_id: str) -> None:
        with self._lock:
            node = self._node(node_id)
            if node.state in ("running", "paused"):
                return
            self._launch(node)

    def pause(self, node_id: str) -> None:
        if self._node(node_id).state == "running":
            self._signal(node_id, "STOP", "paused")

    def resume(self, node_id: str) -> None:
        if self._node(node_id).state == "paused":
            self._signal(node_id, "CONT", "running")

    @property
    def capabilities(self) -> frozenset[str]:
        can = set(self.CAPABILITIES)
        if any(f.firewall_problem for f in self.facts.values()):
            can.discard(PARTITIONS)
        if any(self._clock_problem(n) for n in self._nodes.values()):
            can.discard(CLOCK_SKEW)
        if self.links_problem():
            can.discard(LINKS)
        if self._disk_problem():
            can.discard(DISK)
        return frozenset(can)

    def capability_problem(self, capability: str) -> str | None:
        if capability == PARTITIONS:
            problem = next(
                (f.firewall_problem for f in self.facts.values() if f.firewall_problem), None
            )
            if problem:
                return problem
        if capability == CLOCK_SKEW:
            problem = next(filter(None, map(self._clock_problem, self._nodes.values())), None)
            if problem:
                return problem
        if capability == LINKS and (problem := self.links_problem()):
            return problem
        if capability == DISK and (problem := self._disk_problem()):
            return problem
        return super().capability_problem(capability)

    def _clock_problem(self, node: RemoteNode) -> str | None:
        if node.host.project_node or self.facts[node.host.name].faketime:
            return None
        return (
            f"host {node.host.name} has no libfaketime, so its rqlited's clock cannot be "
            "skewed (apt-get install libfaketime there)"
        )

    def partition(self, components: Iterable[Iterable[str]]) -> None:
        problem = self.capability_problem(PARTITIONS)
        if problem:
            raise ClusterError(problem)
        comps = normalise(components, self._nodes)
        self._cut(
            lambda addresses, ports: remote.partition_rules(comps, addresses, ports, self.run)
        )

    def partition_one_way(self, cuts: Iterable[Iterable[str]]) -> None:
        problem = self.capability_problem(PARTITIONS)
        if problem:
            raise ClusterError(problem)
        pairs = [list(c) for c in cuts]
        try:
            one_way_drops(pairs, self._nodes)
        except ValueError as exc:
            raise ClusterError(f"bad one-way partition: {exc}") from None
        self._cut(lambda addresses, ports: remote.one_way_rules(pairs, addresses, ports, self.run))

    def _cut(self, build: Callable[[dict[str, str], set[int]], dict[str, list[str]]]) -> None:
        """Heal, then add on each host the rules ``build`` makes from the nodes' addresses
        and ports."""
        addresses = {n: x.host.address for n, x in self._nodes.items()}
        ports = {p for x in self._nodes.values() for p in (x.host.http_port, x.host.raft_port)}
        with self._lock:
            self.heal()
            rules = build(addresses, ports)
            self._partitioned = set(rules)
            self._save()

            def one(name: str) -> None:
                self.sessions[name].run(remote.insert_rules(rules[name]), sudo=True)

            run_all([self.sessions[n] for n in rules], lambda s: one(s.host.name))

    def heal(self) -> None:
        with self._lock:
            names = sorted(self._partitioned)
            comment = f"{remote.COMMENT_PREFIX}{self.run}"
            run_all(
                [self.sessions[n] for n in names],
                lambda s: s.run(remote.delete_rules(comment), sudo=True),
            )
            self._partitioned = set()
            self._save()

    def set_clock_offset(self, node_id: str, seconds: float) -> None:
        if not isinstance(seconds, int | float) or not math.isfinite(seconds):
            raise ClusterError(f"clock offset must be a finite number of seconds, got {seconds!r}")
        node = self._node(node_id)
        problem = self._clock_problem(node)
        if problem:
            raise ClusterError(problem)
        text = self._clock_text(node, float(seconds))
        self.sessions[node_id].run(remote.write_file(f"{node.dir}/clock-offset", text + "\n"))

    @staticmethod
    def _clock_text(node: RemoteNode, seconds: float) -> str:
        return repr(seconds) if node.host.project_node else faketime_offset(seconds)

    def _apply_time_zone(self, node_id: str, tzif: bytes | None) -> tuple[str, str] | None:
        """The bytes go to ``zone.tzif`` in the node's run folder on the host and the node
        restarts with ``TZ=<that file>`` (SIGTERM, SIGKILL after 5 s, start on its data)."""
        with self._lock:
            node = self._node(node_id)
            if node.state in ("new", "stopped"):
                raise ClusterError(f"cannot set node {node_id}'s time zone: it is {node.state}")
            s = self.sessions[node_id]
            zone = f"{node.dir}/zone.tzif"
            if tzif is not None:
                z = shlex.quote(zone)
                s.run(f"cat > {z}.tmp && mv -f {z}.tmp {z}", stdin=tzif)
            node.tz = "UTC" if tzif is None else zone
            self._save()
            if node.state == "killed":
                return None
            if node.pid is not None:
                s.run(remote.terminate(node.pid, self.run), timeout=30)
            self._launch(node)
        return node.host.url, f"TZ={node.tz}"

    # -- teardown ---------------------------------------------------------------------------
    def stop(self) -> None:
        """Bring logs and data listings here, then stop this run's nodes, delete its rules
        and its run folders; the sessions end last. Problems on one host do not stop the
        clean-up of the others; the first is raised at the end."""
        comment = f"{remote.COMMENT_PREFIX}{self.run}"

        def one(node: RemoteNode) -> None:
            s = self.sessions[node.host.name]
            local = self.directory / node.host.name
            local.mkdir(parents=True, exist_ok=True)
            if node.pid is not None:
                s.run(remote.signal_node(node.pid, self.run, "KILL", wait_gone=True) + "; true")
            d = shlex.quote(node.dir)
            mark = f"--- node.log of run {self.run} ---"  # one round trip for both
            cmd = f"cd {d} && ls -laR data; echo '{mark}'; cat node.log"
            both = s.run(cmd, timeout=60, check=False)  # no log yet: a start that failed early
            listing, _, log = both.out.partition(f"{mark}\n")
            (local / "data-listing.txt").write_text(listing or both.err)
            (local / "node.log").write_text(log)
            s.run(remote.delete_rules(comment), sudo=True, check=False)
            s.run(links.cleanup_text(self.run), sudo=True, check=False)
            s.run(remote.delete_rules(forward.comment(self.run)), sudo=True, check=False)
            self._release_disk(s, node)
            if node.dir.endswith(f"/{remote.RUN_PREFIX}{self.run}"):  # never another path
                s.run(f"rm -rf -- {d}")
            node.state = "stopped"

        try:
            run_all(self.used_nodes(), one)
            self._partitioned = set()
            (self.directory / STATE_FILE).unlink(missing_ok=True)  # nothing left to attach to
        finally:
            self.sessions.close()


def sweep_inventory(inventory: Path | str) -> dict[str, list[str]]:
    """Remove what any run of the harness left on the inventory's hosts: its nodes (pids
    checked against their run's tag), its firewall rules (by comment) and its run folders.
    Returns, per host, what was removed."""
    inv = load_inventory(inventory)
    sessions = Sessions(inv.hosts)
    sessions.open()
    try:

        def one(s) -> list[str]:
            facts_ok = s.run("id -u", check=False).out.strip() == "0" or s.host.sudo
            out = sweep_disks(s, facts_ok)
            out += s.run(remote.sweep(s.host.data_dir), timeout=60).out.splitlines()
            if facts_ok:
                rules = s.run(remote.delete_rules(remote.COMMENT_PREFIX), sudo=True, timeout=60)
                out += [f"iptables {line}" for line in rules.out.splitlines()]
                out += s.run(links.sweep_text(), sudo=True, timeout=60).out.splitlines()
            return out

        results = run_all(list(sessions.by_name.values()), one)
    finally:
        sessions.close()
    return {h.name: r for h, r in zip(inv.hosts, results, strict=True)}
