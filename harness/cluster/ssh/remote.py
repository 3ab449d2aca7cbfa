"""What the SSH backend runs on a host, as shell text (pure), and the project's node as
a zipapp to ship there.

Everything a run puts on a host is in one folder, ``<data_dir>/rqueue-ssh-<run>``
(:func:`run_dir`): the node's ``data/``, ``node.log``, ``pid``, ``clock-offset``, the
shipped ``node.pyz`` and the cluster secret. The node runs with ``RQUEUE_SSH_RUN=<run>``
in its environment (:data:`TAG_ENV`); a pid is signalled only after its
``/proc/PID/environ`` shows that tag, so a reused pid is never hit. Firewall rules carry
the comment ``rqueue-ssh:<run>`` (:data:`COMMENT_PREFIX`) and are deleted by it.
"""

from __future__ import annotations

import io
import shlex
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from harness.cluster.partition import blocked_peers, one_way_drops

RUN_PREFIX = "rqueue-ssh-"
TAG_ENV = "RQUEUE_SSH_RUN"
COMMENT_PREFIX = "rqueue-ssh:"
#: how long (in tenths of a second) a host waits for a killed node to be gone
GONE_TENTHS = 100


def run_dir(data_dir: str, run: str) -> str:
    return f"{data_dir.rstrip('/')}/{RUN_PREFIX}{run}"


def launch(directory: str, argv: Sequence[str], env: Mapping[str, str], banner: str) -> str:
    """Start ``argv`` detached (its own session, output to ``node.log``), write its pid to
    ``pid`` and print it. ``setsid`` in a shell without job control execs in place, so the
    pid printed is the node's own."""
    d = shlex.quote(directory)
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (
        f"mkdir -p {d}/data && cd {d} || exit 1; "
        f"printf '%s\\n' {shlex.quote(banner)} >> node.log; "
        f"{assigns} setsid nohup {shlex.join(argv)} >> node.log 2>&1 < /dev/null & "
        "echo $! > pid; cat pid"
    )


def is_ours(pid: int, run: str) -> str:
    """A shell test: ``pid`` is alive and carries this run's tag."""
    return f"tr '\\0' '\\n' < /proc/{pid}/environ 2>/dev/null | grep -qx {TAG_ENV}={run}"


def signal_node(pid: int, run: str, sig: str, wait_gone: bool = False) -> str:
    """Send ``sig`` to ``pid`` if it is this run's node; with ``wait_gone`` wait (bounded)
    until it is gone or a zombie. Prints ``sent`` or ``not ours``."""
    text = f"if {is_ours(pid, run)}; then kill -{sig} {pid} && echo sent; else echo 'not ours'; fi"
    if wait_gone:
        text += (
            f"; i=0; while [ -e /proc/{pid} ] && [ \"$(sed 's/.*) //' /proc/{pid}/stat "
            f'2>/dev/null | cut -c1)" != Z ] && [ $i -lt {GONE_TENTHS} ]; do sleep 0.1; '
            "i=$((i+1)); done"
        )
    return text


def _running(pid: int) -> str:
    state = f"$(sed 's/.*) //' /proc/{pid}/stat 2>/dev/null | cut -c1)"
    return f'[ -e /proc/{pid} ] && [ "{state}" != Z ]'


def terminate(pid: int, run: str, grace_tenths: int = 50) -> str:
    """SIGTERM (and SIGCONT: a paused node must run to exit) this run's node ``pid``;
    SIGKILL it if it is still running after the grace; wait until it is gone."""
    wait = f"i=0; while {_running(pid)} && [ $i -lt {{n}} ]; do sleep 0.1; i=$((i+1)); done"
    return (
        f"if {is_ours(pid, run)}; then kill -TERM {pid}; kill -CONT {pid}; "
        f"{wait.format(n=grace_tenths)}; if {_running(pid)}; then kill -KILL {pid}; "
        f"{wait.format(n=GONE_TENTHS)}; fi; fi; true"
    )


def alive(pid: int, run: str) -> str:
    """Prints ``yes`` when ``pid`` is this run's node and not a zombie, else ``no``."""
    return (
        f"if {is_ours(pid, run)} && [ \"$(sed 's/.*) //' /proc/{pid}/stat | cut -c1)\" != Z ];"
        " then echo yes; else echo no; fi"
    )


def write_file(path: str, text: str) -> str:
    """Replace ``path`` atomically with ``text``."""
    p = shlex.quote(path)
    return f"printf '%s' {shlex.quote(text)} > {p}.tmp && mv -f {p}.tmp {p}"


def partition_rules(
    components: Iterable[Iterable[str]],
    addresses: Mapping[str, str],
    ports: Iterable[int],
    run: str,
) -> dict[str, list[str]]:
    """Per host, the iptables rules (as ``iptables-save`` writes them) that cut it from
    the peers it may not reach; :func:`insert_rules` adds them in one command.

    Only TCP between the node addresses on the node ports (either end) is dropped, so the
    harness's SSH sessions and its HTTP requests from the control host pass: the rules
    name peers' addresses and node ports, never the control host or port 22.
    """
    both = (("INPUT", "-s"), ("OUTPUT", "-d"))
    return _drops(blocked_peers(components, addresses), both, addresses, ports, run)


