"""``python -m rqueue exporter``: every queue's depth, served for Prometheus.

Every ``--interval`` seconds (default 15) one reading of the queues: without ``--queue``,
every queue of the database (``queues``' listing and one read of all their counters,
:func:`rqueue._queues.list_queues`); with it, that queue's ``stats()``. A scrape is
answered from the latest reading, so scrapes cost the nodes nothing, and however many
Prometheus servers scrape, the nodes are read once per interval. A reading that fails
(the nodes unreachable, the queue missing) sets ``rqueue_up`` to 0 and drops the queues'
series until one succeeds again (stale figures would read as a quiet queue); the change
is logged once, not at every interval. The nodes need not answer at start: the exporter
keeps trying. SIGTERM or SIGINT ends it (exit 0). A bad argument exits 2 with one line,
before anything is read or listened on. docs/metrics.md lists every metric.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from . import _metrics
from ._exceptions import RqueueError, StatementError
from ._models import Stats
from ._queues import DEFAULT, not_found

OK, USAGE = 0, 2
log = logging.getLogger("rqueue.exporter")

#: the queue gauges: name, help, and how each is read from a :class:`Stats`
GAUGES: tuple[tuple[str, str, Any], ...] = (
    (
        "rqueue_queue_messages",
        "The queue's depth: messages ready, leased or parked (not dead-lettered).",
        lambda s: s.queued,
    ),
    ("rqueue_queue_ready_messages", "Messages a claim could take.", lambda s: s.ready),
    ("rqueue_queue_leased_messages", "Messages leased to a worker.", lambda s: s.leased),
    (
        "rqueue_queue_parked_messages",
        "Messages parked: nacked with a delay, or delayed at their group's head.",
        lambda s: s.parked,
    ),
    (
        "rqueue_queue_dead_lettered_messages",
        "Messages in the dead-letter queue.",
        lambda s: s.dead_lettered,
    ),
    ("rqueue_queue_groups", "Groups with messages queued.", lambda s: s.groups),
    (
        "rqueue_queue_oldest_ready_age_seconds",
        "Seconds since the oldest ready message was published (0: none ready).",
        lambda s: s.oldest_ready_age or 0.0,
    ),
)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``exporter`` command's arguments."""
    e = sub.add_parser(
        "exporter",
        parents=[common],
        help="serve every queue's depth for Prometheus (--queue: one queue's)",
        description="Serve the depth of every queue of the database (of the --queue given, "
        "if one is) for Prometheus, read every --interval seconds; docs/metrics.md lists "
        "the metrics.",
    )
    e.add_argument(
        "--metrics-addr",
        required=True,
        metavar="[HOST:]PORT",
        help="serve at http://HOST:PORT/metrics (a bare PORT: 127.0.0.1; needs rqueue[metrics])",
    )
    e.add_argument(
        "--interval",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="read the queues every SECONDS (default 15)",
    )


