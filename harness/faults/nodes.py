"""One step on several nodes, as the kinds' windows take it: each node's start in turn,
those done undone when one fails (:func:`start_each`), and the end on every node, also
after one fails, the failures named together (:func:`on_every_node`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from ..cluster.base import ClusterError

log = logging.getLogger(__name__)


def on_every_node(
    what: str, nodes: Sequence[str], step: Callable[[str], object], *, together: bool = False
) -> None:
    """``step`` on every node (``together``: all at once, a thread each), also after one
    fails; then :class:`ClusterError` "could not ``what`` n1: why; n2: why"."""
    failed: list[str] = []

    def one(n: str) -> None:
        try:
            step(n)
        except Exception as e:
            failed.append(f"{n}: {e}")

    if together:
        threads = [threading.Thread(target=one, args=(n,)) for n in nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for n in nodes:
            one(n)
    if failed:
        raise ClusterError(f"could not {what} {'; '.join(sorted(failed) if together else failed)}")


def start_each(
    what: str,
    nodes: Sequence[str],
    step: Callable[[str], object],
    undo: Callable[[Sequence[str]], None],
    *,
    undo_failed: bool = False,
) -> None:
    """``step`` on each node in turn; when one fails, ``undo`` the nodes done (with the
    one that failed: ``undo_failed``, for a step that may have half happened), as a
    window whose start failed is never undone, then raise what failed (``what``: the
    step in words, for the log when the undoing fails too)."""
    for i, n in enumerate(nodes):
        try:
            step(n)
        except Exception:
            try:
                undo(nodes[: i + 1] if undo_failed else nodes[:i])
            except ClusterError:
                log.exception("after a failed %s of %s", what, n)
            raise