def one_way_rules(
    cuts: Iterable[Iterable[str]],
    addresses: Mapping[str, str],
    ports: Iterable[int],
    run: str,
) -> dict[str, list[str]]:
    """Per sending host, the rules that drop what it sends to each peer it is cut from
    (``(a, b)`` in ``cuts``: ``a``'s packets to ``b``), at its ``OUTPUT`` only, so that
    ``b``'s packets to ``a`` pass; node ports only, as :func:`partition_rules`. Inserted
    first in ``OUTPUT``, before any rule that accepts by connection state, so a reply on a
    connection ``b`` opened is dropped too."""
    drops = one_way_drops(cuts, addresses)
    return _drops(drops, (("OUTPUT", "-d"),), addresses, ports, run)


def _drops(
    blocked: Mapping[str, list[str]],
    sides: Iterable[tuple[str, str]],
    addresses: Mapping[str, str],
    ports: Iterable[int],
    run: str,
) -> dict[str, list[str]]:
    """Per host with peers in ``blocked``, a DROP rule per peer and ``(chain, flag)``."""
    plist = ",".join(str(p) for p in sorted(set(ports)))
    tag = f"{COMMENT_PREFIX}{run}"
    out: dict[str, list[str]] = {}
    for node, peers in blocked.items():
        cmds = [
            f"-I {chain} 1 {side} {addresses[peer]} -p tcp -m multiport "
            f"--ports {plist} -m comment --comment {tag} -j DROP"
            for peer in peers
            for chain, side in sides
        ]
        if cmds:
            out[node] = cmds
    return out


def insert_rules(rules: Iterable[str]) -> str:
    """Add ``rules`` (from :func:`partition_rules`) to the filter table at once: one
    ``iptables-restore --noflush`` (which keeps every other rule) instead of one
    ``iptables`` per rule."""
    text = "\n".join(["*filter", *rules, "COMMIT"]) + "\n"
    return f"printf '%s' {shlex.quote(text)} | iptables-restore --noflush"


def delete_rules(comment: str, iptables: str = "iptables") -> str:
    """Delete every rule whose comment starts with ``comment``; prints each. (``-S`` shows
    a comment in quotes; ours have no blanks, so without them each rule reads back as is.)"""
    pattern = shlex.quote(f"--comment {comment}")
    return (
        f"{iptables} -w 5 -S | tr -d '\"' | grep -F -- {pattern} | while read -r verb rule; do "
        f'[ "$verb" = -A ] && {iptables} -w 5 -D $rule && echo "-D $rule"; done; true'
    )


def sweep(data_dir: str) -> str:
    """Kill every node a run of the harness left in ``data_dir`` (by its recorded pid,
    checked against its tag) and remove those runs' folders; then kill any node of a run
    whose folder is gone (a launch that outlived its run's stop): a process whose
    environment carries a run's tag and whose command line runs that run's folder in
    ``data_dir``. Prints what it removed."""
    d = data_dir.rstrip("/")
    q = shlex.quote(d)
    return (
        f'for r in {q}/{RUN_PREFIX}*; do [ -d "$r" ] || continue; '
        f'run=${{r##*/{RUN_PREFIX}}}; p=$(cat "$r/pid" 2>/dev/null); '
        "if [ -n \"$p\" ] && tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null "
        f'| grep -qx "{TAG_ENV}=$run"; then kill -KILL "$p" && echo "killed $p"; fi; '
        'rm -rf -- "$r" && echo "removed $r"; done; '
        "for e in /proc/[0-9]*/environ; do p=${e#/proc/}; p=${p%/environ}; "
        "run=$(tr '\\0' '\\n' < \"$e\" 2>/dev/null "
        f"| sed -n 's/^{TAG_ENV}=//p'); "
        '[ -n "$run" ] || continue; '
        "tr '\\0' '\\n' < /proc/$p/cmdline 2>/dev/null "
        f'| grep -qF -- {shlex.quote(d + "/" + RUN_PREFIX)}"$run/" '
        '&& kill -KILL "$p" 2>/dev/null && echo "killed $p (its run folder gone)"; done; true'
    )


# -- the project's node as a zipapp --------------------------------------------------------
_MAIN = b'import runpy\nrunpy.run_module("harness.node", run_name="__main__", alter_sys=True)\n'


def node_zipapp() -> bytes:
    """The project's node and what it imports (its own package and PySyncObj), as a
    zipapp a host runs with ``python3 node.pyz ARGS`` (the same ARGS as ``python -m
    harness.node``)."""
    import pysyncobj

    import harness

    root = Path(harness.__file__).resolve().parent
    sources = [(root / "__init__.py", "harness/__init__.py")]
    sources += [
        (p, f"harness/{p.relative_to(root)}") for p in sorted((root / "node").rglob("*.py"))
    ]
    sync = Path(pysyncobj.__file__).resolve().parent
    sources += [(p, f"pysyncobj/{p.relative_to(sync)}") for p in sorted(sync.rglob("*.py"))]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("__main__.py", _MAIN)
        for path, name in sources:
            z.writestr(name, path.read_bytes())
    return b"#!/usr/bin/env python3\n" + buf.getvalue()
