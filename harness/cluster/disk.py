"""Small filesystems for nodes' data directories, which a fault fills and frees.

Each node's data directory is the mount point of its own ext4 filesystem (a sparse image
file mounted through a loop device), made when a cluster that needs the ``disk``
capability starts and removed when it stops. ext4 on a loop device, not tmpfs: it is the
filesystem a real node runs on (delayed allocation, extents, a journal: ENOSPC where a
disk gives it), it takes no memory, and like tmpfs it survives a node's restart (the
mount is the harness's, not the node's). ``disk-full`` fills a node's filesystem with a
filler file (:func:`fill`) for its window and removes it (:func:`free`).

Tags for the sweep: the image file is ``<cluster dir>/disks/<node>.img`` and the mount
point lies under the cluster directory; :func:`release` removes every mount under a
directory and every loop device whose image lies under it, so what a crashed run left is
found from the directory alone (``LocalCluster.stop``, ``cluster down``), and
:func:`leftovers` lists them for the tests.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .base import DISK, ClusterError

log = logging.getLogger(__name__)

#: the size of each node's filesystem unless a cluster says otherwise
DISK_MB = 128
#: where a cluster keeps its image files
DISKS_DIR = "disks"
#: the filler file :func:`fill` writes in the filesystem's root
FILLER = ".rqueue-disk-filler"
_SMALLEST = 4096


@dataclass(frozen=True)
class NodeDisk:
    """One node's filesystem: its image file and where it is mounted."""

    image: Path
    mount: Path

    @property
    def filler(self) -> Path:
        return self.mount / FILLER


def disk_problem() -> str | None:
    """Why this machine cannot make the filesystems (None: it can), in one line."""
    if os.geteuid() != 0:
        return "making a node's filesystem needs root (a loop device and a mount)"
    for tool in ("mkfs.ext4", "mount", "umount", "losetup"):
        if shutil.which(tool) is None:
            return f"making a node's filesystem needs {tool}, which is not on PATH"
    return None


def preflight(scenario: str, needs: frozenset[str]) -> None:
    """Refuse scenario ``scenario``, whose faults need ``needs``, when it fills nodes'
    disks and this machine cannot make their filesystems."""
    if DISK in needs and (problem := disk_problem()) is not None:
        raise ClusterError(f"scenario {scenario!r} fills nodes' disks: {problem}")


