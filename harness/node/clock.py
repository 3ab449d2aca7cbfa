"""The node's wall clock: real time plus an offset read from a file (for clock-skew faults),
and the local time zone its rewritten ``'now'`` is read in (:mod:`.localzone`)."""

from __future__ import annotations

import logging
import os
import threading
import time

from .localzone import LocalZone

log = logging.getLogger(__name__)


class OffsetClockError(ValueError):
    """The clock-offset file does not hold a float number of seconds."""


def _parse_offset(path: str, text: str) -> float:
    stripped = text.strip()
    if not stripped:
        return 0.0
    try:
        return float(stripped)
    except ValueError:
        raise OffsetClockError(
            f"clock offset file {path} must hold a number of seconds, got {stripped[:40]!r}"
        ) from None


class OffsetClock:
    """``time.time()`` plus the offset in ``path``; re-read whenever the file changes
    (inode, mtime or size: writers replace it with ``os.replace``).

    A missing file means offset 0. A malformed file is an error at start-up; later on the
    previous offset is kept and the problem is logged, so a half-written file cannot stop
    the node.

    ``zone``: the node's local time zone (default UTC), decided once at start; rqlite's
    rewriting reads this clock in it (``zone.offset``), SQLite's own clock reads UTC.
    """

    def __init__(self, path: str | None = None, zone: LocalZone | None = None) -> None:
        self._path = path
        self.zone = zone if zone is not None else LocalZone.utc()
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._offset = 0.0
        if path is not None:
            self._refresh(strict=True)

    @property
    def offset(self) -> float:
        self._refresh(strict=False)
        return self._offset

    def now(self) -> float:
        """Epoch seconds as this node sees them."""
        return time.time() + self.offset

    def _refresh(self, strict: bool) -> None:
        if self._path is None:
            return
        try:
            st = os.stat(self._path)
            # the inode too: a file replaced within one tick of the (coarse) file clock
            # by one of the same size ("0.2" -> "0.0") has the same mtime and size
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp == self._stamp:
                return
            self._stamp = stamp
            if stamp is None:
                self._offset = 0.0
                return
            try:
                with open(self._path, encoding="utf-8") as fh:
                    self._offset = _parse_offset(self._path, fh.read())
            except (OSError, OffsetClockError) as exc:
                if strict:
                    raise
                log.warning("keeping clock offset %.3f s: %s", self._offset, exc)
