"""``python -m harness cluster up|status|urls|down``: clusters that outlive the command.

::

    python -m harness cluster up --nodes 3 --dir /tmp/c [--engine embedded|rqlited]
                                 [--rqlited PATH] [--base-port P] [--netns] [--timeout S]
    python -m harness cluster status --dir /tmp/c
    python -m harness cluster urls --dir /tmp/c        # http://127.0.0.1:P1,http://...
    python -m harness cluster down --dir /tmp/c        # stop these nodes, keep their files
    python -m harness cluster up --dir /tmp/c          # start them again on their data
    python -m harness cluster down --all [--tag TAG]   # reap clusters whose owner is gone

``up`` and ``status`` print exactly one JSON object on stdout,
``{"dir": DIR, "leader": URL, "urls": "URL,URL,...", "nodes": [{"id", "url", "pid", ...}],
...}``; ``down`` prints one too; ``urls`` prints the nodes' URLs joined by commas (what
``RqliteTransport.from_url`` and ``$RQUEUE_URL`` take). Diagnostics go to stderr. Exit
status: 0 done, 1 ``status`` found no leader, 2 the command failed (the message says
why), 130 ``up`` interrupted (Ctrl-C; what it had started is stopped).

``--base-port P`` gives the nodes fixed HTTP ports P, P+10, P+20, ... (Raft: the port
after each); without it they take free ports. ``up --dir D`` on the folder of a cluster
that ``down`` stopped starts it again on its data, ports and engine (options given then
must agree with them). ``--backend docker`` drives the Docker backend instead; a
directory holding a Docker cluster's state is recognised by itself, and its ``down``
stops the containers and keeps them and their volumes, so ``up --dir D`` brings the same
cluster back on its data (``down --purge`` removes containers, network and volumes).

``down --all`` reaps only what is provably abandoned: clusters whose owner (the run,
test or program that started them and would stop them) is gone
(:mod:`harness.cluster.owners`). A cluster ``up`` started has no owner and is never
reaped this way: ``down --dir`` names it. ``--tag`` limits ``--all`` to clusters started
with ``RQUEUE_REAP_TAG=TAG``; ``--yes-kill-live`` also takes live clusters, other
users' included. What ``--all`` left alone is listed under ``"left"`` (and on stderr).

Until ``python -m harness`` wires it, ``python -m harness.cluster.cli ...`` works the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from harness.cluster.base import Cluster, ClusterError
from harness.cluster.engines import ENGINES
from harness.cluster.factory import BACKENDS, make_cluster
from harness.cluster.local.cluster import STATE_FILE, LocalCluster
from harness.cluster.local.processes import node_processes, reap, reap_disks
from harness.errors import EXIT_HARNESS, EXIT_INTERRUPTED, EXIT_NO_LEADER, EXIT_OK
from harness.wording import plural
from rqueue._stdout import quiet_when_stdout_closes

DOCKER_STATE_FILE = "docker-cluster.json"
SSH_STATE_FILE = "ssh-cluster.json"  # harness.cluster.ssh.cluster.STATE_FILE
#: what a Docker cluster leaves in its directory when ``down --purge`` removed it
DOCKER_IMAGE_FILE = "docker-image.json"
EXAMPLES = """examples:
  python -m harness cluster up --nodes 3 --dir /tmp/c      # prints {"dir", "leader", "urls", ...}
  python -m harness cluster up --dir /tmp/q --base-port 4001   # nodes on :4001, :4011, :4021
  python -m harness cluster up --nodes 5 --dir /tmp/p --netns   # root: partitions possible
  python -m harness cluster status --dir /tmp/c
  python -m harness cluster urls --dir /tmp/c              # http://127.0.0.1:...,http://...
  python -m harness cluster down --dir /tmp/c              # stops the nodes, keeps the files
  python -m harness cluster up --dir /tmp/c                # starts them again on their data
  python -m harness cluster down --all                     # reaps clusters whose owner is gone
