"""Leaving quietly when standard output's reader goes away (``python -m rqueue queues |
head -2``), as Unix tools do: no traceback, exit status 141 (128 + SIGPIPE, what a shell
shows for a tool the signal ended). Shared by ``python -m rqueue`` and ``python -m
harness`` (the harness imports it from here: rqueue never imports the harness)."""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable

#: standard output's reader went away: 128 + SIGPIPE, as a Unix tool gets
EXIT_STDOUT_CLOSED = 141


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def quiet_when_stdout_closes(main: Callable[[], int]) -> int:
    """Run ``main`` and return its status; when its standard output's reader goes away,
    stop without a traceback and return :data:`EXIT_STDOUT_CLOSED`. Whatever ``main``
    started unwinds as for any exception on the way out; a broken pipe that is not
    standard output's propagates unchanged."""
    try:
        try:
            return main()
        finally:  # a SystemExit (--help) flushes here too, not after the interpreter's end
            sys.stdout.flush()
    except BrokenPipeError:
        if not _stdout_closed():
            raise
        # nothing more can reach the reader: later writes (the interpreter's last flush
        # included) go nowhere instead of raising again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_STDOUT_CLOSED
