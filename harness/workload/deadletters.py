"""Dead-lettering, as the workload records it in the history.

A queue with ``max_deliveries`` moves a message out when a claim reaches it after that
many claims; nobody asks for it. The harness records it on the claim that did it: the
claim's ``ok`` value lists the moved messages in ``dead_lettered`` (the transport's
``on_dead_letter`` callback, :func:`harness.subjects.note_dead_letter`, collected per
claim through a context variable, so threads and asyncio tasks sharing one transport
each see their own claim's). A claim whose outcome is unknown may have moved messages
unseen; so after the drain the workload reads the whole dead-letter queue once
(``read-dead-letters``, :func:`read_queue`). :mod:`harness.checker.deadletters` judges
what is recorded.
"""

from __future__ import annotations

import json
from typing import Any

from ..history import READ_DEAD_LETTERS
from ..subjects import DEAD_LETTERS


def begin() -> None:
    """A claim starts in this thread or task: collect what it dead-letters."""
    DEAD_LETTERS.set([])


def taken() -> list[dict[str, Any]]:
    """What the current claim dead-lettered, as the history records it (and stop
    collecting)."""
    found = DEAD_LETTERS.get() or []
    DEAD_LETTERS.set(None)
    return [describe(dead) for dead in found]


def describe(dead: Any) -> dict[str, Any]:
    """A dead letter as the history records it: ``group``, ``msg``, ``seq``, ``deliveries``."""
    try:
        doc = json.loads(dead.event)
    except (TypeError, ValueError):
        doc = None
    msg = doc.get("msg") if isinstance(doc, dict) else None
    return {"group": dead.group_id, "msg": msg, "seq": dead.seq, "deliveries": dead.deliveries}


def is_poison(event: str) -> bool:
    try:
        doc = json.loads(event)
    except (TypeError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("poison") is True


def read_queue(client: Any, call: Any, process: int) -> None:
    """Record the whole dead-letter queue once (``read-dead-letters``) and close ``client``;
    ``call`` is the workload's ``_call(process, f, value, fn, ok_value)``."""

    def read_all() -> list[Any]:
        found: list[Any] = []
        while True:
            page = client.dead_letters(after=found[-1].seq if found else 0, limit=1000)
            found.extend(page)
            if len(page) < 1000:
                return found

    def ok_value(_value: Any, found: list[Any]) -> dict[str, Any]:
        return {"messages": [describe(d) for d in found]}

    try:
        call(process, READ_DEAD_LETTERS, {}, read_all, ok_value)
    finally:
        client.close()