"""


def _node_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--nodes must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--nodes must be at least 1, got {value}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--base-port must be a port number, got {text!r}"
        ) from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"--base-port must be 1-65535, got {value}")
    return value


def add_engine_arguments(p: argparse.ArgumentParser) -> None:
    """``--engine`` and ``--rqlited``, the same for every command that starts a cluster."""
    p.add_argument(
        "--engine",
        default="embedded",
        choices=ENGINES,
        help="embedded: the project's rqlite-compatible node (default); rqlited: a real rqlite",
    )
    p.add_argument("--rqlited", metavar="PATH", help="the rqlited binary (default: on PATH)")


def add_image_argument(p: argparse.ArgumentParser) -> None:
    """``--image``, for commands that can start a Docker cluster."""
    p.add_argument(
        "--image",
        metavar="IMAGE",
        help="with --backend docker: the node image (default $RQLITE_IMAGE, else the "
        "pinned official rqlite/rqlite; `python -m harness image build` makes "
        "rqueue/node:local)",
    )


def add_inventory_argument(p: argparse.ArgumentParser) -> None:
    """``--inventory``, for commands that can drive the SSH backend."""
    p.add_argument(
        "--inventory",
        type=Path,
        metavar="FILE",
        help="with --backend ssh: the hosts (TOML; docs/ssh.md; `python -m harness hosts up` "
        "makes local test hosts and their inventory)",
    )


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``cluster`` command with ``up``, ``status``, ``urls`` and ``down``."""
    parser = subparsers.add_parser(
        "cluster",
        help="start, inspect and stop clusters",
        description="Start clusters that outlive the command, inspect them, stop them.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="cluster_command", metavar="{up,status,urls,down}")
    sub.required = True

    up = sub.add_parser(
        "up",
        help="start a cluster (or a stopped one again) and print it as JSON",
        description=(
            "Start a cluster in DIR and print it as JSON. On the folder of a cluster that "
            "`cluster down` stopped, start that cluster again on its data, ports and engine."
        ),
    )
    up.add_argument("--nodes", type=_node_count, help="number of nodes (default 3)")
    up.add_argument("--dir", type=Path, required=True, help="directory for state, data, logs")
    add_engine_arguments(up)
    up.set_defaults(engine=None)  # None: embedded for a new cluster, as it was for a restart
    up.add_argument(
        "--base-port",
        type=_port,
        metavar="P",
        help="HTTP ports P, P+10, P+20, ... and Raft ports P+1, P+11, ... on 127.0.0.1 "
        "(default: free ports)",
    )
    up.add_argument("--netns", action="store_true", help="one network namespace per node (root)")
    up.add_argument(
        "--backend",
        choices=BACKENDS,
        help="local (default for a new cluster) or docker; a stopped cluster's folder "
        "says which it is",
    )
    add_image_argument(up)
    add_inventory_argument(up)
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a leader")
    up.set_defaults(handler=cmd_up)

    status = sub.add_parser("status", help="print a running cluster as JSON")
    status.add_argument("--dir", type=Path, required=True)
    status.add_argument("--backend", choices=BACKENDS, default=None)
    status.set_defaults(handler=cmd_status)

    urls = sub.add_parser("urls", help="print the nodes' URLs, joined by commas")
    urls.add_argument("--dir", type=Path, help="the cluster's directory")
    urls.add_argument("--backend", choices=BACKENDS, default=None)
    add_inventory_argument(urls)
    urls.set_defaults(handler=cmd_urls)

    down = sub.add_parser(
        "down",
        help="stop a cluster (`up --dir` starts it again), or reap abandoned ones",
        description=(
            "Stop the cluster in --dir, keeping its data (`up --dir` starts it again), or "
            "with --all reap the clusters whose owner (the run, test or program that "
            "started them) is gone. --all never touches a live cluster unless "
            "--yes-kill-live says so."
        ),
    )
    which = down.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--dir",
        type=Path,
        help="the cluster's directory (its data is kept: `up --dir` starts it again)",
    )
    which.add_argument(
        "--inventory",
        type=Path,
        metavar="FILE",
        help="with --backend ssh: remove from the inventory's hosts every node, firewall "
        "rule and run folder any run of the harness left there (after a crash)",
    )
    which.add_argument(
        "--all",
        action="store_true",
        help="reap every cluster of this project whose owner process is gone; lists the "
        "live ones it leaves",
    )
    down.add_argument("--backend", choices=BACKENDS, default=None)
    down.add_argument("--tag", help="with --all: only clusters started with RQUEUE_REAP_TAG=TAG")
    down.add_argument(
        "--yes-kill-live",
        action="store_true",
        help="with --all: also kill live clusters (clusters `up` started, the compose "
        "file's, runs and tests in progress, other users' too: their work is lost)",
    )
    down.add_argument(
        "--purge",
        action="store_true",
        help="with --dir, a Docker cluster: also remove its containers, network and "
        "volumes (its data)",
    )
    down.set_defaults(handler=cmd_down)
    return parser


