"""Handlers that ``python -m rqueue worker`` runs in the worker tests (imported by name).

Each records what it did as lines appended to ``$WORKER_TEST_LOG``: ``start SEQ`` when a
message's handler begins and ``done SEQ`` when it returns. An event's ``sleep`` (seconds)
is how long its handler takes; ``fail`` makes it raise.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any


def _note(line: str) -> None:
    with open(os.environ["WORKER_TEST_LOG"], "a") as f:
        f.write(line + "\n")
        f.flush()


def slow(lease: Any) -> None:
    doc = json.loads(lease.event)
    _note(f"start {lease.seq}")
    time.sleep(doc.get("sleep", 0))  # the job's own work, as long as the test asks
    if doc.get("fail"):
        raise RuntimeError(f"job {doc.get('n')} failed on purpose")
    _note(f"done {lease.seq}")


async def slow_async(lease: Any) -> None:
    doc = json.loads(lease.event)
    _note(f"start {lease.seq}")
    await asyncio.sleep(doc.get("sleep", 0))
    _note(f"done {lease.seq}")


not_callable = 42


class Recorder:
    """An observer (``--observer``) that notes each call's name as ``call F``."""

    def invoke(self, slot: int, f: str, value: dict[str, Any]) -> str:
        return f

    def complete(self, handle: str, result: Any, error: BaseException | None) -> None:
        _note(f"call {handle} {'error' if error else 'ok'}")


class Broken:
    """An observer that cannot be made."""

    def __init__(self) -> None:
        raise RuntimeError("no recorder here")
