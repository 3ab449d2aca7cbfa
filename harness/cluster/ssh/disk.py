"""Full disks over SSH: each node's data on a small ext4 filesystem of its own on its host
(the ``disk`` capability, as :mod:`harness.cluster.disk` gives the local and Docker
backends), filled and freed by ``disk-full``.

On a host, as root (or through ``sudo -n``): the image file ``<run folder>/disk.img``,
allocated (``fallocate``; ``dd`` of zeros where the filesystem has no fallocate) so that
a full host disk cannot turn into I/O errors under the node, is attached to a loop device
(``losetup``), made ext4 and mounted on the run folder's ``data/`` before the node starts
(:func:`make_text`); the loop device is then marked to detach itself at its last unmount
(``losetup -d`` of a mounted device), so that a mount namespace that ends with the mount in
it (a test host taken down) frees it too. :func:`fill_text` fills the filesystem with a
filler file until ENOSPC, :func:`free_text` removes it. :func:`release_text` unmounts it
and detaches the loop devices whose backing file lies in the run folder (only those),
before the run folder goes; :func:`sweep_text` does that for every run folder a crashed
run left under ``<data_dir>/rqueue-ssh-*``. :func:`probe_lines` and :func:`probe_problem`
are preflight's part: the tools and root this needs, else a one-line problem.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from harness.cluster.base import ClusterError
from harness.cluster.disk import FILLER
from harness.cluster.ssh import remote
from harness.cluster.ssh.inventory import Host
from harness.cluster.ssh.session import Session, run_all

if TYPE_CHECKING:
    from harness.cluster.ssh.nodes import HostFacts, RemoteNode
    from harness.cluster.ssh.session import Sessions

#: the image file in a run's folder
IMAGE = "disk.img"
#: what making, filling and releasing a node's filesystem runs on a host
TOOLS = ("losetup", "mkfs.ext4", "mount", "umount", "mountpoint", "fallocate", "df")
#: the smallest filesystem (MiB) ext4 with a journal is made in
MIN_MB = 8
#: how long (tenths of a second) the sweep waits for a crashed run's node to be gone
GONE_TENTHS = 100


def _release_body(r: str, lazy: bool) -> str:
    """Shell text, run folder in ``r`` (a shell expression): unmount its ``data/`` and
    detach every loop device whose backing file lies in it (also a deleted one)."""
    unmount = 'umount "$r/data" || umount -l "$r/data"' if lazy else 'umount "$r/data"'
    return (
        f"r={r}; "
        f'if mountpoint -q "$r/data"; then {unmount} || exit 1; echo "unmounted $r/data"; fi; '
        "losetup -l -n -O NAME,BACK-FILE | while read -r dev back; do "
        'case "$back" in "$r/"*) losetup -d "$dev" && echo "detached $dev";; esac; done'
    )


def make_text(run_dir: str, size_mb: int) -> str:
    """Shell text (root): make the run's allocated image of ``size_mb`` MiB, attach it,
    make it ext4 (no blocks kept for root, no lazy init left running) and mount it on the
    run's ``data/``, empty and owned by the user who ran sudo (if any); prints the loop
    device. On a failure it undoes what it did and exits 1 with the reason."""
    if not isinstance(size_mb, int) or size_mb < MIN_MB:
        raise ClusterError(f"a node's filesystem needs at least {MIN_MB} MiB, got {size_mb!r}")
    r = shlex.quote(run_dir.rstrip("/"))
    img = f'"$r/{IMAGE}"'
    undo = (
        'undo() { umount "$r/data" 2>/dev/null; [ -n "$dev" ] && losetup -d "$dev"; '
        f"rm -f {img}; }}"
    )
    return (
        f"r={r}; dev=; {undo}; "
        f'mkdir -p "$r/data" || exit 1; '
        f"fallocate -l {size_mb}MiB {img} 2>/dev/null || "
        f"dd if=/dev/zero of={img} bs=1M count={size_mb} conv=fsync status=none "
        "|| { undo; exit 1; }; "
        f'dev=$(losetup -f --show {img}) || {{ undo; echo "losetup failed" >&2; exit 1; }}; '
        "mkfs.ext4 -q -F -m 0 -E lazy_itable_init=0,lazy_journal_init=0 -L rqueue-ssh "
        '"$dev" || { undo; exit 1; }; '
        'mount "$dev" "$r/data" || { undo; exit 1; }; '
        'losetup -d "$dev"; '  # mounted: the kernel detaches it at the last unmount
        'rmdir "$r/data/lost+found"; '
        'if [ -n "$SUDO_UID" ]; then chown "$SUDO_UID:$SUDO_GID" "$r/data" || exit 1; fi; '
        'echo "$dev"'
    )


def fill_text(mount: str) -> str:
    """Shell text: a filler file in ``mount`` takes every free block (``fallocate`` in
    chunks that halve at ENOSPC down to 4 KiB), synced; prints its size in bytes."""
    m = shlex.quote(mount.rstrip("/"))
    f = shlex.quote(f"{mount.rstrip('/')}/{FILLER}")
    return (
        f'f={f}; : >> "$f" || exit 1; size=$(stat -c %s "$f"); '
        f"chunk=$(df -B1 --output=avail {m} | tail -n 1 | tr -d ' '); "
        '[ "$chunk" -ge 4096 ] 2>/dev/null || chunk=4096; '
        'while [ "$chunk" -ge 4096 ]; do '
        'if out=$(fallocate -o "$size" -l "$chunk" "$f" 2>&1); then size=$((size + chunk)); '
        'else case "$out" in *"No space"*|*"quota"*) chunk=$((chunk / 2));; '
        '*) echo "$out" >&2; exit 1;; esac; fi; done; '
        'sync "$f"; echo "$size"'
    )


def free_text(mount: str) -> str:
    """Shell text: remove the filler (none is fine)."""
    return f"rm -f -- {shlex.quote(mount.rstrip('/') + '/' + FILLER)}"


def release_text(run_dir: str) -> str:
    """Shell text (root, the node stopped): unmount the run's filesystem and detach its
    loop devices; exits 1 if the filesystem stays mounted (then its folder must stay)."""
    return _release_body(shlex.quote(run_dir.rstrip("/")), lazy=False)


def sweep_text(data_dir: str) -> str:
    """Shell text (root): for every run folder in ``data_dir`` (``rqueue-ssh-*``, nothing
    else) whose filesystem is still mounted or attached, kill its node (its recorded pid,
    checked against the run's tag), wait (bounded) until it is gone, then unmount (lazily
    if still busy, so that removing the folder never reaches into the filesystem) and
    detach; prints what it removed."""
    d = shlex.quote(data_dir.rstrip("/"))
    prefix = remote.RUN_PREFIX
    state = "$(sed 's/.*) //' /proc/$p/stat 2>/dev/null | cut -c1)"
    return (
        f'for run_dir in {d}/{prefix}*; do [ -d "$run_dir" ] || continue; '
        'if ! mountpoint -q "$run_dir/data" && ! losetup -l -n -O BACK-FILE '
        '| grep -qF -- "$run_dir/"; then continue; fi; '
        f'run=${{run_dir##*/{prefix}}}; p=$(cat "$run_dir/pid" 2>/dev/null); '
        "if [ -n \"$p\" ] && tr '\\0' '\\n' < /proc/$p/environ 2>/dev/null "
        f'| grep -qx -- "{remote.TAG_ENV}=$run"; then kill -KILL "$p" && echo "killed $p"; '
        f'i=0; while [ -e /proc/$p ] && [ "{state}" != Z ] && [ $i -lt {GONE_TENTHS} ]; '
        "do sleep 0.1; i=$((i + 1)); done; fi; "
        f"( {_release_body('$run_dir', lazy=True)} ); done; true"
    )


def leftovers_text(data_dir: str) -> str:
    """Shell text: the mounts and loop devices of any run in ``data_dir`` (for tests)."""
    pattern = shlex.quote(f"{data_dir.rstrip('/')}/{remote.RUN_PREFIX}")
    return (
        f"findmnt -rn -o TARGET | grep -F -- {pattern}; "
        f"losetup -l -n -O NAME,BACK-FILE | grep -F -- {pattern}; true"
    )


# -- preflight -----------------------------------------------------------------------------
def probe_lines() -> list[str]:
    """Preflight's lines: ``DISKTOOLS`` and the tools of :data:`TOOLS` the host lacks."""
    tools = " ".join(TOOLS)
    return [
        f'echo "DISKTOOLS $(for t in {tools}; do command -v $t >/dev/null 2>&1 '
        '|| printf "%s " $t; done)"'
    ]


