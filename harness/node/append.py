"""Raft's rule for an ``append_entries`` whose ``prevLogIdx`` matches (pure).

PySyncObj deletes everything after ``prevLogIdx`` whenever its log goes further, even
when the entries there equal the leader's. A stale or repeated message (the leader walks
``nextIndex`` back on every late "reset" answer, and pipelines several messages) then cuts
entries the follower already acknowledged: the leader keeps counting them in its
``matchIndex``, commits them, and a follower killed before they are sent again has lost a
committed entry; the next leader can then overwrite what was applied. Raft (and
hashicorp/raft's ``appendEntries``) deletes only from the first entry that conflicts
(same index, another term) and keeps what matches: :func:`plan` says which part of a
message is new.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Plan:
    """What is left of a message once the entries this log already holds are skipped:
    the entry they follow (``prev_idx``, ``prev_term``) and the new ones; ``end`` is the
    index of the message's last entry (``prev_idx`` of the message when it has none)."""

    prev_idx: int
    prev_term: int
    entries: list[Any]
    end: int


def plan(
    prev_idx: int,
    prev_term: int,
    entries: Sequence[Any],
    term_at: Callable[[int], int | None],
) -> Plan | None:
    """The new part of ``entries`` (tuples ``(command, index, term)`` following
    ``prev_idx``); ``term_at(i)`` is this log's term at index ``i`` or None past its end.
    None when ``prev_idx`` does not match here (PySyncObj's own answer applies)."""
    if term_at(prev_idx) != prev_term:
        return None
    last_idx, last_term = prev_idx, prev_term
    for k, entry in enumerate(entries):
        idx, term = entry[1], entry[2]
        if term_at(idx) != term:  # past the end of this log, or a conflict
            return Plan(last_idx, last_term, list(entries[k:]), entries[-1][1])
        last_idx, last_term = idx, term
    return Plan(last_idx, last_term, [], last_idx)
