"""Local SSH test hosts: network namespaces, each with its own address and real sshd.

``python -m harness hosts up --count 3 --dir D`` makes a netns network
(:mod:`harness.cluster.netns`: a bridge, one namespace per host on 127.77.X.11, .12, ...)
and runs Debian's OpenSSH server in each namespace, listening on that address only, with
a host key, config and ``authorized_keys`` under ``D``, and a client key it generates
(``D/client_key``). It writes ``D/inventory.toml`` (printed too) for ``--backend ssh``,
each host with its own data folder ``D/<host>/data``. The hosts share this machine's
files and processes; only their network is their own, which is what partitions cut.
``hosts down --dir D`` stops the sshds (by pid), removes the namespaces and everything
it wrote under ``D``. State: ``D/hosts.json``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.cluster.base import ClusterError
from harness.cluster.netns import Member, NetnsNetwork, require_root, run

SSHD = "/usr/sbin/sshd"
#: sshd refuses to start without its privilege-separation folder
PRIVSEP_DIR = Path("/run/sshd")
#: left in PRIVSEP_DIR when test hosts made it, so that the last ``hosts down`` (of any
#: folder) removes it, and never a folder the system's sshd made
PRIVSEP_MARK = ".made-by-rqueue-hosts"
#: held (flock) while PRIVSEP_DIR is made and sshds start, and while it is removed: one
#: ``hosts down`` must not take the folder from under another ``hosts up``'s starting sshd
PRIVSEP_LOCK = PRIVSEP_DIR.parent
STATE = "hosts.json"
INVENTORY = "inventory.toml"
CLIENT_KEY = "client_key"
_WRITTEN = (CLIENT_KEY, f"{CLIENT_KEY}.pub", "authorized_keys", "known_hosts", INVENTORY, STATE)

SSHD_CONFIG = """\
# sshd of the SSH test host {name} (python -m harness hosts up)
ListenAddress {ip}:22
HostKey {dir}/ssh_host_ed25519_key
PidFile {dir}/sshd.pid
AuthorizedKeysFile {root}/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
MaxSessions 100
MaxStartups 100
Subsystem sftp internal-sftp
"""


@dataclass
class TestHost:
    name: str
    ip: str
    sshd_pid: int


def hosts_up(count: int, directory: Path, timeout: float = 20.0) -> str:
    """Start ``count`` test hosts under ``directory``; return the inventory's text."""
    require_root()
    if not os.access(SSHD, os.X_OK):
        raise ClusterError(
            f"SSH test hosts need OpenSSH's server ({SSHD}): apt-get install openssh-server "
            "(scripts/install test does)"
        )
    if count < 1:
        raise ClusterError(f"--count must be at least 1, got {count}")
    directory = directory.resolve()
    if (directory / STATE).exists():
        raise ClusterError(f"{directory} holds test hosts already: `hosts down --dir` them first")
    directory.mkdir(parents=True, exist_ok=True)
    names = [f"n{i}" for i in range(1, count + 1)]
    state: dict = {"network": None, "hosts": []}
    _save(directory, state)
    try:
        key = directory / CLIENT_KEY
        _keygen(key, "rqueue harness client")
        shutil.copy(key.with_suffix(".pub"), directory / "authorized_keys")
        net = NetnsNetwork.create(names, owner=str(directory))
        net.creator = None  # nobody's: it outlives this command; only hosts down removes it
        net._register()
        state["network"] = net.to_json()
        _save(directory, state)
        known = []
        with _privsep_lock():
            if not PRIVSEP_DIR.exists():
                PRIVSEP_DIR.mkdir(mode=0o755)
                (PRIVSEP_DIR / PRIVSEP_MARK).touch()
            for name in names:
                known.append(_start_sshd(directory, net.members[name], name, state, timeout))
        (directory / "known_hosts").write_text("".join(known))
        for h in state["hosts"]:
            _wait_listening(h["ip"], 22, timeout)
        text = inventory_text(directory, state["hosts"])
        (directory / INVENTORY).write_text(text)
        return text
    except BaseException:
        hosts_down(directory)
        raise


def _start_sshd(directory: Path, member: Member, name: str, state: dict, timeout: float) -> str:
    """Start one host's sshd in its namespace; its ``known_hosts`` line."""
    host_dir = directory / name
    (host_dir / "data").mkdir(parents=True, exist_ok=True)
    _keygen(host_dir / "ssh_host_ed25519_key", f"rqueue test host {name}")
    config = host_dir / "sshd_config"
    config.write_text(SSHD_CONFIG.format(name=name, ip=member.ip, dir=host_dir, root=directory))
    run(["ip", "netns", "exec", member.netns, SSHD, "-f", str(config),
         "-E", str(host_dir / "sshd.log")])  # fmt: skip
    pid = _wait_pid(host_dir / "sshd.pid", timeout)
    state["hosts"].append({"name": name, "ip": member.ip, "sshd_pid": pid})
    _save(directory, state)
    pub = (host_dir / "ssh_host_ed25519_key.pub").read_text().split()[:2]
    return f"{member.ip} {' '.join(pub)}\n"


