"""The drain: after the faults are healed, claim and ack until the queue's ``messages``
table is empty (waiting out parks and lapsed leases), within a deadline.

Poison messages are nacked (with an error) by the drain too, so only the queue's
``max_deliveries`` takes them out; then the drain ends with one read of the dead-letter
queue (:mod:`harness.workload.deadletters`).
"""

from __future__ import annotations

import collections
import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..scenario import WorkloadSpec
from . import deadletters
from .record import Ops, WorkloadError, call, claimed, lease_value

#: the count of messages left: ``pending(urls, timeout)`` (None if no node answers)
Pending = Callable[[Sequence[str], float], "int | None"]


def drain(
    ops: Ops,
    open_client: Callable[[str], Any],
    spec: WorkloadSpec,
    urls: Sequence[str],
    *,
    timeout: float,
    pending: Pending,
    dead_letters: bool,
    bound: float,
    workers: int = 3,
) -> DrainResult:
    """Claim and ack with ``workers`` threads (clients from ``open_client(name)``) until
    ``pending`` says no message is left, or ``bound`` seconds pass; with ``dead_letters``,
    then read the dead-letter queue once. ``timeout`` is one request's."""
    deadline = time.monotonic() + bound
    started = time.monotonic()
    done = threading.Event()
    acked = collections.Counter()
    errors: list[BaseException] = []

    def drainer(i: int) -> None:
        name = f"d{i}"
        try:
            client = open_client(name)
        except BaseException as e:  # reported below, like a failure while draining
            errors.append(e)
            return
        process = ops.new_process()
        try:
            while not done.is_set() and time.monotonic() < deadline:
                vis = spec.visibility
                kind, lease, process = call(
                    ops,
                    process,
                    "claim",
                    {"visibility": vis, "min_priority": 0},
                    lambda vis=vis: client.claim(name, vis, 0),
                    claimed(vis),
                )
                if lease is not None and deadletters.is_poison(lease.event):
                    _, _, process = call(
                        ops,
                        process,
                        "nack",
                        {**lease_value(lease), "delay": 0, "error": "poison"},
                        lambda lease=lease: client.nack(lease, 0, "poison"),
                    )
                    continue
                if lease is not None:
                    k, _, process = call(
                        ops,
                        process,
                        "ack",
                        lease_value(lease),
                        lambda lease=lease: client.ack(lease),
                    )
                    acked[k] += 1
                    continue
                if kind == "ok" and pending(urls, timeout) == 0:
                    done.set()
                    return
                done.wait(spec.idle_pause * 2)
        except BaseException as e:
            errors.append(e)
        finally:
            client.close()

    threads = [threading.Thread(target=drainer, args=(i,), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()) + 3 * timeout)
    done.set()  # a drainer still in a call stops after it
    if errors:
        raise WorkloadError(f"drain failed: {type(errors[0]).__name__}: {errors[0]}")
    if dead_letters:
        read = functools.partial(call, ops)
        deadletters.read_queue(open_client("dead-letters"), read, ops.new_process())
    left = pending(urls, timeout)
    return DrainResult(
        complete=left == 0,
        remaining=left,
        acked=acked["ok"],
        seconds=time.monotonic() - started,
    )


@dataclass(frozen=True)
class DrainResult:
    complete: bool
    remaining: int | None  # None: no node answered the count
    acked: int
    seconds: float


def pending_messages(urls: Sequence[str], timeout: float = 5.0) -> int | None:
    """``SELECT COUNT(*) FROM messages`` through the leader (None if no node answers)."""
    import requests

    for url in urls:
        try:
            r = requests.post(
                f"{url.rstrip('/')}/db/query?level=strong",
                json=[["SELECT COUNT(*) FROM messages"]],
                timeout=timeout,
            )
            result = r.json()["results"][0]
            if r.status_code == 200 and "error" not in result:
                return int(result["values"][0][0])
        except (requests.RequestException, ValueError, KeyError, IndexError):
            continue
    return None
