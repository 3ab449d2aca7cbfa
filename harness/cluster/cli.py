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

from harness.cluster.backend import Backend, ClusterOptions
from harness.cluster.backends import BACKENDS, DEFAULT, STARTABLE, backend_of, busy, held_in
from harness.cluster.base import Cluster, ClusterError
from harness.cluster.engines import ENGINES
from harness.errors import EXIT_HARNESS, EXIT_INTERRUPTED, EXIT_NO_LEADER, EXIT_OK
from rqueue._stdout import quiet_when_stdout_closes

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
        choices=STARTABLE,
        help="local (default for a new cluster) or docker; a stopped cluster's folder "
        "says which it is",
    )
    add_image_argument(up)
    add_inventory_argument(up)
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a leader")
    up.set_defaults(handler=cmd_up)

    status = sub.add_parser("status", help="print a running cluster as JSON")
    status.add_argument("--dir", type=Path, required=True)
    status.add_argument("--backend", choices=STARTABLE, default=None)
    status.set_defaults(handler=cmd_status)

    urls = sub.add_parser("urls", help="print the nodes' URLs, joined by commas")
    urls.add_argument("--dir", type=Path, help="the cluster's directory")
    urls.add_argument("--backend", choices=STARTABLE, default=None)
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
    down.add_argument("--backend", choices=STARTABLE, default=None)
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


def _backend_of(directory: Path | None, backend: str | None) -> type[Backend]:
    """The backend ``--backend`` names, else the one whose cluster ``directory`` holds,
    else the default."""
    if backend:
        return backend_of(backend)
    held = held_in(directory) if directory is not None else None
    return held[0] if held and not held[1] else BACKENDS[DEFAULT]


def _attach(directory: Path, backend: str | None) -> Cluster:
    return _backend_of(directory, backend).attach(directory)


def _describe(cluster: Cluster, directory: Path) -> dict:
    info = cluster.describe()
    info.setdefault("dir", str(directory.resolve()))
    info.setdefault("urls", ",".join(n.url for n in cluster.nodes()))
    return info


def _options(args: argparse.Namespace) -> ClusterOptions:
    """What ``cluster up`` was asked for."""
    return ClusterOptions(
        engine=args.engine,
        nodes=args.nodes,
        directory=args.dir,
        rqlited=args.rqlited,
        netns=args.netns,
        timeout=args.timeout,
        image=args.image,
        detached=True,  # it outlives this command: only `down --dir` stops it
        inventory=args.inventory,
        base_port=args.base_port,
    )


def _start(args: argparse.Namespace) -> Cluster:
    """A new cluster as the options say, or the stopped one in ``--dir`` started again."""
    options = _options(args)
    held = held_in(args.dir)
    if held is not None and not held[1]:
        backend = held[0]
        if args.backend not in (None, backend.name):
            raise ClusterError(
                f"{args.dir.resolve()} holds a {backend.name} cluster, not a {args.backend} "
                "one: `up --dir` without --backend starts it again; give a new directory "
                f"for a {args.backend} cluster"
            )
        return backend.start_again(args.dir, options)
    if held is not None and args.backend is None:
        raise ClusterError(
            f"{args.dir.resolve()} held a {held[0].title} cluster that `down --purge` "
            f"removed: give --backend {held[0].name} for a new {held[0].title} cluster "
            f"there, or --backend {DEFAULT}"
        )
    backend = backend_of(args.backend or DEFAULT)
    backend.check(options)
    return backend.start(options)


def cmd_up(args: argparse.Namespace) -> int:
    existed = args.dir.exists()
    try:
        cluster = _start(args)
        try:
            _print(_describe(cluster, args.dir))
        finally:
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
            cluster.close()
    except (ClusterError, OSError) as exc:
        return _fail(exc)
    _print(info)
    return EXIT_OK if info.get("leader") else EXIT_NO_LEADER


def _takers(option: str) -> str:
    """The backends that take ``option``, as ``--backend NAME`` (or ...)."""
    return " or ".join(f"--backend {n}" for n, b in BACKENDS.items() if option in b.options)


def _with_inventory(args: argparse.Namespace, refusal: str) -> type[Backend]:
    """The backend of ``--inventory``: the one ``--backend`` names, if it takes one;
    else :class:`ClusterError` saying ``refusal``."""
    backend = BACKENDS.get(args.backend or "")
    if backend is None or "inventory" not in backend.options:
        raise ClusterError(refusal)
    return backend


def cmd_urls(args: argparse.Namespace) -> int:
    try:
        if args.inventory is not None:
            refusal = f"--inventory goes with {_takers('inventory')} (and no --dir)"
            if args.dir is not None:
                raise ClusterError(refusal)
            urls = _with_inventory(args, refusal).urls_of(args.inventory)
        elif args.dir is None:
            raise ClusterError(f"give --dir DIR (or {_takers('inventory')} --inventory FILE)")
        else:
            urls = _backend_of(args.dir, args.backend).urls(args.dir)
    except (ClusterError, OSError) as exc:
        return _fail(exc)
    sys.stdout.write(",".join(urls) + "\n")
    return EXIT_OK


def cmd_down(args: argparse.Namespace) -> int:
    try:
        if args.inventory is not None:
            refusal = f"down --inventory FILE goes with {_takers('inventory')} alone"
            if args.purge or args.tag or args.yes_kill_live:
                raise ClusterError(refusal)
            removed = _with_inventory(args, refusal).sweep(args.inventory)
            _print({"inventory": str(args.inventory), "removed": removed})
            return EXIT_OK
        if args.all:
            if args.purge:
                raise ClusterError("--purge is for `down --dir` (one Docker cluster)")
            _print(_reap_all(args))
            return EXIT_OK
        if args.yes_kill_live or args.tag:
            raise ClusterError("--tag and --yes-kill-live are for `down --all`")
        backend = _backend_of(args.dir, args.backend)
        cluster = backend.attach(args.dir)
        if args.purge and not backend.purgeable:
            purgeable = " and ".join(b.title for b in BACKENDS.values() if b.purgeable)
            raise ClusterError(
                f"--purge is for {purgeable} clusters: a {backend.name} cluster's data is "
                f"{backend.data_kept}"
            )
        backend.down(cluster, args.purge)
        _print({"dir": str(args.dir.resolve()), "stopped": True, "purged": args.purge})
    except (ClusterError, OSError, ImportError) as exc:
        return _fail(exc)
    return EXIT_OK


def _reap_all(args: argparse.Namespace) -> dict:
    """``down --all``: the abandoned clusters reaped (live ones too with
    ``--yes-kill-live``), and the ones left alone, also named on stderr; a backend that
    reaps nothing of its own (SSH: ``down --inventory``) reaps the default backend's."""
    backend = backend_of(args.backend or DEFAULT)
    if not backend.reaps:
        backend = BACKENDS[DEFAULT]
    return backend.reap(args.tag, args.yes_kill_live, busy())


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
