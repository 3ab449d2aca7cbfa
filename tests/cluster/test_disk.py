"""Nodes' own filesystems (harness.cluster.disk) for real: made, filled to ENOSPC, freed
and removed with nothing left; the embedded node's journal and a cluster on a full disk.
Root only (loop devices and mounts)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cluster import disk
from harness.cluster.local.cluster import LocalCluster
from harness.cluster.local.processes import reap
from harness.cluster.owners import REAP_TAG_ENV
from harness.node.journal import DiskFull, GuardedJournal, PositionalFile
from tests.cluster.helpers import full_leader_loses_no_ack, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(disk.disk_problem() is not None, reason=str(disk.disk_problem())),
]


def ours_left(directory: Path) -> list[str]:
    """Mounts and loop devices of ``directory`` still there, less loop devices that only a
    mount namespace of another process (made while ours was mounted) still holds."""
    return [d for d in disk.leftovers(directory) if not disk.foreign_holders(d)]


def write(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        fh.write(b"x" * size)
        fh.flush()
        os.fsync(fh.fileno())


def test_a_namespace_made_while_mounted_does_not_keep_the_loop_device(tmp_path: Path) -> None:
    """A mount namespace made while a node's filesystem is mounted (as ``ip netns exec``
    makes one, as an SSH test host's sshd lives in one) copies the mount; the release
    still frees the loop device while that namespace lives on."""
    d = disk.make(tmp_path, "n1", tmp_path / "n1" / "data", 16)
    sleeper = subprocess.Popen(["unshare", "--mount", "--propagation", "slave", "sleep", "60"])
    try:
        mounted = f"{d.mount.resolve()}"
        wait_until(
            lambda: mounted in Path(f"/proc/{sleeper.pid}/mountinfo").read_text(),
            10, "the new namespace's copy of the mount",
        )  # fmt: skip
        disk.release(tmp_path)
        assert disk.leftovers(tmp_path) == []  # no loop device held, not even by the copy
        assert sleeper.poll() is None  # and the namespace was still there
    finally:
        sleeper.kill()
        sleeper.wait()
        disk.release(tmp_path)


def test_fill_free_release(tmp_path: Path) -> None:
    d = disk.make(tmp_path, "n1", tmp_path / "n1" / "data", 16)
    try:
        assert os.listdir(d.mount) == [] and d.image == tmp_path / "disks" / "n1.img"
        write(d.mount / "before", 8192)
        assert disk.fill(d) > 8 * 1024 * 1024
        with pytest.raises(OSError) as err:
            write(d.mount / "during", 8192)
        assert err.value.errno == errno.ENOSPC
        assert (d.mount / "before").read_bytes() == b"x" * 8192  # what was there stays
        disk.free(d)
        write(d.mount / "after", 8192)
        disk.free(d)  # twice is fine
    finally:
        disk.release(tmp_path)
    assert ours_left(tmp_path) == []
    assert not (tmp_path / "n1" / "data" / "before").exists()  # unmounted


def test_the_journal_refuses_an_entry_it_cannot_keep_and_keeps_the_rest(tmp_path) -> None:
    d = disk.make(tmp_path, "n1", tmp_path / "data", 16)
    try:
        path = str(d.mount / "raft.journal")
        j = GuardedJournal(path)
        for i in range(1, 11):
            j.add(b"entry %d" % i, i, 1)
        disk.fill(d)
        added = 10
        with pytest.raises(DiskFull):  # a few may fit in the last block, not 1000
            for i in range(11, 1011):
                j.add(os.urandom(512), i, 1)
                added += 1
        assert len(j) == added  # the refused entry is not in the log
        with pytest.raises(OSError):  # term and vote cannot be saved: the caller must not act
            j.setCurrentTerm(2, None)
        j.onOneSecondTimer()  # the commit index waits for room, quietly
        disk.free(d)
        j.add(b"after", added + 1, 1)
        j._destroy()
        again = GuardedJournal(path)
        assert len(again) == added + 1 and again[0][0] == b"entry 1" and again[-1][0] == b"after"
        again._destroy()
    finally:
        disk.release(tmp_path)
    assert ours_left(tmp_path) == []


def test_a_full_leader_steps_down_without_acknowledging_and_catches_up(tmp_path) -> None:
    c = LocalCluster.start(3, tmp_path / "c", disk_mb=32, timeout=60)
    try:
        assert "disk" in c.capabilities
        full_leader_loses_no_ack(c, elect=20, catch_up=30)
    finally:
        c.stop()
    assert ours_left(tmp_path / "c") == []


CRASHING_OWNER = """
import os, signal, sys
from harness.cluster.local.cluster import LocalCluster
from harness.cluster.owners import REAP_TAG_ENV
from harness.cluster.local.processes import reap
c = LocalCluster.start(3, sys.argv[1], disk_mb=16, timeout=60)
print("up", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_crashed_owner_s_disks_are_swept_with_its_nodes(tmp_path) -> None:
    tag = f"disk-sweep-{os.getpid()}"
    env = {**os.environ, REAP_TAG_ENV: tag}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    directory = tmp_path / "c"
    proc = subprocess.run(
        [sys.executable, "-c", CRASHING_OWNER, str(directory)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL and "up" in proc.stdout, proc.stderr
    assert len(ours_left(directory)) >= 3  # the mounts outlived their owner
    result = reap(tag)
    assert len(result["processes"]) == 3
    assert any(str(directory) in d for d in result["disks"]), result
    assert ours_left(directory) == []


def test_the_journal_writes_without_a_memory_map_and_reads_back_what_it_wrote(tmp_path) -> None:
    """No store into a mapped page, so a disk that cannot back one is an OSError from
    pwrite, never SIGBUS: the journal's file holds no memory map, and a journal written
    through it (entries, a compaction, a truncation) reads back whole after a restart."""
    path = str(tmp_path / "raft.journal")
    j = GuardedJournal(path)
    assert isinstance(j._FileJournal__journalFile, PositionalFile)
    for i in range(1, 201):
        j.add(b"entry %d " % i + os.urandom(i), i, 1 + i // 50)
    j.deleteEntriesTo(50)  # a compaction rewrites the rest from the start
    j.deleteEntriesFrom(140)  # a conflict truncates the tail
    j.add(b"last", 191, 9)
    j.flush()
    kept = [j[k] for k in range(len(j))]
    j._destroy()
    maps = Path(f"/proc/{os.getpid()}/maps").read_text()
    assert path not in maps, "the journal's file is mapped"
    again = GuardedJournal(path)
    assert [again[k] for k in range(len(again))] == kept and len(kept) == 141
    assert kept[0][1] == 51 and kept[-1] == (b"last", 191, 9)
    again._destroy()