def _run(argv: list[str], what: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        raise ClusterError(f"{what}: {' '.join(argv)}: {err[-1] if err else proc.returncode}")
    return proc.stdout


def make(
    directory: Path,
    node_id: str,
    mount: Path,
    size_mb: int = DISK_MB,
    owner: tuple[int, int] | None = None,
) -> NodeDisk:
    """Make node ``node_id``'s filesystem of ``size_mb`` MiB in cluster ``directory`` and
    mount it on ``mount`` (created, and empty: it becomes the node's data directory);
    ``owner``: the uid and gid its root directory belongs to (a container's user)."""
    problem = disk_problem()
    if problem is not None:
        raise ClusterError(problem)
    if size_mb < 8:
        raise ClusterError(f"a node's filesystem needs at least 8 MiB, got {size_mb}")
    disk = node_disk(directory, node_id, mount)
    disk.image.parent.mkdir(parents=True, exist_ok=True)
    with open(disk.image, "wb") as fh:
        fh.truncate(size_mb * 1024 * 1024)
    # -m 0: no blocks kept for root (the nodes run as root); no lazy init running after
    _run(
        ["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=0,lazy_journal_init=0",
         "-L", f"rqueue-{node_id}", str(disk.image)],
        f"making {node_id}'s filesystem",
    )  # fmt: skip
    disk.mount.mkdir(parents=True, exist_ok=True)
    share(directory)
    _run(["mount", "-o", "loop", str(disk.image), str(disk.mount)], f"mounting {node_id}'s disk")
    (disk.mount / "lost+found").rmdir()  # the data directory starts empty, as a new one does
    if owner is not None:
        os.chown(disk.mount, *owner)
    return disk


def share(directory: Path) -> None:
    """Make ``directory`` a shared mount (a bind mount on itself), once.

    A mount namespace made while a node's filesystem is mounted (``ip netns exec``, an
    SSH test host's sshd) holds a copy of the mount, and with it the loop device, until
    it ends. Below a shared mount that copy is a slave of ours: unmounting ours removes
    it too, and the loop device is free at once (the machine's ``/`` is often private).
    """
    point = str(Path(directory).resolve())
    if any(p == point for _, p in _mounts_under(directory)):
        return
    _run(["mount", "--bind", point, point], f"binding {point} on itself")
    _run(["mount", "--make-shared", point], f"sharing the mount {point}")


def fill(disk: NodeDisk) -> int:
    """Fill the filesystem: a filler file takes every free block (until ENOSPC). Returns
    the filler's bytes."""
    fd = os.open(disk.filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        st = os.fstatvfs(fd)
        chunk = max(_SMALLEST, st.f_bavail * st.f_frsize)
        while chunk >= _SMALLEST:
            try:
                os.posix_fallocate(fd, size, chunk)
                size += chunk
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                chunk //= 2
        os.fsync(fd)
    finally:
        os.close(fd)
    return size


def free(disk: NodeDisk) -> None:
    """Remove the filler (none is fine): the filesystem has its room back."""
    disk.filler.unlink(missing_ok=True)


def _mounts_under(directory: Path) -> list[tuple[str, str]]:
    """(source, mount point) of every mount at or under ``directory``, deepest first."""
    root = str(Path(directory).resolve())
    found = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            point = fields[4].replace("\\040", " ")
            source = fields[fields.index("-") + 2]
            if point == root or point.startswith(root + "/"):
                found.append((source, point))
    return sorted(found, key=lambda m: -len(m[1]))


def _loops_under(directory: Path) -> list[str]:
    """The loop devices whose backing file lies under ``directory``."""
    if shutil.which("losetup") is None:
        return []
    proc = subprocess.run(["losetup", "-J", "-l"], capture_output=True, text=True, timeout=15)
    if proc.returncode != 0 or not proc.stdout.strip():
        return []
    root = str(Path(directory).resolve()) + "/"
    devices = json.loads(proc.stdout).get("loopdevices", [])
    return [
        d["name"]
        for d in devices
        if (d.get("back-file") or "").removesuffix(" (deleted)").startswith(root)
    ]


def leftovers(directory: Path) -> list[str]:
    """Mount points and loop devices of ``directory``'s filesystems still there."""
    return [p for _, p in _mounts_under(directory)] + _loops_under(directory)


def release(directory: Path) -> list[str]:
    """Unmount every filesystem mounted under ``directory`` and detach every loop device
    whose image lies under it (their nodes must be stopped). Returns what it removed;
    raises :class:`ClusterError` naming what stayed."""
    directory = Path(directory)
    if os.geteuid() != 0 or not directory.exists():
        return []
    removed = []
    for _, point in _mounts_under(directory):
        if subprocess.run(["umount", point], capture_output=True).returncode == 0:
            removed.append(point)
    for dev in _loops_under(directory):
        if subprocess.run(["losetup", "-d", dev], capture_output=True).returncode == 0:
            removed.append(dev)
    left = [p for _, p in _mounts_under(directory)]
    for dev in _loops_under(directory):
        holders = foreign_holders(dev)
        if holders:
            # another process's mount namespace, made (unshare -m) while ours was mounted,
            # holds a copy of the mount: the device goes when that namespace does
            log.warning(
                "%s stays attached: mounted in the mount namespace of pid %s", dev, holders[0]
            )
        else:
            left.append(dev)
    if left:
        raise ClusterError(f"could not remove the disks of {directory}: {', '.join(left)}")
    return removed


def foreign_holders(device: str) -> list[int]:
    """Processes in other mount namespaces where ``device`` is mounted (one per namespace)."""
    ours = os.readlink("/proc/self/ns/mnt")
    seen: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ns = os.readlink(entry / "ns" / "mnt")
            if ns == ours or ns in seen:
                continue
            if f" - ext4 {device} " in (entry / "mountinfo").read_text():
                seen[ns] = int(entry.name)
        except OSError:
            continue
    return list(seen.values())


def node_disk(directory: Path, node_id: str, mount: Path | str) -> NodeDisk:
    """Node ``node_id``'s filesystem in cluster ``directory``, mounted on ``mount``."""
    return NodeDisk(Path(directory) / DISKS_DIR / f"{node_id}.img", Path(mount))


def make_all(
    directory: Path,
    mounts: dict[str, str],
    size_mb: int,
    owner: tuple[int, int] | None = None,
) -> None:
    """Make and mount a filesystem per node (node id -> its data directory); on a failure
    remove those made and raise."""
    try:
        for node_id, mount in mounts.items():
            make(directory, node_id, Path(mount), size_mb, owner)
    except BaseException:
        release(directory)
        raise


def remount_all(directory: Path, mounts: dict[str, str]) -> None:
    """Mount the nodes' existing filesystems again (a stopped cluster restarted)."""
    for node_id, mount in mounts.items():
        disk = node_disk(directory, node_id, mount)
        if not disk.image.is_file():
            raise ClusterError(f"{node_id}'s filesystem image {disk.image} is missing")
        if not any(p == str(disk.mount.resolve()) for _, p in _mounts_under(disk.mount)):
            share(directory)
            _run(["mount", "-o", "loop", str(disk.image), str(disk.mount)], f"mounting {node_id}")


def _image_dirs() -> set[Path]:
    """The cluster directories whose node images (``<dir>/disks/<node>.img``) are attached
    to a loop device now."""
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        return set()
    proc = subprocess.run(["losetup", "-J", "-l"], capture_output=True, text=True, timeout=15)
    if proc.returncode != 0 or not proc.stdout.strip():
        return set()
    found = set()
    for d in json.loads(proc.stdout).get("loopdevices", []):
        back = Path((d.get("back-file") or "").removesuffix(" (deleted)"))
        if back.suffix == ".img" and back.parent.name == DISKS_DIR:
            found.add(back.parent.parent)
    return found


def _state_owners(directory: Path) -> list[str | None]:
    """The owners a cluster directory's state file names (local or Docker; none: [])."""
    owners: list[str | None] = []
    for name in ("cluster.json", "docker-cluster.json"):
        try:
            data = json.loads((directory / name).read_text())
        except (OSError, ValueError):
            continue
        if "owner" in data:
            owners.append(data.get("owner"))
        for node in data.get("nodes") or []:
            owners.append((node.get("labels") or {}).get("io.rqueue.owner"))
    return owners


def reap_abandoned(busy: set[str], live_too: bool = False) -> list[str]:
    """Release the filesystems of cluster directories nobody uses: not in ``busy`` (the
    directories of live node processes) and whose state's owners are all gone (a
    directory without a state file is a stopped cluster's). ``live_too``: every one not
    in ``busy``. Returns what was removed; what stays is logged."""
    from .owners import owner_gone

    removed: list[str] = []
    for directory in sorted(_image_dirs()):
        if str(directory) in busy:
            continue
        if not live_too and not all(owner_gone(o) for o in _state_owners(directory)):
            continue
        try:
            removed += release(directory)
        except ClusterError as exc:
            log.warning("%s", exc)
    return removed


def reap(reaped: set[str], busy: set[str], abandoned: bool, live_too: bool) -> list[str]:
    """Release the filesystems of the ``reaped`` clusters' directories, and with
    ``abandoned`` those of every directory nobody uses (not ``busy``)."""
    removed: list[str] = []
    for directory in sorted(reaped - busy):
        try:
            removed += release(Path(directory))
        except ClusterError as exc:
            log.warning("%s", exc)
    if abandoned:
        removed += reap_abandoned(busy, live_too)
    return removed
