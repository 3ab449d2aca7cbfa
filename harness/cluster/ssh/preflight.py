"""What the SSH backend checks on every host before it starts anything (bad input as one
line each): reachable, key accepted (:mod:`.session`), sudo that works without a password
when the inventory asks for it, a data folder the user can write, the node to run (the
project's: Python 3.11+; a user's rqlited: executable, a version whose flags the harness
knows), the node ports free, and what the host offers for faults (iptables as root,
libfaketime for an rqlited's clock). One round trip per host: :func:`probe_script` runs
every check and prints what it found, :func:`read_probe` turns that into
:class:`HostFacts` or the first problem."""

from __future__ import annotations

import ipaddress
import shlex
from collections.abc import Sequence

from harness.cluster.base import ClusterError
from harness.cluster.engines import FAKETIME_GLOBS, check_rqlited_version, parse_rqlited_version
from harness.cluster.ssh import links
from harness.cluster.ssh.disk import probe_lines, probe_problem
from harness.cluster.ssh.inventory import Host
from harness.cluster.ssh.nodes import HostFacts
from harness.cluster.ssh.session import Session, SshError

#: what the project's node imports beyond the standard library and what the harness ships
#: with it in its zipapp (``harness.node`` and PySyncObj): the host's Python must have
#: these (the local test hosts run the harness's own Python, which has them)
NODE_MODULES = ("apsw",)


def probe_script(h: Host, secret: bool = False) -> str:
    """The shell script that checks host ``h``: it stops at the first problem with
    ``FAIL <what> <detail>``, else prints ``KEY value`` lines and the listening sockets.
    ``secret``: the project's node will authenticate Raft with a cluster secret, which
    needs the ``cryptography`` package (PySyncObj's encryption) on the host."""
    d, py = shlex.quote(h.data_dir), shlex.quote(h.python)
    sudo = "sudo -n " if h.sudo else ""
    lines = ['fail() { echo "FAIL $1 $2"; exit 0; }', "last() { tail -n 1 | tr -d '\\n'; }"]
    if h.sudo:
        lines.append('out=$(sudo -n true 2>&1) || fail sudo "$(echo "$out" | last)"')
    lines.append(f"{{ test -d {d} && test -w {d}; }} || fail data_dir -")
    if h.project_node:
        check = "import sys; print(sys.version_info >= (3, 11))"
        lines.append(
            f'v=$({py} -c \'{check}\' 2>&1); [ "$v" = True ] || fail python "$(echo "$v" | last)"'
        )
        for module in NODE_MODULES:
            lines.append(
                f'v=$({py} -c "import {module}" 2>&1) || fail module "{module} $(echo "$v" | last)"'
            )
        if secret:
            lines.append(
                f'v=$({py} -c "import cryptography" 2>&1) || fail crypto "$(echo "$v" | last)"'
            )
    else:
        b = shlex.quote(h.rqlited or "")
        lines.append(f"{{ test -f {b} && test -x {b}; }} || fail rqlited -")
        lines.append(f"echo \"VERSION $({b} -version 2>&1 | head -n 5 | tr '\\n' ' ')\"")
        # the first library in FAKETIME_GLOBS' order (the multi-threaded variant first)
        find = f'for f in {" ".join(FAKETIME_GLOBS)}; do [ -e "$f" ] && echo "$f" && break; done'
        lines.append(f'echo "FAKETIME $({find})"')
    lines.append('echo "UID $(id -u)"')
    lines.append(f'out=$({sudo}iptables -w 5 -S INPUT 2>&1 >/dev/null) && echo "IPTABLES ok" '
                 '|| echo "IPTABLES $(echo "$out" | last)"')  # fmt: skip
    lines += links.probe_lines(h)
    lines += probe_lines()
    lines.append(
        'out=$(ss -Hltn 2>&1) || fail ss "$(echo "$out" | last)"; echo "$out" | sed "s/^/LISTEN /"'
    )
    return "\n".join(lines) + "\n"


