"""The worker's metrics (``python -m rqueue worker --metrics-addr``): an observer
(:class:`rqueue._worker_core.Observer`) that counts the worker's queue calls as they
complete, and times each handler from its claim's answer to its settle.

A slot's calls never overlap, and a slot holds one lease at a time: a claim's answer on
a slot starts the clock of that slot's lease, and the next ``ack`` or ``nack`` asked for
on that slot stops it (the handler's run, plus the microseconds in which the worker
notes it; for a failed handler, the writing of its log line too). A ``nack`` without an
error is a message given back unhandled at a stop (:meth:`WorkerCore._give_back`): it
counts as released, with no handler time. The transport's ``on_dead_letter`` calls
:meth:`WorkerMetrics.dead_lettered` for each message the worker's claims move to the
dead-letter queue. docs/metrics.md lists every metric.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ._exceptions import LeaseLost
from ._models import DeadLetter, Lease

#: handler time buckets (seconds): from a few milliseconds to the ten minutes a long job
#: may hold its lease through heartbeats
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
#: the queue calls a worker makes (``call`` label of the errors)
CALLS = ("claim", "ack", "nack", "extend")
#: why a message was nacked (``reason`` label): its handler raised, or it was given back
REASONS = ("failed", "released")
#: why a claim moved a message to the dead-letter queue (``reason`` label)
DEAD_REASONS = ("max_deliveries", "retention")


@dataclass
class _Held:
    """The lease a slot holds: since when (monotonic), and whether it was seen lost."""

    since: float
    lost: bool = False


class WorkerMetrics:
    """Counts what a worker does, in ``registry`` (a ``prometheus_client`` registry),
    labelled with ``queue``; ``inner``, another observer (``--observer``), sees every
    call too, after this one."""

    def __init__(self, registry: Any, queue: str, inner: Any = None) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        self.inner = inner
        self._held: dict[int, _Held] = {}

        def counter(name: str, doc: str, *labels: str) -> Any:
            return Counter(name, doc, ["queue", *labels], registry=registry)

        self.claims = counter("rqueue_worker_claims_total", "Claims that leased a message.")
        self.acks = counter("rqueue_worker_acks_total", "Acks that deleted a handled message.")
        self.nacks = counter(
            "rqueue_worker_nacks_total",
            "Nacks that gave a message back: its handler failed, or a stop released it.",
            "reason",
        )
        self.failures = counter("rqueue_worker_failures_total", "Handlers that raised.")
        self.extensions = counter(
            "rqueue_worker_lease_extensions_total", "Heartbeats that extended a lease."
        )
        self.lost = counter(
            "rqueue_worker_leases_lost_total",
            "Leases found lost (lapsed and taken by another claim) by an extend, ack or nack.",
        )
        self.errors = counter(
            "rqueue_worker_call_errors_total", "Queue calls that failed, by call.", "call"
        )
        self.dead = counter(
            "rqueue_worker_dead_letters_total",
            "Messages this worker's claims moved to the dead-letter queue, by reason.",
            "reason",
        )
        self.held = Gauge(
            "rqueue_worker_leases_held", "Messages leased and not yet settled.", ["queue"],
            registry=registry,
        )  # fmt: skip
        self.handler_time = Histogram(
            "rqueue_worker_handler_duration_seconds",
            "Handler time: from the claim's answer to the ack or nack asked for.",
            ["queue"],
            buckets=BUCKETS,
            registry=registry,
        )
        self.queue = queue
        # every series from the first scrape on, at 0: rate() needs its start
        for m in (self.claims, self.acks, self.failures, self.extensions, self.lost):
            m.labels(queue)
        for reason in REASONS:
            self.nacks.labels(queue, reason)
        for reason in DEAD_REASONS:
            self.dead.labels(queue, reason)
        for call in CALLS:
            self.errors.labels(queue, call)
        self.held.labels(queue)
        self.handler_time.labels(queue)

    def dead_lettered(self, d: DeadLetter) -> None:
        """A claim moved ``d`` (the transport's ``on_dead_letter``)."""
        reason = "retention" if d.reason == "retention" else "max_deliveries"
        self.dead.labels(self.queue, reason).inc()

    # -- the observer protocol ----------------------------------------------------------
    def invoke(self, slot: int, f: str, value: dict[str, Any]) -> Any:
        held = None
        if f in ("ack", "nack"):
            held = self._held.pop(slot, None)
            if held is not None:
                self.held.labels(self.queue).dec()
                failed = "error" in value
                if failed:
                    self.failures.labels(self.queue).inc()
                if f == "ack" or failed:
                    self.handler_time.labels(self.queue).observe(time.monotonic() - held.since)
        elif f == "extend":
            held = self._held.get(slot)
        inner = None if self.inner is None else self.inner.invoke(slot, f, value)
        return (slot, f, value, held, inner)

    def complete(self, handle: Any, result: Any, error: BaseException | None) -> None:
        slot, f, value, held, inner = handle
        q = self.queue
        if error is not None:
            self.errors.labels(q, f).inc()
            if isinstance(error, LeaseLost) and not (held is not None and held.lost):
                self.lost.labels(q).inc()
                if held is not None:
                    held.lost = True
        elif f == "claim" and isinstance(result, Lease):
            self.claims.labels(q).inc()
            self._held[slot] = _Held(time.monotonic())
            self.held.labels(q).inc()
        elif f == "ack":
            self.acks.labels(q).inc()
        elif f == "nack":
            self.nacks.labels(q, "failed" if "error" in value else "released").inc()
        elif f == "extend":
            self.extensions.labels(q).inc()
        if self.inner is not None:
            self.inner.complete(inner, result, error)
