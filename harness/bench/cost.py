"""Where an operation's time goes: CPU of the client and of each node, bytes and requests.

The client and the nodes share the machine's cores, so every millisecond of CPU the
client spends per claim is taken from the cluster. A :class:`Meter` reads, at the start
and at the end of a load's measured window, this process's CPU time, each node
process's CPU time (``/proc/PID/stat``, so nodes of any engine) and, through a
:class:`WireCounter` wrapped around a client's HTTP session, the requests and bytes that
client sent and received. :func:`cost_row` turns two readings and the window's
operations into per-operation figures.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) used so far by process ``pid``; None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces: count fields after its closing paren
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


class WireCounter:
    """Counts the requests and bytes of the HTTP sessions it wraps (thread-safe)."""

    def __init__(self) -> None:
        self.requests = 0
        self.statements = 0
        self.bytes_out = 0
        self.bytes_in = 0
        #: every body sent, for the opcodes of a window's statements (counted after it)
        self.bodies: list[bytes] = []
        self._lock = threading.Lock()

    def add(self, body: bytes, received: int) -> None:
        # rqueue's bodies are lists of [sql, *params] lists: inside a JSON string a quote
        # is escaped, so each '["' starts one statement
        statements = body.count(b'["')
        with self._lock:
            self.requests += 1
            self.statements += statements
            self.bytes_out += len(body)
            self.bytes_in += received
            self.bodies.append(body)

    def reading(self) -> tuple[int, int, int, int, int]:
        with self._lock:
            return self.requests, self.statements, self.bytes_out, self.bytes_in, len(self.bodies)

    def opcodes(self, start: int, end: int) -> int | None:
        """The SQLite opcodes of the statements in bodies ``start`` to ``end``
        (:mod:`harness.bench.opcodes`); None if one is not rqueue's."""
        from .opcodes import rqueue_opcodes

        counter = rqueue_opcodes()
        total = 0
        for body in self.bodies[start:end]:
            n = counter.of_body(body)
            if n is None:
                return None
            total += n
        return total

    def wrap(self, client: Any) -> Any:
        """Count every request ``client`` (an rqueue transport) sends; returns ``client``.

        The transport's session has one method, ``request(method, url, path, body,
        timeout) -> Reply``; the wrapper adds the body's and the reply's sizes (the
        reply's text length: the answers are ASCII JSON); bytes are bodies only, without
        HTTP headers. Other subjects pass through.
        """
        session = getattr(client, "_session", None)
        if session is None or not hasattr(session, "request"):
            return client
        client._session = _CountedSession(session, self)
        return client


class _CountedSession:
    def __init__(self, inner: Any, counter: WireCounter) -> None:
        self._inner = inner
        self._counter = counter

    def request(self, method: str, url: str, path: str, body: Any, timeout: float) -> Any:
        reply = self._inner.request(method, url, path, body, timeout)
        self._counter.add(body or b"", len(reply.text))
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@dataclass
class Reading:
    """CPU and wire totals at one moment."""

    at: float
    client_cpu: float
    node_cpu: dict[str, float | None]
    wire: tuple[int, int, int, int, int]


@dataclass
class Meter:
    """Reads the costs at a load's window start and end (see :func:`watch`).

    ``nodes``: node URL -> pid (empty: node CPU is not measured, e.g. ``--urls``);
    ``leader``: the URL whose CPU is shown apart.
    """

    nodes: Mapping[str, int]
    leader: str | None = None
    wire: WireCounter = field(default_factory=WireCounter)
    readings: list[Reading] = field(default_factory=list)

    def read(self) -> None:
        self.readings.append(
            Reading(
                time.perf_counter(),
                time.process_time(),
                {url: process_cpu(pid) for url, pid in self.nodes.items()},
                self.wire.reading(),
            )
        )

    def watch(self, start: float, end: float) -> threading.Thread:
        """A thread that reads at ``start`` and at ``end`` (``perf_counter`` times)."""

        def run() -> None:
            for at in (start, end):
                delay = at - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)  # a scheduled reading, not a wait for a condition
                self.read()

        thread = threading.Thread(target=run, name="bench-meter", daemon=True)
        thread.start()
        return thread


def cost_row(meter: Meter, ops: int) -> dict[str, Any] | None:
    """Per-operation costs over the meter's window (its first two readings)."""
    if len(meter.readings) < 2 or ops <= 0:
        return None
    a, b = meter.readings[0], meter.readings[1]
    seconds = b.at - a.at
    requests = b.wire[0] - a.wire[0]
    nodes: dict[str, float] = {}
    for url, before in a.node_cpu.items():
        after = b.node_cpu.get(url)
        if before is not None and after is not None:
            nodes[url] = after - before
    row: dict[str, Any] = {
        "ops": ops,
        "seconds": round(seconds, 3),
        "client_cpu_ms": _per(b.client_cpu - a.client_cpu, ops, 1000.0),
        "requests_per_op": _per(requests, ops) if requests else None,
        "statements_per_op": _per(b.wire[1] - a.wire[1], ops) if requests else None,
        "opcodes_per_op": _opcodes(meter.wire, a.wire[4], b.wire[4], ops) if requests else None,
        "bytes_out_per_op": _per(b.wire[2] - a.wire[2], ops) if requests else None,
        "bytes_in_per_op": _per(b.wire[3] - a.wire[3], ops) if requests else None,
        "nodes_cpu_ms": _per(sum(nodes.values()), ops, 1000.0) if nodes else None,
        "leader_cpu_ms": (
            _per(nodes[meter.leader], ops, 1000.0) if meter.leader in nodes else None
        ),
        # the share of the machine's cores the client and the nodes kept busy
        "busy_cores": round(((b.client_cpu - a.client_cpu) + sum(nodes.values())) / seconds, 2)
        if seconds > 0
        else None,
    }
    return row


def _opcodes(wire: WireCounter, start: int, end: int, ops: int) -> float | None:
    total = wire.opcodes(start, end)
    return None if total is None else round(total / ops, 1)


def _per(total: float, ops: int, scale: float = 1.0) -> float:
    return round(total * scale / ops, 3)
