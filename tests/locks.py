"""Locks between the suite's pytest-xdist workers (and other test sessions on the machine).

:func:`held` takes an exclusive (or a shared) ``flock`` on a file, waiting a bounded time
for it and saying what it waited for when it gives up. :func:`session_dir` is the folder that every
worker of one session shares (the parent of their own temporary folders).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

#: seconds between tries of a lock another process holds
_POLL = 0.1


@contextlib.contextmanager
def held(path: Path, what: str, timeout: float, shared: bool = False) -> Iterator[None]:
    """Hold the exclusive lock on ``path`` (created if missing) inside the block; with
    ``shared``, a shared one (many holders at once, none while an exclusive one is held)."""
    deadline = time.monotonic() + timeout
    with open(path, "a") as f:
        while True:
            try:
                fcntl.flock(f, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"waited {timeout:g} s for {what} (the lock {path} is held by another "
                        "test process)"
                    ) from None
                time.sleep(_POLL)  # poll a lock with a deadline: flock has no timeout
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def session_dir(factory: pytest.TempPathFactory) -> Path:
    """The temporary folder all workers of this session share (their own when alone)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
