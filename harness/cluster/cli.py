"""``python -m harness cluster up|status|down``: clusters that outlive the command.

::

    python -m harness cluster up --nodes 3 --dir /tmp/c [--engine embedded|rqlited]
                                 [--rqlited PATH] [--netns] [--timeout S]
    python -m harness cluster status --dir /tmp/c
    python -m harness cluster down --dir /tmp/c        # stop these nodes, keep their files
    python -m harness cluster down --all [--tag TAG]   # reap every leftover cluster here

``up`` and ``status`` print exactly one JSON object on stdout,
``{"dir": DIR, "leader": URL, "nodes": [{"id", "url", "pid", ...}], ...}``; ``down`` prints
one too. Diagnostics go to stderr. Exit status: 0 done, 1 ``status`` found no leader,
2 the command failed (the message says why), 130 ``up`` interrupted (Ctrl-C; what it had
started is stopped). ``--backend docker`` drives the Docker
backend instead (a directory holding a Docker cluster's state is recognised by itself).
``down --all`` takes every cluster started by this project on the machine, other users'
too; ``--tag`` limits it to nodes started with ``RQUEUE_REAP_TAG=TAG``.

Until ``python -m harness`` wires it, ``python -m harness.cluster.cli ...`` works the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.cluster.base import Cluster, ClusterError
from harness.cluster.factory import BACKENDS, make_cluster
from harness.cluster.local import ENGINES, STATE_FILE, LocalCluster, reap

DOCKER_STATE_FILE = "docker-cluster.json"
EXAMPLES = """examples:
  python -m harness cluster up --nodes 3 --dir /tmp/c      # prints {"dir", "leader", "nodes"}
  python -m harness cluster up --nodes 5 --dir /tmp/p --netns   # root: partitions possible
  python -m harness cluster status --dir /tmp/c
  python -m harness cluster down --dir /tmp/c              # stops the nodes, keeps the files
  python -m harness cluster down --all                     # reaps every leftover cluster here
"""


def _node_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--nodes must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--nodes must be at least 1, got {value}")
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


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``cluster`` command with ``up``, ``status`` and ``down`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "cluster",
        help="start, inspect and stop clusters",
        description="Start clusters that outlive the command, inspect them, stop them.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="cluster_command", metavar="{up,status,down}")
    sub.required = True

    up = sub.add_parser("up", help="start a cluster and print it as JSON")
    up.add_argument("--nodes", type=_node_count, default=3, help="number of nodes (default 3)")
    up.add_argument("--dir", type=Path, required=True, help="directory for state, data, logs")
    add_engine_arguments(up)
    up.add_argument("--netns", action="store_true", help="one network namespace per node (root)")
    up.add_argument("--backend", choices=BACKENDS, default="local")
    add_image_argument(up)
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a leader")
    up.set_defaults(handler=cmd_up)

    status = sub.add_parser("status", help="print a running cluster as JSON")
    status.add_argument("--dir", type=Path, required=True)
    status.add_argument("--backend", choices=BACKENDS, default=None)
    status.set_defaults(handler=cmd_status)

    down = sub.add_parser("down", help="stop a cluster, or reap all leftovers")
    which = down.add_mutually_exclusive_group(required=True)
    which.add_argument("--dir", type=Path, help="the cluster's directory (files are kept)")
    which.add_argument("--all", action="store_true", help="reap every leftover cluster")
    down.add_argument("--backend", choices=BACKENDS, default=None)
    down.add_argument("--tag", help="with --all: only nodes started with RQUEUE_REAP_TAG=TAG")
    down.set_defaults(handler=cmd_down)
    return parser


def _print(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _fail(exc: Exception) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 2


def _backend_of(directory: Path, backend: str | None) -> str:
    if backend:
        return backend
    if not (directory / STATE_FILE).exists() and (directory / DOCKER_STATE_FILE).exists():
        return "docker"
    return "local"


def _attach(directory: Path, backend: str | None) -> Cluster:
    if _backend_of(directory, backend) == "docker":
        from harness.cluster.docker_backend import attach_docker_cluster

        return attach_docker_cluster(directory)
    return LocalCluster.attach(directory)


def _describe(cluster: Cluster, directory: Path) -> dict:
    info = cluster.describe()
    info.setdefault("dir", str(directory.resolve()))
    return info


def cmd_up(args: argparse.Namespace) -> int:
    try:
        cluster = make_cluster(
            backend=args.backend,
            engine=args.engine,
            nodes=args.nodes,
            directory=args.dir,
            rqlited=args.rqlited,
            netns=args.netns,
            timeout=args.timeout,
            image=args.image,
        )
        _print(_describe(cluster, args.dir))
    except (ClusterError, OSError) as exc:
        return _fail(exc)
    except KeyboardInterrupt:
        print("interrupted: stopped every node and network started so far", file=sys.stderr)
        return 130
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    try:
        info = _describe(_attach(args.dir, args.backend), args.dir)
    except (ClusterError, OSError) as exc:
        return _fail(exc)
    _print(info)
    return 0 if info.get("leader") else 1


def cmd_down(args: argparse.Namespace) -> int:
    try:
        if args.all:
            if (args.backend or "local") == "docker":
                from harness.cluster.docker_backend import reap_docker

                _print({"reaped": {"docker": reap_docker()}})
            else:
                _print({"reaped": reap(args.tag)})
            return 0
        _attach(args.dir, args.backend).stop()
        _print({"dir": str(args.dir.resolve()), "stopped": True})
    except (ClusterError, OSError, ImportError) as exc:
        return _fail(exc)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: ``python -m harness.cluster.cli up|status|down ...``."""
    parser = argparse.ArgumentParser(prog="python -m harness.cluster.cli")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["cluster", *(sys.argv[1:] if argv is None else argv)])
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
