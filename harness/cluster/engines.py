"""The engines a local cluster can run, as command lines: our embedded node and rqlited.

- ``"embedded"`` (default): our node, ``python -m harness.node`` (see docs/embedded-node.md).
- ``"rqlited"``: a real rqlite binary (``rqlited=PATH``, default the one on ``PATH``). Its
  flags depend on its version, read by running ``rqlited -version`` (never from the file's
  name): v8 and later take ``-bootstrap-expect N -join raft1,raft2,...``; v6/v7 start the
  first node alone and join the others over HTTP (``-join http://first``). Settings given
  as ``rqlited_settings`` (named as v10 names them) become the flags that version has:
  ``raft-heartbeat-timeout`` is ``-raft-timeout`` before v10, ``on-disk-path`` does not
  exist in v10. A version outside v6 to v10 is refused in one line, before any node starts.

A node's wall clock is skewed through a file: the embedded node reads an offset from its
``--clock-offset-file``; an rqlited node runs with libfaketime preloaded
(:func:`faketime_env`), which reads it in its own format (:func:`faketime_offset`).
The command lines (:func:`embedded_argv`, :func:`rqlited_argv`) are built by pure
functions; :func:`rqlited_version` runs the binary to learn its version.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.cluster.base import ClusterError

ENGINES = ("embedded", "rqlited")
#: where Debian's libfaketime package puts the library
FAKETIME_GLOBS = (
    "/usr/lib/*/faketime/libfaketimeMT.so.1",  # the variant for multi-threaded programs
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/lib/*/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
)


# -- node description ----------------------------------------------------------------------
@dataclass
class NodeSpec:
    """Everything needed to (re)start one node; persisted in ``cluster.json``."""

    id: str
    host: str
    http_port: int
    raft_port: int
    dir: str
    pid: int | None = None
    state: str = "new"  # new | running | paused | killed | stopped | removed
    #: the node's ``TZ``: ``"UTC"`` (default), the path of its zone file, or None (the
    #: caller's own ``TZ``, or none: then ``/etc/localtime``)
    tz: str | None = "UTC"
    #: members' HTTP addresses (comma-separated) a node added to the running cluster joins
    #: through (harness.cluster.membership); "" for a member from the start
    join: str = ""

    @property
    def http_addr(self) -> str:
        return f"{self.host}:{self.http_port}"

    @property
    def raft_addr(self) -> str:
        return f"{self.host}:{self.raft_port}"

    @property
    def url(self) -> str:
        return f"http://{self.http_addr}"

    @property
    def data_dir(self) -> Path:
        return Path(self.dir) / "data"

    @property
    def log_file(self) -> Path:
        return Path(self.dir) / "node.log"

    @property
    def clock_file(self) -> Path:
        return Path(self.dir) / "clock-offset"

    @property
    def zone_file(self) -> Path:
        """The node's own time zone file (``set_time_zone``), rewritten in place."""
        return Path(self.dir) / "zone.tzif"


# -- argv building (pure) ------------------------------------------------------------------
def embedded_argv(
    node: NodeSpec,
    peers: Sequence[NodeSpec],
    python: str = sys.executable,
    module: str = "harness.node",
) -> list[str]:
    """The command line of our embedded node (contract: docs/embedded-node.md)."""
    argv = [python, "-m", module, "--node-id", node.id]
    argv += ["--http-addr", node.http_addr, "--raft-addr", node.raft_addr]
    for p in peers:
        if p.id != node.id and not p.join and not node.join:  # the members from the start
            argv += ["--peer", f"{p.id},{p.raft_addr},{p.http_addr}"]
    for addr in filter(None, node.join.split(",")):
        argv += ["--join", addr]
    argv += ["--data-dir", str(node.data_dir), "--clock-offset-file", str(node.clock_file)]
    return argv


#: rqlited prints ``rqlited VERSION GOOS GOARCH GOVERSION [sqliteX] (commit ..., branch ...,
#: compiler ...)`` for ``-version`` (v6/v7 on stdout, v8 and later on stderr)
_VERSION_LINE = re.compile(r"^rqlited\s+v?(\d+)\.(\d+)\.(\d+)\b", re.MULTILINE)
#: the rqlite major versions whose command lines the harness knows
RQLITED_MAJORS = range(6, 11)
#: settings the harness can give rqlited (named as v10 names the flags) -> the flag each
#: major version has for it (None: that version has none; v6/v7 need -on-disk with it)
RQLITED_SETTINGS: dict[str, dict[int, str | None]] = {
    "raft-heartbeat-timeout": {
        6: "-raft-timeout", 7: "-raft-timeout", 8: "-raft-timeout", 9: "-raft-timeout",
        10: "-raft-heartbeat-timeout",
    },
    "raft-election-timeout": dict.fromkeys(RQLITED_MAJORS, "-raft-election-timeout"),
    "on-disk-path": {
        6: "-on-disk-path", 7: "-on-disk-path", 8: "-on-disk-path", 9: "-on-disk-path",
        10: None,
    },
}  # fmt: skip


def parse_rqlited_version(text: str) -> tuple[int, int, int]:
    """``rqlited -version`` output (``rqlited v10.2.7 linux amd64 go1.24.4 sqlite3.50.1
    (commit ..., branch ..., compiler gc)``) → (10, 2, 7). Only a line rqlited itself
    printed counts: a version in a path or an error message is not read."""
    m = _VERSION_LINE.search(text)
    if not m:
        raise ClusterError(f"cannot read a version from `rqlited -version` output: {text!r}")
    return int(m[1]), int(m[2]), int(m[3])


