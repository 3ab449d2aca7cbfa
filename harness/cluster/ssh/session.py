"""SSH sessions to the hosts: OpenSSH's own client, one master connection per host.

Each :class:`Session` opens one authenticated connection (``ssh -M``, a ControlMaster
with its socket in a private folder) and runs every command as a new channel of it
(``ssh -S SOCKET``): no second handshake, so a command costs a round trip, as one session
per node does in Jepsen. :func:`run_all` runs a command on many hosts at once (a thread
pool); every command has a timeout (the local ssh client is killed when it passes).
Why OpenSSH rather than a Python library: docs/ssh.md.

Errors of the connection itself are one line naming the host and what went wrong
(:func:`connection_problem`): unreachable, key refused, host key not trusted.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from harness.cluster.base import ClusterError
from harness.cluster.ssh.inventory import Host

T = TypeVar("T")
#: seconds to wait for a host to answer the first connection
CONNECT_TIMEOUT = 5
#: every remote command runs with this on its PATH (iptables, ss are in sbin)
PATH_PREFIX = "PATH=$PATH:/usr/sbin:/sbin; export PATH; "
_OPEN: set[Sessions] = set()
_OPEN_LOCK = threading.Lock()


class SshError(ClusterError):
    """A host could not be reached, or a command on it failed; the message says which."""


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    @property
    def ok(self) -> bool:
        return self.code == 0

    def first_line(self) -> str:
        lines = (self.err or self.out).strip().splitlines()
        return lines[-1] if lines else f"exit {self.code}"


def connection_problem(host: Host, stderr: str) -> str:
    """One line for an ssh connection that failed with ``stderr``."""
    text = stderr.strip()
    last = text.splitlines()[-1] if text else "no output"
    if "Permission denied" in text:
        key = host.key or "ssh's default keys"
        return f"host {host.name} ({host.target}): the key {key} was refused for {host.user}"
    if "Host key verification failed" in text or "REMOTE HOST IDENTIFICATION" in text:
        where = host.known_hosts or "~/.ssh/known_hosts"
        return f"host {host.name} ({host.target}): its host key is not the one {where} holds"
    if re.search(r"Connection refused|timed out|No route to host|Could not resolve|"
                 r"Network is unreachable|Connection closed", text):  # fmt: skip
        return f"host {host.name} ({host.target}) is unreachable: {last}"
    return f"host {host.name} ({host.target}): ssh failed: {last}"


class Session:
    """One host's master connection and the commands run over it."""

    def __init__(self, host: Host, control_dir: Path) -> None:
        self.host = host
        self.socket = control_dir / f"{host.name}.sock"
        self._log = control_dir / f"{host.name}.log"
        self.master_pid: int | None = None
        self._proc: subprocess.Popen | None = None

    def _options(self) -> list[str]:
        h = self.host
        opts = ["-p", str(h.port), "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}"]
        opts += ["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        opts += ["-o", "LogLevel=ERROR", "-o", f"ControlPath={self.socket}"]
        if h.key:
            opts += ["-i", h.key, "-o", "IdentitiesOnly=yes"]
        if h.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={h.known_hosts}", "-o", "StrictHostKeyChecking=yes"]
        else:
            opts += ["-o", "StrictHostKeyChecking=accept-new"]
        return [*opts, f"{h.user}@{h.address}"]

    def start(self) -> None:
        """Start connecting: the master is a child of this process that dies with it
        (``PR_SET_PDEATHSIG``), so not even a harness killed outright leaves one behind.
        Call from a thread that lives as long as the session (the signal follows the
        thread that started the child)."""
        argv = ["ssh", "-M", "-N", "-o", "ControlMaster=yes", "-o", "ControlPersist=no"]
        with open(self._log, "wb") as log:
            self._proc = subprocess.Popen(
                argv + self._options(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                preexec_fn=_die_with_parent,
            )
        self.master_pid = self._proc.pid

    def wait_ready(self, deadline: float) -> None:
        """Wait until the master is authenticated (its socket is there) or has failed;
        :class:`SshError` names the host and the problem."""
        while not self.socket.exists():
            if self._proc is None or self._proc.poll() is not None:
                raise SshError(connection_problem(self.host, self._log.read_text(errors="replace")))
            if time.monotonic() >= deadline:
                raise SshError(
                    f"host {self.host.name} ({self.host.target}): no SSH session within "
                    f"{CONNECT_TIMEOUT * 4}s (the server accepted the connection but did "
                    "not finish authenticating)"
                )
            time.sleep(0.02)

    def open(self) -> None:
        """Connect and authenticate; :class:`SshError` when it fails."""
        self.start()
        self.wait_ready(time.monotonic() + CONNECT_TIMEOUT * 4)

    def run(
        self,
        command: str,
        timeout: float = 30.0,
        *,
        stdin: bytes | None = None,
        sudo: bool = False,
        check: bool = True,
    ) -> Result:
        """Run shell ``command`` on the host within ``timeout`` s; with ``check`` a
        non-zero exit raises :class:`SshError` naming the host, the command and its error.
        ``sudo``: as root through ``sudo -n`` when the inventory says the host needs it."""
        if sudo and self.host.sudo:
            command = f"sudo -n sh -c {shlex.quote(PATH_PREFIX + command)}"
        else:
            command = PATH_PREFIX + command
        argv = ["ssh", "-o", "ControlMaster=no", *self._options(), command]
        try:
            proc = subprocess.run(
                argv,
                input=stdin if stdin is not None else b"",
                capture_output=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise SshError(
                f"host {self.host.name}: {_short(command)} did not finish within {timeout:g}s"
            ) from None
        result = Result(
            proc.returncode,
            proc.stdout.decode(errors="replace"),
            proc.stderr.decode(errors="replace"),
        )
        if proc.returncode == 255 and not self.socket.exists():
            raise SshError(connection_problem(self.host, result.err))
        if check and not result.ok:
            raise SshError(
                f"host {self.host.name}: {_short(command)} failed: {result.first_line()}"
            )
        return result

    def close(self) -> None:
        """End the master connection (idempotent); its process is gone when this returns."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()  # the master closes its channels and the connection
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=5)
        self.socket.unlink(missing_ok=True)


def _short(command: str) -> str:
    command = command.removeprefix(PATH_PREFIX)
    return f"`{command[:120]}{'...' if len(command) > 120 else ''}`"


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the thread that started it ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


class Sessions:
    """One :class:`Session` per host, opened together; ``close`` ends them all."""

    def __init__(self, hosts: Sequence[Host]) -> None:
        if shutil.which("ssh") is None:
            raise SshError("the SSH backend needs OpenSSH's client (ssh), not found on PATH")
        # a private folder with a short path: a control socket's is limited to ~100 bytes
        base = tempfile.gettempdir()
        self._dir = Path(tempfile.mkdtemp(prefix="rqssh-", dir=base if len(base) <= 40 else "/tmp"))
        self.by_name = {h.name: Session(h, self._dir) for h in hosts}
        with _OPEN_LOCK:
            _OPEN.add(self)

    def open(self) -> None:
        """Connect to every host at once; the first host's problem (in inventory order)
        raises :class:`SshError`, after closing what did connect."""
        try:
            for s in self.by_name.values():  # from this thread: see Session.start
                s.start()
            deadline = time.monotonic() + CONNECT_TIMEOUT * 4
            run_all(list(self.by_name.values()), lambda s: s.wait_ready(deadline))
        except BaseException:
            self.close()
            raise

    def __getitem__(self, name: str) -> Session:
        return self.by_name[name]

    def close(self) -> None:
        """End every session and remove the sockets' folder (idempotent)."""
        with _OPEN_LOCK:
            _OPEN.discard(self)
        for s in self.by_name.values():
            s.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def run_all(sessions: Sequence[Session], fn: Callable[[Session], T]) -> list[T]:
    """``fn(session)`` for every session at once, results in order; the first exception
    in that order is raised once all have finished.

    Interrupted while it waits (a signal's exception in this thread), it still waits for
    the calls already running before it raises: each is bounded by its commands' own
    timeouts, and whatever undoes them (a cluster's ``stop``) must see what they did. A
    node launched after the stop had looked for it was left running on its host, its run
    folder gone (an interrupted ``matrix``)."""
    if not sessions:
        return []
    pool = ThreadPoolExecutor(max_workers=len(sessions))
    futures = [pool.submit(fn, s) for s in sessions]
    try:
        wait(futures)
    except BaseException:
        for f in futures:
            f.cancel()
        wait(futures)
        raise
    finally:
        pool.shutdown(wait=False)
    errors = [f.exception() for f in futures]
    for exc in errors:
        if exc is not None:
            raise exc
    return [f.result() for f in futures]


@atexit.register
def _close_leftovers() -> None:
    """No master or sockets' folder outlives the interpreter (a program that returned
    without ``close``)."""
    with _OPEN_LOCK:
        left = list(_OPEN)
    for s in left:
        with contextlib.suppress(Exception):
            s.close()
