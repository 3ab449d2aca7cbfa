"""The Raft journal on a disk that can fill up.

PySyncObj's ``FileJournal`` writes entries through a memory map of a file it grows
sparsely; on a full filesystem the first store into an unallocated page kills the process
with SIGBUS (ext4 refuses the page fault), and the entry is already in the in-memory log.
:class:`GuardedJournal` reserves an entry's bytes on disk (``posix_fallocate``) before the
entry enters the log, so a full disk is an ordinary :class:`DiskFull` error instead, raised
before anything changed: hashicorp/raft's ``StoreLogs`` failing, which
:class:`harness.node.raft.RaftStore` answers as rqlite does (docs/faults-disk.md). Saving
the commit index (once a second) may fail and is retried; saving the term and vote raises,
so the vote or candidacy that needed it is not sent.

:func:`install` makes PySyncObj create this journal; it is called once when
:mod:`harness.node.raft` is imported (the node is a process of its own).
"""

from __future__ import annotations

import errno
import logging
import os

from pysyncobj import journal as _journal
from pysyncobj import syncobj as _syncobj

log = logging.getLogger(__name__)

#: the errors a full filesystem (or quota) gives
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
#: bytes around each record: its length before and after, its index and term
_RECORD_OVERHEAD = 4 + 16 + 4


class DiskFull(OSError):
    """The journal could not reserve room for an entry (or its metadata): nothing changed."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a full filesystem's error."""
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


class GuardedJournal(_journal.FileJournal):
    """A ``FileJournal`` whose appends reserve their bytes first (see the module)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._fd = os.open(path, os.O_RDWR)
        self._meta_failing = False

    def add(self, command: bytes, idx: int, term: int) -> None:
        size = _RECORD_OVERHEAD + len(_journal.to_bytes(command))
        offset = self._FileJournal__currentOffset  # type: ignore[attr-defined]
        # grow the map (and the file, sparsely: no blocks) first, as ResizableFile would,
        # so that the reservation below stays inside the file and the map covers it
        mm = self._FileJournal__journalFile._ResizableFile__mm  # type: ignore[attr-defined]
        if offset + size > len(mm):
            mm.resize(max(int(len(mm) * 2), offset + size))
        try:
            os.posix_fallocate(self._fd, offset, size)
        except OSError as exc:
            if exc.errno in FULL_ERRNOS:
                raise DiskFull(exc.errno, f"raft journal: entry {idx}: {exc.strerror}") from None
            raise
        super().add(command, idx, term)

    def onOneSecondTimer(self) -> None:
        """Save the commit index when it changed; on a full disk, keep it and retry (a
        stale one only makes a restarted node wait for its leader to apply)."""
        try:
            super().onOneSecondTimer()
        except OSError as exc:
            if exc.errno not in FULL_ERRNOS:
                raise
            if not self._meta_failing:
                log.warning("raft journal: cannot save the commit index: %s", exc.strerror)
            self._meta_failing = True
        else:
            self._meta_failing = False

    def _destroy(self) -> None:
        super()._destroy()
        os.close(self._fd)


def _create(path: str | None = None) -> _journal.Journal:
    return _journal.MemoryJournal() if path is None else GuardedJournal(path)


def install() -> None:
    """Make every ``SyncObj`` created from now on use :class:`GuardedJournal`."""
    _syncobj.createJournal = _create