def read_probe(h: Host, out: str) -> HostFacts:
    """The facts in ``out`` (what :func:`probe_script` printed), or :class:`SshError`
    naming the host and its first problem."""
    name = f"host {h.name} ({h.target})"
    values: dict[str, str] = {}
    listening: list[str] = []
    for line in out.splitlines():
        key, _, rest = line.partition(" ")
        if key == "FAIL":
            what, _, detail = rest.partition(" ")
            raise SshError(f"{name}: {_failure(h, what, detail.strip())}")
        if key == "LISTEN":
            listening.append(rest)
        else:
            values[key] = rest.strip()
    version = None
    if not h.project_node:
        try:
            version = parse_rqlited_version(values.get("VERSION", ""))
            check_rqlited_version(version)
        except ClusterError as exc:
            raise SshError(f"{name}: {h.rqlited}: {exc}") from None
    _check_ports(h, name, listening)
    problem = None
    if values.get("UID") != "0" and not h.sudo:
        problem = f"host {h.name}: {h.user} is not root and sudo = false, so it cannot run iptables"
    elif values.get("IPTABLES") != "ok":
        problem = f"host {h.name}: iptables does not work there ({values.get('IPTABLES')})"
    links_problem, netem_problem = links.read_probe(h, values)
    return HostFacts(
        h.name,
        version,
        values.get("FAKETIME") or None,
        problem,
        links_problem=links_problem,
        netem_problem=netem_problem,
        disk_problem=probe_problem(h, values),
    )


def _failure(h: Host, what: str, detail: str) -> str:
    if what == "sudo":
        return f"sudo = true, but {h.user} cannot sudo without a password (sudo -n true: {detail})"
    if what == "data_dir":
        return f"data_dir {h.data_dir} does not exist or {h.user} cannot write it"
    if what == "python":
        return (
            f"{h.python} is not a Python 3.11+ ({detail}); the project's node needs one on "
            'the host (or set python = "/path/to/python3")'
        )
    if what == "module":
        module, _, error = detail.partition(" ")
        return (
            f"{h.python} cannot import {module}, which the project's node needs ({error}): "
            f"install it for that Python on the host ({h.python} -m pip install {module}), "
            'or set python = "/path/to/python3" to one that has it'
        )
    if what == "crypto":
        return (
            f"the project's node listens beyond loopback, so it encrypts Raft with a cluster "
            f"secret, which needs the cryptography package for {h.python} there ({detail}): "
            "pip install cryptography"
        )
    if what == "rqlited":
        return f"rqlited {h.rqlited} does not exist or is not executable"
    return f"cannot list the listening ports (ss -Hltn: {detail})"


def _check_ports(h: Host, name: str, listening: list[str]) -> None:
    wildcard = {"0.0.0.0", "*", "[::]", "::"}
    for line in listening:
        fields = line.split()
        if len(fields) < 4:
            continue
        addr, _, port = fields[3].rpartition(":")
        addr = addr.split("%")[0]
        for label, wanted in (("http_port", h.http_port), ("raft_port", h.raft_port)):
            if port == str(wanted) and (addr in wildcard or addr.strip("[]") == h.address):
                raise SshError(
                    f"{name}: port {wanted} ({label}) is in use on {fields[3]}; stop what "
                    f"listens there or give the host another {label}"
                )


def check_host(s: Session, secret: bool = False) -> HostFacts:
    """Check one host in one round trip; :class:`SshError` names it and the problem."""
    return read_probe(s.host, s.run(probe_script(s.host, secret), timeout=60).out)


def needs_secret(hosts: Sequence[Host]) -> bool:
    """Whether the project's nodes must authenticate Raft with a cluster secret: when a
    node address is not a loopback one (the node refuses to listen there without)."""
    for h in hosts:
        try:
            if not ipaddress.ip_address(h.address).is_loopback:
                return True
        except ValueError:
            if h.address != "localhost":
                return True
    return False
