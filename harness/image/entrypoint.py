"""The node image's entrypoint and its ``rqlited`` command, as the official image has them.

Read against rqlite v10.2.7's ``docker-entrypoint.sh`` (what it does, not its text):

- The container's command ``run`` (the image's default) or flags starting with ``-``
  run the node with the address flags missing among them filled in from the
  environment: ``-node-id $NODE_ID`` (default: the host name), ``-http-addr $HTTP_ADDR``
  (``0.0.0.0:4001``), ``-http-adv-addr $HTTP_ADV_ADDR`` (the full host name, ``:4001``),
  ``-raft-addr $RAFT_ADDR`` (``0.0.0.0:4002``), ``-raft-adv-addr $RAFT_ADV_ADDR`` (the
  full host name, ``:4002``), and ``-fk`` when ``ENABLE_FK`` is set; then the data
  directory ``$DATA_DIR`` (``/rqlite/file/data``) last. ``SQLITE_EXTENSIONS`` names
  extensions the image must hold (this one holds none), ``CUSTOM_SQLITE_EXTENSIONS_PATH``
  becomes ``-extensions-path``. ``START_DELAY`` (seconds; 5 by default under
  Kubernetes) waits before the start.
- Any other command, ``rqlited ...`` included, runs exactly as given.
- The node is ``/usr/local/bin/rqlited``: a user's rqlited binary (``image build
  --rqlited``) or, in the project's image, this same script under that name, which runs
  the embedded node with the arguments as given (the node checks them as rqlited does).

An empty ``RQUEUE_CLUSTER_SECRET`` (compose's for an unset one) is removed, so the node
says it needs a secret rather than that it is empty. Copied into the image as a script
(the standard library and :mod:`harness.errors`, on the image's ``PYTHONPATH``).
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from collections.abc import Mapping, Sequence

from harness.errors import HarnessError

RQLITED = "/usr/local/bin/rqlited"
PYTHON = "/usr/local/bin/python3"
DATA_DIR = "/rqlite/file/data"
EXTENSIONS_DIR = "/opt/extensions"
HTTP_PORT, RAFT_PORT = 4001, 4002
SECRET_ENV = "RQUEUE_CLUSTER_SECRET"
#: exit status of a refused start: rqlited's for a bad configuration (log.Fatalf)
EXIT_REFUSED = 1


class Refused(HarnessError):
    """The container cannot start as configured; the message says why in one line."""


def _given(args: Sequence[str]) -> set[str]:
    return {a.lstrip("-").split("=", 1)[0] for a in args if a.startswith("-")}


def _extensions_flag(args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``-extensions-path=...`` from ``SQLITE_EXTENSIONS`` (zips under /opt/extensions)
    and ``CUSTOM_SQLITE_EXTENSIONS_PATH``, refused beside an explicit flag."""
    paths = []
    for var in ("SQLITE_EXTENSIONS", "CUSTOM_SQLITE_EXTENSIONS_PATH"):
        if env.get(var) and "extensions-path" in _given(args):
            raise Refused(f"{var} and -extensions-path are both given: use one of them")
    for name in filter(None, (env.get("SQLITE_EXTENSIONS") or "").split(",")):
        path = f"{EXTENSIONS_DIR}/{name}.zip"
        if not os.path.exists(path):
            raise Refused(f"SQLite extension {name} is not in this image ({path})")
        paths.append(path)
    if env.get("CUSTOM_SQLITE_EXTENSIONS_PATH"):
        paths.append(env["CUSTOM_SQLITE_EXTENSIONS_PATH"])
    return [f"-extensions-path={','.join(paths)}"] if paths else []


def command(args: Sequence[str], hostname: str, fqdn: str, env: Mapping[str, str]) -> list[str]:
    """The program and arguments to run for the container's ``args``."""
    args = list(args)
    if args and args[0] == "run":
        args = args[1:]
    elif args and not args[0].startswith("-"):
        return args  # any other command, rqlited's included, as given
    given = _given(args)
    defaults = {
        "node-id": env.get("NODE_ID") or hostname,
        "http-addr": env.get("HTTP_ADDR") or f"0.0.0.0:{HTTP_PORT}",
        "http-adv-addr": env.get("HTTP_ADV_ADDR") or f"{fqdn}:{HTTP_PORT}",
        "raft-addr": env.get("RAFT_ADDR") or f"0.0.0.0:{RAFT_PORT}",
        "raft-adv-addr": env.get("RAFT_ADV_ADDR") or f"{fqdn}:{RAFT_PORT}",
    }
    filled = [
        x for flag, value in defaults.items() if flag not in given for x in (f"-{flag}", value)
    ]
    filled += _extensions_flag(args, env)
    if env.get("ENABLE_FK"):
        filled.append("-fk")
    return [RQLITED, *filled, *args, env.get("DATA_DIR") or DATA_DIR]


def start_delay(env: Mapping[str, str]) -> float:
    """Seconds to wait before the start: ``START_DELAY`` (``5``, ``0.5``, ``2s``, ``1m``),
    else 5 under Kubernetes (its DNS records need a moment), else none."""
    text = (env.get("START_DELAY") or "").strip()
    if not text:
        return 5.0 if env.get("KUBERNETES_SERVICE_HOST") else 0.0
    m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)([smhd]?)", text)
    if not m:
        raise Refused(f"START_DELAY must be seconds (such as 5, 0.5, 2s or 1m), got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def _exec(argv: list[str]) -> None:
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"docker-entrypoint: cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
        sys.exit(127)


def main() -> None:
    if not os.environ.get(SECRET_ENV, "").strip():
        # compose passes an unset secret as an empty one: the node then says it needs one
        os.environ.pop(SECRET_ENV, None)
    try:
        if os.path.basename(sys.argv[0]) == "rqlited":  # the project's image: its node
            _exec([PYTHON, "-m", "harness.node", *sys.argv[1:]])
        argv = command(sys.argv[1:], socket.gethostname(), socket.getfqdn(), os.environ)
        delay = start_delay(os.environ)
    except Refused as exc:
        print(f"{os.path.basename(sys.argv[0])}: {exc}", file=sys.stderr)
        sys.exit(EXIT_REFUSED)
    if delay:
        time.sleep(delay)  # the official image's START_DELAY: a wait asked for, not a race
    _exec(argv)


if __name__ == "__main__":
    main()
