"""The node image's entrypoint, with the official rqlite image's interface.

Arguments that start with ``-`` (or none, or a first ``rqlited``) are flags for the node:
the address flags missing among them are filled in (``-http-addr 0.0.0.0:4001``,
``-http-adv-addr HOSTNAME:4001``, ``-raft-addr 0.0.0.0:4002``, ``-raft-adv-addr
HOSTNAME:4002``; ``-node-id`` from ``$NODE_ID`` when set) and the data directory
``/rqlite/file/data`` (``$DATA_DIR``) is appended, then the node replaces this process:
``/usr/local/bin/rqlited`` when the image has one, else ``python -m harness.node``. Any
other command runs as given. An empty ``RQUEUE_CLUSTER_SECRET`` (compose's for an unset
one) is removed, so the node says it needs a secret rather than that it is empty.
Copied into the image as a script (standard library only).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping, Sequence

RQLITED = "/usr/local/bin/rqlited"
PYTHON = "/usr/local/bin/python3"
DATA_DIR = "/rqlite/file/data"
HTTP_PORT, RAFT_PORT = 4001, 4002
SECRET_ENV = "RQUEUE_CLUSTER_SECRET"


def _given(args: Sequence[str]) -> set[str]:
    return {a.lstrip("-").split("=", 1)[0] for a in args if a.startswith("-")}


def command(
    args: Sequence[str], hostname: str, env: Mapping[str, str], has_rqlited: bool
) -> list[str]:
    """The program and arguments to run for the container's ``args``."""
    args = list(args)
    if args and args[0] in ("rqlite", "rqlited"):
        args = args[1:]
    elif args and not args[0].startswith("-"):
        return args
    given = _given(args)
    defaults = {
        "http-addr": f"0.0.0.0:{HTTP_PORT}",
        "http-adv-addr": f"{hostname}:{HTTP_PORT}",
        "raft-addr": f"0.0.0.0:{RAFT_PORT}",
        "raft-adv-addr": f"{hostname}:{RAFT_PORT}",
    }
    if env.get("NODE_ID"):
        defaults = {"node-id": env["NODE_ID"], **defaults}
    filled = [
        x for flag, value in defaults.items() if flag not in given for x in (f"-{flag}", value)
    ]
    program = [RQLITED] if has_rqlited else [PYTHON, "-m", "harness.node"]
    return [*program, *filled, *args, env.get("DATA_DIR") or DATA_DIR]


def main() -> None:
    argv = command(sys.argv[1:], socket.gethostname(), os.environ, os.path.exists(RQLITED))
    if not os.environ.get(SECRET_ENV, "").strip():
        # compose passes an unset secret as an empty one: the node then says it needs one
        os.environ.pop(SECRET_ENV, None)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"docker-entrypoint: cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
        sys.exit(127)


if __name__ == "__main__":
    main()
