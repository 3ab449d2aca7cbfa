"""What every cluster backend declares: one entry of the registry
(:mod:`harness.cluster.backends`), as a fault kind is one of :mod:`harness.faults`.

A backend (:class:`Backend`) is a class: its name, the state file its clusters leave in
their directory, the options it takes beyond the common ones, and what the commands ask
of it: start a cluster (:meth:`Backend.start`), attach to one from its directory, start
a stopped one again, stop or halt one, reap what crashed runs left, check the machine
before a run, read an engine of ``matrix``. An entry lives in its backend's folder
(``local/backend.py``, ``docker/backend.py``, ``ssh/backend.py``); the Docker SDK is
imported only when a Docker cluster is reached, so Docker stays optional.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from .base import Cluster, ClusterError

#: the options only some backends take, and the refusal when the chosen one does not
OPTION_REFUSALS: dict[str, str] = {
    "image": "--image names a Docker image: it needs --backend docker",
    "inventory": "--backend ssh and --inventory FILE go together (docs/ssh.md)",
    "rqlited": "--rqlited names a binary for --backend local",
    "base_port": "--base-port is for --backend local (Docker picks free ports)",
    "netns": "--netns is for --backend local",
}


@dataclass(frozen=True)
class ClusterOptions:
    """What a command asks of a cluster (``run``, ``cluster up``, :func:`make_cluster`);
    None: the backend's default or, for a stopped cluster started again, what it was."""

    engine: str | None = None
    nodes: int | None = None
    directory: Path | None = None
    rqlited: str | None = None
    netns: bool = False
    timeout: float = 30.0
    image: str | None = None
    detached: bool = False
    disk_mb: int | None = None
    inventory: Path | None = None
    base_port: int | None = None

    def given(self) -> list[str]:
        """The backend-specific options given (:data:`OPTION_REFUSALS`' keys)."""
        return [o for o in OPTION_REFUSALS if getattr(self, o) not in (None, False)]

    def with_defaults(self, nodes: int | None) -> ClusterOptions:
        """These options with the embedded engine and ``nodes`` where none was given."""
        return replace(self, engine=self.engine or "embedded", nodes=self.nodes or nodes)


class Backend:
    """One kind of cluster; subclasses set the class attributes and the hooks they need."""

    #: the name ``--backend`` gives
    name: ClassVar[str]
    #: what it runs, after "name: " in ``--backend``'s help
    summary: ClassVar[str]
    #: how messages name it ("Docker", "SSH")
    title: ClassVar[str]
    #: the file its clusters keep their state in, in their directory (None: none)
    state_file: ClassVar[str | None] = None
    #: the file a removed cluster (``down --purge``) leaves in its directory (None: none)
    purged_file: ClassVar[str | None] = None
    #: the options of :data:`OPTION_REFUSALS` it takes
    options: ClassVar[frozenset[str]] = frozenset()
    #: whether a command can start one (False: only clusters someone else runs)
    startable: ClassVar[bool] = True
    #: whether ``down --purge`` means something for it (removes its data)
    purgeable: ClassVar[bool] = False
    #: where a cluster's data stays, and how to remove it, when it is not purgeable
    data_kept: ClassVar[str] = "in its directory; delete that after `down --dir`"
    #: whether ``down --all`` reaps its clusters (False: the default backend's reaping)
    reaps: ClassVar[bool] = False

    @classmethod
    def cluster_class(cls) -> type[Cluster]:
        """The class of its clusters (imported when asked)."""
        raise NotImplementedError(f"backend {cls.name} names no cluster class")

    @classmethod
    def capabilities(cls) -> frozenset[str]:
        """What its clusters can do at best (:attr:`Cluster.CAPABILITIES`)."""
        return cls.cluster_class().CAPABILITIES

    @classmethod
    def check(cls, options: ClusterOptions) -> None:
        """Refuse, in one line, the options it does not take."""
        for option in options.given():
            if option not in cls.options:
                raise ClusterError(cls.refusal(option))

    @classmethod
    def refusal(cls, option: str) -> str:
        """Why it does not take ``option`` (an :data:`OPTION_REFUSALS` key)."""
        return OPTION_REFUSALS[option]

    @classmethod
    def start(cls, options: ClusterOptions) -> Cluster:
        """A new cluster as ``options`` say (checked): a leader is elected and every node
        is ready when this returns."""
        raise ClusterError(f"the {cls.name} backend cannot start a cluster")

    @classmethod
    def holds(cls, directory: Path) -> bool:
        """Whether ``directory`` holds one of its clusters' state."""
        return cls.state_file is not None and (directory / cls.state_file).exists()

    @classmethod
    def attach(cls, directory: Path) -> Cluster:
        """The cluster whose state is in ``directory``."""
        raise ClusterError(f"the {cls.name} backend keeps no cluster in a directory")

    @classmethod
    def start_again(cls, directory: Path, options: ClusterOptions) -> Cluster:
        """``cluster up --dir`` on the folder of one of its clusters: the stopped cluster
        started again, if ``options`` agree with it."""
        raise ClusterError(
            f"{directory.resolve()} holds a running {cls.title} cluster: "
            "`cluster down --dir` it first"
        )

    @classmethod
    def urls(cls, directory: Path) -> list[str]:
        """The URLs of the cluster in ``directory``."""
        return [n.url for n in cls.attach(directory).nodes()]

    @classmethod
    def urls_of(cls, inventory: Path) -> list[str]:
        """The URLs of the nodes ``inventory`` names (a backend that takes one)."""
        raise ClusterError(cls.refusal("inventory"))

    @classmethod
    def sweep(cls, inventory: Path) -> dict[str, list[str]]:
        """Remove from the hosts of ``inventory`` what crashed runs left there: what was
        removed, by host."""
        raise ClusterError(cls.refusal("inventory"))

    @classmethod
    def down(cls, cluster: Cluster, purge: bool) -> None:
        """Stop ``cluster`` for ``cluster down --dir`` (``purge``: its data too)."""
        cluster.stop()

    @classmethod
    def busy(cls) -> set[str]:
        """The directories of its clusters that live processes of this machine use now
        (their nodes' filesystems stay whatever reaps)."""
        return set()

    @classmethod
    def reap(cls, tag: str | None, live_too: bool, busy: set[str]) -> dict:
        """``down --all``: ``{"reaped": ..., "left": [...]}``, what was reaped of the
        clusters whose owner is gone (live ones too with ``live_too``; ``tag``: only
        those started with ``RQUEUE_REAP_TAG=tag``) and the ones left, also on stderr;
        ``busy``: every backend's :meth:`busy` directories, whose disks stay."""
        raise ClusterError(f"the {cls.name} backend reaps nothing")

    @classmethod
    def preflight(cls, scenario: str, needs: frozenset[str], chaos_all: bool) -> bool:
        """Check that this machine can run scenario ``scenario``'s faults, which ``needs``
        those capabilities (``chaos_all``: a ``[chaos]`` draw from whatever the cluster
        can do); returns whether to give each node a network namespace."""
        return False

    #: the forms ``matrix --engine`` takes for it ("docker:IMAGE")
    matrix_forms: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def matrix_engine(cls, spec: str) -> tuple[str, tuple[str, ...]] | None:
        """``matrix --engine spec`` read as one of its forms: (the table's label, the run
        command's arguments), or None when ``spec`` is none of its forms."""
        return None
