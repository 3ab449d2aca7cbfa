"""What the SSH backend checks on every host before it starts anything (bad input as one
line each): reachable, key accepted (:mod:`.session`), sudo that works without a password
when the inventory asks for it, a data folder the user can write, the node to run (the
project's: Python 3.11+; a user's rqlited: executable, a version whose flags the harness
knows), the node ports free, and what the host offers for faults (iptables as root,
libfaketime for an rqlited's clock)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from harness.cluster.base import ClusterError
from harness.cluster.engines import FAKETIME_GLOBS, check_rqlited_version, parse_rqlited_version
from harness.cluster.ssh.session import Session, SshError


@dataclass(frozen=True)
class HostFacts:
    """What preflight learnt about one host."""

    name: str
    rqlited_version: tuple[int, int, int] | None
    faketime: str | None  # the libfaketime library on the host (rqlited hosts)
    firewall_problem: str | None  # why partitions cannot run there (None: they can)


def check_host(s: Session) -> HostFacts:
    """Check one host; :class:`SshError` with one line naming it and the problem."""
    h = s.host
    name = f"host {h.name} ({h.target})"
    if h.sudo:
        r = s.run("sudo -n true", check=False)
        if not r.ok:
            raise SshError(
                f"{name}: sudo = true, but {h.user} cannot sudo without a password "
                f"(sudo -n true: {r.first_line()})"
            )
    d = shlex.quote(h.data_dir)
    if not s.run(f"test -d {d} && test -w {d}", check=False).ok:
        raise SshError(f"{name}: data_dir {h.data_dir} does not exist or {h.user} cannot write it")
    version = None
    if h.project_node:
        py = shlex.quote(h.python)
        r = s.run(f"{py} -c 'import sys; print(sys.version_info >= (3, 11))'", check=False)
        if r.out.strip() != "True":
            why = "is older than 3.11" if r.ok else f"cannot run ({r.first_line()})"
            raise SshError(
                f"{name}: {h.python} {why}; the project's node needs Python 3.11+ on the host "
                '(or set python = "/path/to/python3")'
            )
    else:
        b = shlex.quote(h.rqlited)
        if not s.run(f"test -f {b} && test -x {b}", check=False).ok:
            raise SshError(f"{name}: rqlited {h.rqlited} does not exist or is not executable")
        r = s.run(f"{b} -version 2>&1", check=False)
        try:
            version = parse_rqlited_version(r.out)
            check_rqlited_version(version)
        except ClusterError as exc:
            raise SshError(f"{name}: {h.rqlited}: {exc}") from None
    _check_ports(s, name)
    faketime = None
    if not h.project_node:
        globs = " ".join(FAKETIME_GLOBS)
        faketime = s.run(f"ls {globs} 2>/dev/null | head -n 1", check=False).out.strip() or None
    return HostFacts(h.name, version, faketime, _firewall_problem(s))


def _check_ports(s: Session, name: str) -> None:
    h = s.host
    r = s.run("ss -Hltn", check=False)
    if not r.ok:
        raise SshError(f"{name}: cannot list listening ports (ss -Hltn: {r.first_line()})")
    wildcard = {"0.0.0.0", "*", "[::]", "::"}
    for line in r.out.splitlines():
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


def _firewall_problem(s: Session) -> str | None:
    h = s.host
    uid = s.run("id -u", check=False).out.strip()
    if uid != "0" and not h.sudo:
        return f"host {h.name}: {h.user} is not root and sudo = false, so it cannot run iptables"
    r = s.run("iptables -w 5 -S INPUT > /dev/null", sudo=True, check=False)
    if not r.ok:
        return f"host {h.name}: iptables does not work there ({r.first_line()})"
    return None
