"""``python -m harness hosts up|down``: local SSH test hosts (:mod:`.hosts`).

::

    python -m harness hosts up --count 3 --dir D     # prints the inventory (D/inventory.toml)
    python -m harness hosts down --dir D             # stops the sshds, removes the namespaces

Exit status: 0 done, 2 failed (one line on stderr says why; nothing is left behind).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.cluster.base import ClusterError
from harness.cluster.ssh.hosts import hosts_down, hosts_up
from harness.errors import EXIT_HARNESS, EXIT_OK


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--count must be a whole number, got {text!r}") from None
    if not 1 <= value <= 9:
        raise argparse.ArgumentTypeError(f"--count must be 1 to 9, got {value}")
    return value


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "hosts",
        help="local SSH test hosts (network namespaces running sshd) for --backend ssh",
        description="Start or remove local SSH test hosts (root; needs openssh-server).",
    )
    sub = parser.add_subparsers(dest="hosts_command", metavar="{up,down}", required=True)
    up = sub.add_parser("up", help="start test hosts and print their inventory (TOML)")
    up.add_argument("--count", type=_count, default=3, help="number of hosts (default 3)")
    up.add_argument("--dir", type=Path, required=True, help="folder for keys, configs, data")
    up.set_defaults(handler=_up)
    down = sub.add_parser("down", help="stop the test hosts in --dir and remove them")
    down.add_argument("--dir", type=Path, required=True)
    down.set_defaults(handler=_down)
    return parser


def _up(args: argparse.Namespace) -> int:
    try:
        text = hosts_up(args.count, args.dir)
    except (ClusterError, OSError) as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return EXIT_HARNESS
    sys.stdout.write(text)
    print(f"(written to {args.dir.resolve() / 'inventory.toml'})", file=sys.stderr)
    return EXIT_OK


def _down(args: argparse.Namespace) -> int:
    try:
        removed = hosts_down(args.dir)
    except (ClusterError, OSError) as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return EXIT_HARNESS
    sys.stdout.write(json.dumps({"dir": str(args.dir.resolve()), "removed": removed}) + "\n")
    return EXIT_OK