def probe_problem(h: Host, values: Mapping[str, str]) -> str | None:
    """Why host ``h`` cannot give nodes filesystems of their own (None: it can), from
    what :func:`probe_lines` (and ``UID``) printed, in one line."""
    if values.get("UID") != "0" and not h.sudo:
        return (
            f"host {h.name}: {h.user} is not root and sudo = false, so it cannot mount a "
            "filesystem for a node's data"
        )
    missing = values.get("DISKTOOLS", " ".join(TOOLS)).split()
    if missing:
        return (
            f"host {h.name} has no {', '.join(missing)}, so a node's data cannot get a "
            "filesystem of its own (util-linux, e2fsprogs, coreutils)"
        )
    return None


def refuse_disks(facts: Iterable[HostFacts], disk_mb: int | None) -> None:
    """Raise :class:`ClusterError` with the first host's problem when nodes need disks of
    their own (``disk_mb``) that a host cannot make."""
    if disk_mb:
        problem = next((f.disk_problem for f in facts if f.disk_problem), None)
        if problem:
            raise ClusterError(problem)


# -- the cluster's part --------------------------------------------------------------------
class SshDisks:
    """:class:`~harness.cluster.ssh.cluster.SshCluster`'s disks (see the module)."""

    sessions: Sessions
    facts: dict[str, HostFacts]
    _nodes: dict[str, RemoteNode]
    _disk_mb: int | None = None

    def _disk_problem(self) -> str | None:
        """Why this cluster cannot fill disks (None: it can)."""
        problem = next((f.disk_problem for f in self.facts.values() if f.disk_problem), None)
        if problem is None and not self._disk_mb:
            return "this cluster was started without disks of its own (disk_mb)"
        return problem

    def _make_disks(self) -> None:
        """Mount a filesystem of ``_disk_mb`` MiB on each node's data folder (nodes not
        started yet); :class:`ClusterError` with the first host's problem."""
        if not self._disk_mb:
            return
        refuse_disks(self.facts.values(), self._disk_mb)
        size = self._disk_mb
        nodes = list(self._nodes.values())
        run_all(
            [self.sessions[n.host.name] for n in nodes],
            lambda s: s.run(make_text(self._nodes[s.host.name].dir, size), sudo=True, timeout=120),
        )

    def _release_disk(self, s: Session, node: RemoteNode) -> None:
        """Unmount and detach node's filesystem (its node stopped), before its folder goes."""
        if self._disk_mb:
            s.run(release_text(node.dir), sudo=True, timeout=60)

    def _mount(self, node_id: str) -> tuple[Session, str]:
        problem = self._disk_problem()
        if problem:
            raise ClusterError(problem)
        if node_id not in self._nodes:
            raise ClusterError(f"no node {node_id!r} in this cluster ({', '.join(self._nodes)})")
        return self.sessions[node_id], f"{self._nodes[node_id].dir}/data"

    def fill_disk(self, node_id: str) -> None:
        s, mount = self._mount(node_id)
        s.run(fill_text(mount), timeout=120)

    def free_disk(self, node_id: str) -> None:
        s, mount = self._mount(node_id)
        s.run(free_text(mount), timeout=60)


def sweep_disks(s: Session, root: bool) -> list[str]:
    """Release what crashed runs left mounted or attached on ``s``'s host (``root``: the
    user is root or may sudo; else nothing can have been mounted)."""
    if not root:
        return []
    return s.run(sweep_text(s.host.data_dir), sudo=True, timeout=120).out.splitlines()