class Exporter:
    """The queues' latest reading, as a ``prometheus_client`` collector.

    ``connect(settings)`` makes the operator's API over the nodes
    (:class:`rqueue._cli_http.CliQueue`); it is made again after it failed to connect.
    """

    def __init__(
        self, settings: Any, queue: str | None, registry: Any, connect: Any = None
    ) -> None:
        from prometheus_client import Counter

        if connect is None:
            from ._cli_http import CliQueue

            connect = CliQueue
        self._settings = settings
        self._queue = queue
        self._connect = connect
        self._api: Any = None
        self._lock = threading.Lock()
        self._stats: dict[str, Stats] | None = None
        self._duration: float | None = None
        self._success: float | None = None
        self.problem: str | None = None
        self._reads = Counter("rqueue_exporter_reads", "Readings of the queues.", registry=registry)
        self._errors = Counter(
            "rqueue_exporter_read_errors", "Readings of the queues that failed.", registry=registry
        )
        registry.register(self)

    @property
    def nodes(self) -> tuple[str, ...]:
        """The node URLs read (without user info)."""
        return tuple(self._settings.urls)

    def read(self) -> str | None:
        """Read the queues once; the failure's one line (None: read)."""
        start = time.monotonic()
        try:
            if self._api is None:
                self._api = self._connect(self._settings)
            stats, problem = self._read(self._api), None
        except (RqueueError, ValueError, TypeError) as exc:
            stats, problem = None, str(exc)
        with self._lock:
            self._stats = stats
            self._duration = time.monotonic() - start
            if stats is not None:
                self._success = time.time()
        self._reads.inc()
        if problem is not None:
            self._errors.inc()
        if problem != self.problem:
            if problem is not None:
                log.warning("reading the queues failed: %s (rqueue_up is 0)", problem)
            else:
                log.info("reading the queues again (rqueue_up is 1)")
        self.problem = problem
        return problem

    def _read(self, api: Any) -> dict[str, Stats]:
        if self._queue is None:
            return {q.name: q.stats for q in api.queues() if q.stats is not None}
        try:
            return {self._queue: api.stats()}
        except StatementError as exc:
            if "no such table" in str(exc) and self._queue != DEFAULT:
                raise ValueError(not_found(self._queue)) from None
            raise

    def close(self) -> None:
        if self._api is not None:
            self._api.close()

    # -- the collector --------------------------------------------------------------------
    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        with self._lock:
            stats, duration, success = self._stats, self._duration, self._success
        yield GaugeMetricFamily(
            "rqueue_up", "1: the latest reading of the queues answered; 0: it failed.",
            value=0 if stats is None else 1,
        )  # fmt: skip
        if duration is not None:
            yield GaugeMetricFamily(
                "rqueue_exporter_read_duration_seconds",
                "How long the latest reading of the queues took.",
                value=duration,
            )
        if success is not None:
            yield GaugeMetricFamily(
                "rqueue_exporter_last_success_timestamp_seconds",
                "When the latest reading that answered ended (Unix time).",
                value=success,
            )
        if stats is None:
            return
        for name, doc, of in GAUGES:
            family = GaugeMetricFamily(name, doc, labels=["queue"])
            for queue in sorted(stats):
                family.add_metric([queue], float(of(stats[queue])))
            yield family


def _problem(args: argparse.Namespace) -> str | None:
    from ._cli_check import connection, options, seconds

    return (
        options(args, "timeout", "queue")
        or seconds("--interval", args.interval)
        or connection(args, prompt=False)
    )


def run(args: argparse.Namespace) -> int:
    """Check everything, listen, read every interval until a signal; the exit status."""
    from ._cli_check import settings

    problem = _problem(args)
    server = None
    if problem is None:
        try:
            address = _metrics.parse_address(args.metrics_addr)
            registry = _metrics.registry()
            exporter = Exporter(settings(args), args.queue, registry)
            server = _metrics.Server(address, registry)
        except ValueError as exc:
            problem = str(exc)
    if problem is not None or server is None:
        print(f"error: {problem}", file=sys.stderr)
        return USAGE
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr
    )
    which = "every queue" if args.queue is None else f"queue {args.queue}"
    nodes = ", ".join(exporter.nodes)
    log.info("metrics at %s: %s of %s, read every %g s", server.url, which, nodes, args.interval)
    stop = threading.Event()

    def on_signal(*_: Any) -> None:
        # not stop.set() here: the handler may run while this thread holds the event's lock
        threading.Thread(target=stop.set, daemon=True).start()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    reader = threading.Thread(
        target=_read_until, args=(exporter, stop, args.interval), name="rqueue-exporter"
    )
    reader.daemon = True  # a read in flight at a stop is not waited for
    reader.start()
    try:
        stop.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        server.close()
    log.info("stopped")
    return OK


def _read_until(exporter: Exporter, stop: threading.Event, interval: float) -> None:
    """Read, then wait ``interval`` seconds (the polling period asked for), until ``stop``."""
    while not stop.is_set():
        exporter.read()
        stop.wait(interval)
