"""The harness's side inside a ``python -m rqueue worker`` process (the ``worker`` scenario).

The run starts worker processes as::

    python -m rqueue worker harness.workload.in_worker:handle \\
        --observer harness.workload.in_worker:Reporter ...

:func:`handle` (or :func:`handle_async`) "works" on each message as the scenario plans
(a random time, sometimes longer than the visibility so that the worker's heartbeat must
extend the lease; sometimes it fails, so the worker nacks). :class:`Reporter` sees every
queue call the worker makes and reports it to the run over a Unix socket
(:data:`SOCKET_ENV`), one JSON line each (:mod:`harness.workload.processes` records them):

* ``{"i": N, "slot": S, "f": F, "value": V}`` before the call; the worker waits for the
  run's ``{"i": N}`` before sending the call, so the run's ``invoke`` is never later
  than the call itself;
* ``{"c": N, "type": T, "value": V, "error": E}`` after it (recorded when it arrives,
  so never earlier than the call ended), with ``"refused": true`` for a call the queue
  refused on purpose (:func:`harness.workload.record.is_refusal`).

The plan comes from :data:`PLAN_ENV` (JSON: ``work``, ``fail``, ``long``,
``visibility``). When the run's socket goes away, the process exits at once: nobody
records its calls any more.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import threading
import time
from typing import Any

from rqueue import Lease

from .record import failure_kind, is_refusal, lease_value
from .text import digest

SOCKET_ENV = "HARNESS_WORKER_SOCKET"
PLAN_ENV = "HARNESS_WORKER_PLAN"
#: the exit status of a worker whose run went away
ORPHANED = 3

_rng = random.Random()
_rng_lock = threading.Lock()


def _plan() -> dict[str, Any]:
    return json.loads(os.environ.get(PLAN_ENV) or "{}")


def _job(lease: Lease) -> tuple[float, bool]:
    """How long to work on ``lease`` and whether to fail it (poison always fails)."""
    plan = _plan()
    try:
        doc = json.loads(lease.event)
    except ValueError:
        doc = {}
    with _rng_lock:
        low, high = plan.get("work", (0.0, 0.1))
        work = _rng.uniform(low, high)
        if _rng.random() < plan.get("long", 0.0):
            work = plan.get("visibility", 3.0) * _rng.uniform(0.8, 1.6)
        fail = _rng.random() < plan.get("fail", 0.0)
    return work, fail or bool(isinstance(doc, dict) and doc.get("poison"))


def handle(lease: Lease) -> None:
    """A sync handler: work as planned; raise to have the worker nack."""
    work, fail = _job(lease)
    time.sleep(work)  # the job's "work": what the scenario measures is the queue around it
    if fail:
        raise RuntimeError(f"planned failure of message {lease.seq}")


async def handle_async(lease: Lease) -> None:
    """The coroutine twin of :func:`handle` (the worker runs it on asyncio tasks)."""
    work, fail = _job(lease)
    await asyncio.sleep(work)
    if fail:
        raise RuntimeError(f"planned failure of message {lease.seq}")


def history_value(f: str, value: dict[str, Any]) -> dict[str, Any]:
    """A worker call's arguments as the history's invoke value."""
    if f == "claim":
        return {"visibility": value["visibility"], "min_priority": value["min_priority"]} | {
            "wait": value.get("wait")
        }
    out = lease_value(value["lease"])
    for key in ("delay", "visibility", "error"):
        if key in value and value[key] is not None:
            out[key] = value[key]
    return out


def ok_value(f: str, invoked: dict[str, Any], result: Any) -> Any:
    """A completed call's ok value: a claim's lease, else what was invoked."""
    if f != "claim":
        return invoked
    if result is None:
        return None
    out: dict[str, Any] = {**lease_value(result), "visibility": invoked["visibility"]}
    body = digest(result.event)
    if body is not None:
        out["digest"] = body
    if isinstance(result.expires_at, int | float):
        out["expires_at"] = result.expires_at
    return out


class Reporter:
    """The worker's observer (:class:`rqueue._worker_core.Observer`): reports each call
    to the run and waits for the run to record an invoke before the call goes out."""

    def __init__(self, path: str | None = None) -> None:
        path = path or os.environ.get(SOCKET_ENV)
        if not path:
            raise RuntimeError(f"Reporter: ${SOCKET_ENV} names no socket")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        self._reader = self._sock.makefile("rb")
        self._lock = threading.Lock()
        self._next = 0

    def _send(self, message: dict[str, Any], reply: bool) -> None:
        line = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        try:
            self._sock.sendall(line)
            if reply and not self._reader.readline():
                raise ConnectionError("the run closed the socket")
        except OSError:
            os._exit(ORPHANED)  # nobody records this worker's calls any more

    def invoke(self, slot: int, f: str, value: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
        invoked = history_value(f, value)
        with self._lock:
            self._next += 1
            n = self._next
            self._send({"i": n, "slot": slot, "f": f, "value": invoked}, reply=True)
        return n, f, invoked

    def complete(
        self, handle: tuple[int, str, dict[str, Any]], result: Any, error: BaseException | None
    ) -> None:
        n, f, invoked = handle
        if error is None:
            message = {"c": n, "type": "ok", "value": ok_value(f, invoked, result)}
        else:
            message = {
                "c": n,
                "type": failure_kind(error),
                "value": invoked,
                "error": f"{type(error).__name__}: {error}",
            }
            if message["type"] == "fail" and is_refusal(error):
                message["refused"] = True
        with self._lock:
            self._send(message, reply=False)