def _print(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _fail(exc: Exception) -> int:
    print(f"harness: error: {exc}", file=sys.stderr)
    return EXIT_HARNESS


def _held(directory: Path) -> str | None:
    """What ``directory`` holds: ``local`` or ``docker`` (a cluster's state),
    ``docker-purged`` (a Docker cluster's folder after ``down --purge``), or None."""
    if (directory / STATE_FILE).exists():
        return "local"
    if (directory / DOCKER_STATE_FILE).exists():
        return "docker"
    if (directory / DOCKER_IMAGE_FILE).exists():
        return "docker-purged"
    if (directory / SSH_STATE_FILE).exists():
        return "ssh"
    return None


def _backend_of(directory: Path, backend: str | None) -> str:
    if backend:
        return backend
    held = _held(directory)
    return held if held in ("docker", "ssh") else "local"


def _attach(directory: Path, backend: str | None) -> Cluster:
    if _backend_of(directory, backend) == "docker":
        from harness.cluster.docker.lifecycle import attach_docker_cluster

        return attach_docker_cluster(directory)
    if _backend_of(directory, backend) == "ssh":
        from harness.cluster.ssh.cluster import SshCluster

        return SshCluster.attach(directory)
    return LocalCluster.attach(directory)


def _describe(cluster: Cluster, directory: Path) -> dict:
    info = cluster.describe()
    info.setdefault("dir", str(directory.resolve()))
    info.setdefault("urls", ",".join(n.url for n in cluster.nodes()))
    return info


def _start(args: argparse.Namespace) -> Cluster:
    """A new cluster as the options say, or the stopped one in ``--dir`` started again."""
    held = _held(args.dir)
    if held == "ssh":
        raise ClusterError(
            f"{args.dir.resolve()} holds a running SSH cluster: `cluster down --dir` it first"
        )
    if held in ("local", "docker") and args.backend not in (None, held):
        raise ClusterError(
            f"{args.dir.resolve()} holds a {held} cluster, not a {args.backend} one: `up "
            "--dir` without --backend starts it again; give a new directory for a "
            f"{args.backend} cluster"
        )
    if held == "local":
        return _restart(args)
    if held == "docker":
        return _restart_docker(args)
    if held == "docker-purged" and args.backend is None:
        raise ClusterError(
            f"{args.dir.resolve()} held a Docker cluster that `down --purge` removed: "
            "give --backend docker for a new Docker cluster there, or --backend local"
        )
    backend = args.backend or "local"
    if args.base_port is not None:
        if backend != "local":
            raise ClusterError("--base-port is for --backend local (Docker picks free ports)")
        return LocalCluster.start(
            nodes=args.nodes or 3,
            directory=args.dir,
            engine=args.engine or "embedded",
            rqlited=args.rqlited,
            netns=args.netns,
            timeout=args.timeout,
            base_port=args.base_port,
            detached=True,
        )
    return make_cluster(
        backend=backend,
        engine=args.engine or "embedded",
        nodes=args.nodes or (None if backend == "ssh" else 3),
        directory=args.dir,
        rqlited=args.rqlited,
        netns=args.netns,
        timeout=args.timeout,
        image=args.image,
        inventory=args.inventory,
        detached=True,  # it outlives this command: only `down --dir` stops it
    )


def _restart_docker(args: argparse.Namespace) -> Cluster:
    """Start the Docker cluster that ``down`` stopped in ``--dir`` again, on its data."""
    from harness.cluster.docker.lifecycle import attach_docker_cluster, restart_docker_cluster

    old = attach_docker_cluster(args.dir)
    specs = list(old._specs.values())
    differs = []
    if args.nodes is not None and args.nodes != len(specs):
        differs.append(f"{len(specs)} nodes, not {args.nodes}")
    if args.image is not None and args.image != specs[0].image:
        differs.append(f"image {specs[0].image}, not {args.image}")
    if args.base_port is not None:
        differs.append(f"host ports {', '.join(str(s.host_port) for s in specs)}")
    if args.rqlited is not None or args.netns:
        differs.append("containers (leave --rqlited and --netns out)")
    if differs:
        raise ClusterError(
            f"{args.dir.resolve()} holds a stopped Docker cluster with {'; '.join(differs)}: "
            "`up --dir` starts it again as it was; give a new directory for a different cluster"
        )
    cluster = restart_docker_cluster(args.dir, args.timeout)
    print(
        f"started the stopped Docker cluster in {args.dir.resolve()} again on its volumes",
        file=sys.stderr,
    )
    return cluster


def _restart(args: argparse.Namespace) -> Cluster:
    """Start the stopped cluster in ``--dir`` again, if the options agree with it; in a
    running one, start again the nodes whose process is gone."""
    old = LocalCluster.attach(args.dir)
    nodes = old.nodes()
    port = urlsplit(nodes[0].url).port
    differs = []
    if args.nodes is not None and args.nodes != len(nodes):
        differs.append(f"{len(nodes)} nodes, not {args.nodes}")
    if args.engine is not None and args.engine != old.engine:
        differs.append(f"engine {old.engine}, not {args.engine}")
    if args.base_port is not None and args.base_port != port:
        differs.append(f"base port {port}, not {args.base_port}")
    if args.rqlited is not None:
        differs.append("the rqlited binary it was started with (leave --rqlited out)")
    running = any(old._alive(s) for s in old._specs.values() if s.state != "removed")
    if args.netns and not old.supports_partitions:
        differs.append("no network namespaces (leave --netns out)")
    if differs:
        raise ClusterError(
            f"{old.directory} holds a {'running' if running else 'stopped'} cluster with "
            f"{'; '.join(differs)}: `up --dir` starts "
            f"{'its dead nodes' if running else 'it'} again as it was; give a new "
            "directory for a different cluster"
        )
    if running:
        return _revive(old.directory, args.timeout)
    cluster = LocalCluster.restart_stopped(args.dir, args.timeout, detached=True)
    print(f"started the stopped cluster in {old.directory} again on its data", file=sys.stderr)
    return cluster


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


def cmd_up(args: argparse.Namespace) -> int:
    existed = args.dir.exists()
    try:
        cluster = _start(args)
        try:
            _print(_describe(cluster, args.dir))
        finally:
            if hasattr(cluster, "close"):
                cluster.close()  # SSH: end the sessions; the nodes keep running
    except (ClusterError, OSError) as exc:
        _remove_if_made_empty(args.dir, existed)
        return _fail(exc)
    except KeyboardInterrupt:
        print("interrupted: stopped every node and network started so far", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _remove_if_made_empty(directory: Path, existed: bool) -> None:
    """A refused ``up`` leaves no folder it made and left empty."""
    if not existed and directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()


def cmd_status(args: argparse.Namespace) -> int:
    try:
        cluster = _attach(args.dir, args.backend)
        try:
            info = _describe(cluster, args.dir)
        finally:
            if hasattr(cluster, "close"):
                cluster.close()
    except (ClusterError, OSError) as exc:
        return _fail(exc)
    _print(info)
    return EXIT_OK if info.get("leader") else EXIT_NO_LEADER


def cmd_urls(args: argparse.Namespace) -> int:
    try:
        if args.inventory is not None:
            if args.backend != "ssh" or args.dir is not None:
                raise ClusterError("--inventory goes with --backend ssh (and no --dir)")
            from harness.cluster.ssh.inventory import load_inventory

            urls = [h.url for h in load_inventory(args.inventory).hosts]
        elif args.dir is None:
            raise ClusterError("give --dir DIR (or --backend ssh --inventory FILE)")
        elif _backend_of(args.dir, args.backend) == "ssh":
            urls = _ssh_urls(args.dir)
        else:
            urls = [n.url for n in _attach(args.dir, args.backend).nodes()]
    except (ClusterError, OSError) as exc:
        return _fail(exc)
    sys.stdout.write(",".join(urls) + "\n")
    return EXIT_OK


def _ssh_urls(directory: Path) -> list[str]:
    """The URLs of the SSH cluster in ``directory``, from its state (no host contacted)."""
    from harness.cluster.ssh.inventory import load_inventory

    try:
        state = json.loads((directory / SSH_STATE_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise ClusterError(f"{directory.resolve()} holds no SSH cluster: {exc}") from None
    hosts = load_inventory(state["inventory"]).hosts
    return [h.url for h in hosts if h.name in state["hosts"]]


def cmd_down(args: argparse.Namespace) -> int:
    try:
        if args.inventory is not None:
            if args.backend != "ssh" or args.purge or args.tag or args.yes_kill_live:
                raise ClusterError("down --inventory FILE goes with --backend ssh alone")
            from harness.cluster.ssh.cluster import sweep_inventory

            _print({"inventory": str(args.inventory), "removed": sweep_inventory(args.inventory)})
            return EXIT_OK
        if args.all:
            if args.purge:
                raise ClusterError("--purge is for `down --dir` (one Docker cluster)")
            _print(_reap_all(args))
            return EXIT_OK
        if args.yes_kill_live or args.tag:
            raise ClusterError("--tag and --yes-kill-live are for `down --all`")
        cluster = _attach(args.dir, args.backend)
        if args.purge:
            if _backend_of(args.dir, args.backend) != "docker":
                raise ClusterError(
                    "--purge is for Docker clusters: a local cluster's data is in its "
                    "directory; delete that after `down --dir`"
                )
            cluster.stop()
        elif hasattr(cluster, "halt"):
            cluster.halt()  # Docker: the containers and volumes stay for `up --dir`
        else:
            cluster.stop()
        _print({"dir": str(args.dir.resolve()), "stopped": True, "purged": args.purge})
    except (ClusterError, OSError, ImportError) as exc:
        return _fail(exc)
    return EXIT_OK


def _reap_all(args: argparse.Namespace) -> dict:
    """``down --all``: the abandoned clusters reaped (live ones too with
    ``--yes-kill-live``), and the ones left alone, also named on stderr."""
    if (args.backend or "local") == "docker":
        from harness.cluster.docker.engine import docker_clusters, reap_docker

        removed = reap_docker(tag=args.tag, live_too=args.yes_kill_live)
        busy = {p.directory for p in node_processes()}  # local clusters' disks stay
        disks = reap_disks(set(), busy, args.tag is None, args.yes_kill_live)
        left = docker_clusters(tag=args.tag)
        for c in left:
            print(f"left Docker cluster {c['cluster']}: {c['why']}", file=sys.stderr)
        return {"reaped": {"docker": removed, "disks": disks}, "left": left}
    result = reap(args.tag, live_too=args.yes_kill_live)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: ``python -m harness.cluster.cli up|status|urls|down ...``."""
    parser = argparse.ArgumentParser(prog="python -m harness.cluster.cli")
    register(parser.add_subparsers(dest="command"))

    def run() -> int:
        args = parser.parse_args(["cluster", *(sys.argv[1:] if argv is None else argv)])
        return args.handler(args)

    return quiet_when_stdout_closes(run)


if __name__ == "__main__":
    sys.exit(main())
