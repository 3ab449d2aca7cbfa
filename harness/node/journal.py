"""The Raft journal on a disk that can fill up.

PySyncObj's ``FileJournal`` writes entries through a memory map of a file it grows
sparsely (its ``ResizableFile``); on a full filesystem a store into a page the filesystem
cannot back kills the process with SIGBUS (ext4 refuses the page fault: an unallocated
page, and even a reserved one whose extent needs a metadata block to convert), with the
entry already in the in-memory log. Two parts keep a full disk an ordinary error:

* :class:`PositionalFile` replaces the memory map: the same interface over ``pread`` and
  ``pwrite``, so a full disk (or a failing device) is an ``OSError`` from the write,
  never a signal;
* :class:`GuardedJournal` reserves an entry's bytes on disk (``posix_fallocate``) before
  the entry enters the log, so a full disk is a :class:`DiskFull` error raised before
  anything changed: hashicorp/raft's ``StoreLogs`` failing, which
  :class:`harness.node.raft.RaftStore` answers as rqlite does (docs/faults-disk.md).

Saving the commit index (once a second) may fail and is retried; saving the term and vote
raises, so the vote or candidacy that needed it is not sent.

:func:`install` makes PySyncObj create this journal on such files; it is called once when
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


class PositionalFile:
    """``pysyncobj.journal.ResizableFile``'s interface (``write``, ``read``, ``flush``,
    ``_destroy``) over ``pwrite`` and ``pread`` of one descriptor, without a memory map."""

    def __init__(
        self,
        fileName: str,
        initialSize: int = 1024,
        resizeFactor: float = 2.0,
        defaultContent: bytes | None = None,
    ) -> None:
        if not os.path.exists(fileName):
            with open(fileName, "wb") as f:
                if defaultContent is not None:
                    f.write(defaultContent)
        self.fd = os.open(fileName, os.O_RDWR)

    def write(self, offset: int, values: bytes) -> None:
        view = memoryview(values)
        while view:
            written = os.pwrite(self.fd, view, offset)
            view, offset = view[written:], offset + written

    def read(self, offset: int, size: int) -> bytes:
        data = os.pread(self.fd, size, offset)
        return data + b"\0" * (size - len(data))  # past the end reads as zeros, as a map's

    def flush(self) -> None:
        os.fsync(self.fd)

    def _destroy(self) -> None:
        os.close(self.fd)


class GuardedJournal(_journal.FileJournal):
    """A ``FileJournal`` whose appends reserve their bytes first (see the module)."""

    def __init__(self, path: str) -> None:
        _journal.ResizableFile = PositionalFile  # FileJournal makes its file by this name
        super().__init__(path)
        self._fd: int = self._FileJournal__journalFile.fd  # type: ignore[attr-defined]
        self._meta_failing = False

    def add(self, command: bytes, idx: int, term: int) -> None:
        size = _RECORD_OVERHEAD + len(_journal.to_bytes(command))
        offset = self._FileJournal__currentOffset  # type: ignore[attr-defined]
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


def _create(path: str | None = None) -> _journal.Journal:
    return _journal.MemoryJournal() if path is None else GuardedJournal(path)


def install() -> None:
    """Make every ``SyncObj`` created from now on use :class:`GuardedJournal`."""
    _syncobj.createJournal = _create
