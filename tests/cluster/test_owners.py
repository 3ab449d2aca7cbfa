"""A cluster's owner, and when it is provably gone (what `cluster down --all` reaps by)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from harness.cluster.owners import describe_owner, identity, owner_gone


def _fake_proc(root: Path, boot: str, processes: dict[int, int]) -> Path:
    """A /proc with a boot id and processes (pid -> start ticks)."""
    (root / "sys" / "kernel" / "random").mkdir(parents=True)
    (root / "sys" / "kernel" / "random" / "boot_id").write_text(boot + "\n")
    for pid, start in processes.items():
        (root / str(pid)).mkdir()
        fields = ["S", *["0"] * 18, str(start), "0"]  # field 3 onwards; 22 is the start
        (root / str(pid) / "stat").write_text(f"{pid} (a (tricky) name) {' '.join(fields)}\n")
    return root


def test_this_process_is_not_gone() -> None:
    me = identity()
    host, _boot, pid, _start = me.rsplit(":", 3)
    assert host == socket.gethostname() and int(pid) == os.getpid()
    assert not owner_gone(me)
    assert describe_owner(me) == f"owned by pid {os.getpid()}, still running"


def test_a_process_that_exited_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        theirs = identity(child.pid)
        assert not owner_gone(theirs)
    finally:
        child.kill()
        child.wait()
    assert owner_gone(theirs)


def test_a_reused_pid_or_another_boot_means_gone(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, "boot-1", {4242: 1000})
    host = socket.gethostname()
    assert identity(4242, proc) == f"{host}:boot-1:4242:1000"
    assert not owner_gone(f"{host}:boot-1:4242:1000", proc)
    assert owner_gone(f"{host}:boot-1:4242:999", proc)  # the pid belongs to another now
    assert owner_gone(f"{host}:boot-1:4343:1000", proc)  # no such process
    assert owner_gone(f"{host}:boot-0:4242:1000", proc)  # the machine was restarted since


def test_what_cannot_be_judged_is_never_gone(tmp_path: Path) -> None:
    proc = _fake_proc(tmp_path, "boot-1", {})
    assert not owner_gone(None, proc)  # `cluster up`: nobody's
    assert not owner_gone("", proc)
    assert not owner_gone("not an identity", proc)
    assert not owner_gone("another-host:boot-1:4242:1000", proc)  # its processes are not here
    assert describe_owner(None).startswith("no owner")
    assert "on another host (another-host)" in describe_owner("another-host:b:7:1")
