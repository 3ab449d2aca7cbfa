"""The SSH backend's entry in the registry (:mod:`harness.cluster.backends`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from harness.cluster.backend import Backend, ClusterOptions
from harness.cluster.base import Cluster, ClusterError
from harness.cluster.ssh.cluster import STATE_FILE, SshCluster, sweep_inventory
from harness.cluster.ssh.inventory import load_inventory


class Ssh(Backend):
    """One node per host of an inventory (``--inventory``), reached over SSH; what runs on
    each host, the project's node or an rqlited there, is the inventory's to say."""

    name = "ssh"
    summary = "the hosts of --inventory"
    title = "SSH"
    state_file = STATE_FILE
    data_kept = (
        "on its hosts (each host's data_dir in the inventory); remove it there after `down --dir`"
    )
    options: ClassVar[frozenset[str]] = frozenset({"inventory"})
    matrix_forms = ("ssh:INVENTORY",)

    @classmethod
    def cluster_class(cls) -> type[Cluster]:
        return SshCluster

    @classmethod
    def check(cls, options: ClusterOptions) -> None:
        if options.inventory is None:
            raise ClusterError(cls.refusal("inventory"))
        super().check(options)

    @classmethod
    def refusal(cls, option: str) -> str:
        if option in ("rqlited", "image"):
            return (
                "--rqlited and --image are not for --backend ssh: the inventory names what "
                'each host runs (rqlited = "/path/on/host" or node = "project")'
            )
        return super().refusal(option)

    @classmethod
    def start(cls, options: ClusterOptions) -> Cluster:
        """The cluster on the inventory's first ``nodes`` hosts (None: all of them)."""
        if options.inventory is None:
            raise ClusterError(cls.refusal("inventory"))
        if options.directory is None:
            raise ClusterError("a cluster needs a directory for its state and logs")
        return SshCluster.start(
            options.inventory,
            options.nodes,
            Path(options.directory),
            timeout=options.timeout,
            disk_mb=options.disk_mb,
        )

    @classmethod
    def attach(cls, directory: Path) -> Cluster:
        return SshCluster.attach(directory)

    @classmethod
    def urls(cls, directory: Path) -> list[str]:
        """From the cluster's state and inventory: no host contacted."""
        try:
            state = json.loads((directory / STATE_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise ClusterError(f"{directory.resolve()} holds no SSH cluster: {exc}") from None
        hosts = load_inventory(state["inventory"]).hosts
        return [h.url for h in hosts if h.name in state["hosts"]]

    @classmethod
    def urls_of(cls, inventory: Path) -> list[str]:
        return [h.url for h in load_inventory(inventory).hosts]

    @classmethod
    def sweep(cls, inventory: Path) -> dict[str, list[str]]:
        return sweep_inventory(inventory)

    @classmethod
    def matrix_engine(cls, spec: str) -> tuple[str, tuple[str, ...]] | None:
        if not spec.startswith("ssh:") or not spec[4:]:
            return None
        inventory = Path(spec[4:])
        if not inventory.is_file():
            raise ValueError(f"engine {spec!r}: no inventory file {inventory}")
        return "ssh", ("--backend", "ssh", "--inventory", str(inventory.resolve()))