def check_rqlited_version(version: tuple[int, int, int]) -> None:
    """One clear line for a version whose command line the harness does not know."""
    shown = ".".join(map(str, version))
    if version[0] < RQLITED_MAJORS.start:
        raise ClusterError(f"rqlited {shown} is too old; need v6 or later")
    if version[0] not in RQLITED_MAJORS:
        raise ClusterError(
            f"rqlited {shown} is newer than the versions this harness knows the flags of "
            f"(v{RQLITED_MAJORS.start} to v{RQLITED_MAJORS.stop - 1}); use one of those, "
            "or the embedded engine"
        )


def rqlited_setting_flags(version: tuple[int, int, int], settings: dict[str, str]) -> list[str]:
    """``settings`` (v10 names -> values) as the flags this version has; a clear error for
    a setting it lacks or the harness does not know."""
    major, argv = version[0], []
    for name, value in settings.items():
        if name not in RQLITED_SETTINGS:
            raise ClusterError(
                f"unknown rqlited setting {name!r}; known: {', '.join(RQLITED_SETTINGS)}"
            )
        flag = RQLITED_SETTINGS[name][major]
        if flag is None:
            raise ClusterError(f"rqlited {'.'.join(map(str, version))} has no setting {name!r}")
        if name == "on-disk-path" and major < 8:
            argv.append("-on-disk")  # before v8 the path needs the on-disk mode
        argv += [flag, value]
    return argv


def rqlited_argv(
    binary: str,
    version: tuple[int, int, int],
    node: NodeSpec,
    nodes: Sequence[NodeSpec],
    settings: dict[str, str] | None = None,
) -> list[str]:
    """The command line for one ``rqlited`` node of a static cluster of ``nodes``.

    v8+: every node gets ``-bootstrap-expect N -join`` with all Raft addresses (a node
    restarted with existing state just rejoins). v6/v7: the first node starts alone, the
    others ``-join`` the first node's HTTP URL (ignored when they already have state).
    A node added to the running cluster (``node.join``: the HTTP addresses of the members
    it joins through, among ``nodes``) gets ``-join`` with their Raft addresses (v8+) or
    HTTP URLs (v6/v7) and no ``-bootstrap-expect``: it joins, it does not bootstrap.
    ``settings``: see :data:`RQLITED_SETTINGS`.
    """
    check_rqlited_version(version)
    major = version[0]
    argv = [binary, "-node-id", node.id, "-http-addr", node.http_addr]
    argv += ["-raft-addr", node.raft_addr]
    if node.join:
        through = set(node.join.split(","))
        via = [n for n in nodes if n.http_addr in through and n.id != node.id]
        if not via:
            raise ClusterError(f"node {node.id} joins through {node.join}, none of the nodes")
        joins = [n.raft_addr if major >= 8 else n.url for n in via]
        argv += ["-join", ",".join(joins)]
        nodes = []
    nodes = [n for n in nodes if not n.join or n.id == node.id]  # the members from the start
    if len(nodes) > 1:
        if major >= 8:
            argv += ["-bootstrap-expect", str(len(nodes))]
            argv += ["-join", ",".join(n.raft_addr for n in nodes)]
        elif node.id != nodes[0].id:
            argv += ["-join", nodes[0].url]
    argv += rqlited_setting_flags(version, settings or {})
    argv.append(str(node.data_dir))
    return argv


def faketime_env(clock_file: Path, library: str) -> dict[str, str]:
    """Environment that makes libfaketime read the wall-clock offset from ``clock_file``."""
    return {
        "LD_PRELOAD": library,
        "FAKETIME_TIMESTAMP_FILE": str(clock_file),
        "FAKETIME_NO_CACHE": "1",  # re-read the file on every clock reading
        # monotonic clocks are shifted too: FAKETIME_DONT_FAKE_MONOTONIC=1 makes
        # clock_nanosleep(TIMER_ABSTIME) fail with EINVAL; Go's runtime timers bypass libc
    }


def faketime_offset(seconds: float) -> str:
    """An offset in libfaketime's relative format, e.g. ``+2.500000`` or ``-30.000000``."""
    return f"{seconds:+.6f}"


def find_faketime() -> str | None:
    """The libfaketime shared library, if installed."""
    import glob

    for pattern in FAKETIME_GLOBS:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[0]
    return None


def is_dynamic_executable(path: str) -> bool:
    """Whether LD_PRELOAD can reach the program: not a statically linked ELF file.

    Scripts count as dynamic (their interpreter is); an ELF file must name a loader.
    """
    with open(path, "rb") as f:
        head = f.read(8192)
    if not head.startswith(b"\x7fELF"):
        return True
    return b"ld-linux" in head or b"ld-musl" in head


def rqlited_version(binary: str) -> tuple[int, int, int]:
    """Run ``rqlited -version`` and parse what it printed (whatever the file is called)."""
    try:
        out = subprocess.run([binary, "-version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ClusterError(f"cannot run {binary} -version: {exc}") from exc
    if out.returncode != 0:
        first = (out.stderr or out.stdout).strip().splitlines()[:1]
        raise ClusterError(
            f"`{binary} -version` failed (exit {out.returncode}): {first[0] if first else ''}"
        )
    return parse_rqlited_version(out.stdout + "\n" + out.stderr)


def resolve_rqlited(path: str | os.PathLike | None) -> str:
    """The rqlited binary to run: ``path`` or the one on PATH; a clear error if missing."""
    if path is None:
        found = shutil.which("rqlited")
        if not found:
            raise ClusterError(
                "engine 'rqlited' needs the rqlited binary: none on PATH; install rqlite "
                "(https://rqlite.io) or pass --rqlited PATH"
            )
        return found
    p = Path(path)
    if not p.is_file() or not os.access(p, os.X_OK):
        raise ClusterError(f"rqlited binary {str(p)!r} does not exist or is not executable")
    return str(p.resolve())