@contextlib.contextmanager
def _privsep_lock() -> Iterator[None]:
    """An exclusive lock, between this machine's ``hosts up`` and ``hosts down``, on the
    privilege-separation folder's parent (a lock file would itself be left behind)."""
    fd = os.open(PRIVSEP_LOCK, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def inventory_text(directory: Path, hosts: list[dict]) -> str:
    lines = [
        "# SSH test hosts made by `python -m harness hosts up` (remove: hosts down --dir)",
        "[defaults]",
        'user = "root"',
        f'key = "{directory / CLIENT_KEY}"',
        f'known_hosts = "{directory / "known_hosts"}"',
        'node = "project"',
        # the hosts share this machine's files: their nodes run on the Python the harness
        # runs on (a virtual environment's included), which has every package they import
        f"python = {json.dumps(sys.executable)}",
        "sudo = false",
    ]
    for h in hosts:
        lines += ["", f"[hosts.{h['name']}]", f'address = "{h["ip"]}"']
        lines.append(f'data_dir = "{directory / h["name"] / "data"}"')
    return "\n".join(lines) + "\n"


def hosts_down(directory: Path, timeout: float = 10.0) -> list[str]:
    """Stop the test hosts in ``directory`` and remove what ``hosts up`` made; returns
    what was removed. Processes still inside a namespace (a crashed run's nodes) are
    killed first: a namespace lives on while a process uses it."""
    directory = directory.resolve()
    path = directory / STATE
    if not path.exists():
        raise ClusterError(f"{directory} holds no test hosts ({STATE} is missing)")
    state = json.loads(path.read_text())
    removed = []
    for h in state.get("hosts", []):
        config = str(directory / h["name"] / "sshd_config")
        if _cmdline_has(h["sshd_pid"], config):
            _kill(h["sshd_pid"], timeout)
            removed.append(f"sshd {h['name']} (pid {h['sshd_pid']})")
    if state.get("network"):
        net = NetnsNetwork.from_json(state["network"])
        for m in net.members.values():
            pids = subprocess.run(
                ["ip", "netns", "pids", m.netns], capture_output=True, text=True
            ).stdout.split()
            for pid in pids:
                _kill(int(pid), timeout)
                removed.append(f"process {pid} in {m.netns}")
        net.teardown()
        removed.append(f"network {net.bridge}")
    with _privsep_lock():
        if (PRIVSEP_DIR / PRIVSEP_MARK).exists() and not _any_sshd():
            with contextlib.suppress(OSError):
                (PRIVSEP_DIR / PRIVSEP_MARK).unlink()
                PRIVSEP_DIR.rmdir()
    for h in state.get("hosts", []):
        shutil.rmtree(directory / h["name"], ignore_errors=True)
    for name in _WRITTEN:
        (directory / name).unlink(missing_ok=True)
    for child in directory.glob("n*"):
        if (child / "sshd_config").exists():  # a host whose sshd never started
            shutil.rmtree(child, ignore_errors=True)
    with contextlib.suppress(OSError):
        directory.rmdir()  # only if empty: files of the user's stay
    return removed


def _save(directory: Path, state: dict) -> None:
    tmp = directory / f"{STATE}.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, directory / STATE)


def _keygen(path: Path, comment: str) -> None:
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])


def _wait_pid(pidfile: Path, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            return int(pidfile.read_text().strip())
        time.sleep(0.05)
    raise ClusterError(f"sshd wrote no pid file {pidfile} within {timeout:g}s (see sshd.log)")


def _wait_listening(ip: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((ip, port), timeout=1):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"waited {timeout:g}s for sshd to accept connections on {ip}:{port}: {exc}"
                ) from None
        time.sleep(0.05)


def _cmdline_has(pid: int, word: str) -> bool:
    try:
        return word in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def _kill(pid: int, timeout: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return
        time.sleep(0.05)


def _any_sshd() -> bool:
    """Whether an sshd runs on this machine (a zombie does not)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = (entry / "stat").read_text()
                name, state = stat.split("(", 1)[1].rsplit(")", 1)
                if name == "sshd" and state.split()[0] not in ("Z", "X"):
                    return True
    return False
