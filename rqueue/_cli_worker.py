"""``python -m rqueue worker MODULE:HANDLER``: run a handler per message until stopped.

A coroutine handler runs on :class:`~rqueue.AsyncWorker` over the asyncio transport,
any other callable on :class:`~rqueue.Worker`'s threads over the blocking one. SIGTERM
or SIGINT stops the claiming and gives the running handlers ``--grace`` seconds; what
is still held then is given back, and the command exits 0. A second signal ends the
grace period at once. A configuration error (a handler that cannot be loaded, a bad
URL, a bad number) exits 2 with one line saying what is wrong, before anything is sent;
nodes that cannot be reached exit 1. ``--metrics-addr`` serves the worker's metrics
(:mod:`rqueue._metrics_worker`) for Prometheus while it works; a bad address, one already
taken, or a missing ``prometheus_client`` is a configuration error too.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import logging
import os
import sys
from typing import Any

from . import _metrics
from ._exceptions import RqueueError
from ._metrics import Address, parse_address
from ._metrics_worker import WorkerMetrics
from ._models import DeadLetter
from ._queues import display
from ._worker_core import Options, failure_text, load_handler

OK, FAILED, USAGE = 0, 1, 2


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``worker`` command's arguments."""
    w = sub.add_parser(
        "worker", parents=[common], help="run MODULE:HANDLER for each message until stopped"
    )
    w.add_argument("handler", metavar="MODULE:HANDLER", help="called with each rqueue.Lease")
    w.add_argument("--concurrency", type=int, default=1, help="messages at once (default 1)")
    w.add_argument(
        "--visibility", type=float, default=30.0, help="lease seconds, extended while running"
    )
    w.add_argument(
        "--max-deliveries", type=int, default=None, help="dead-letter after this many claims"
    )
    w.add_argument(
        "--max-age",
        type=float,
        default=None,
        metavar="SECONDS",
        help="retention: dead-letter a message still queued this long after it was due "
        "(at the next claim that reaches it; default: kept until handled)",
    )
    w.add_argument(
        "--grace", type=float, default=30.0, help="seconds to finish after SIGTERM (default 30)"
    )
    w.add_argument(
        "--retry-delay", type=float, default=0.0, help="nack delay after a handler failed"
    )
    w.add_argument("--min-priority", type=int, default=0)
    w.add_argument("--worker-id", default="", help="names the leases (default host:pid)")
    w.add_argument("--observer", metavar="MODULE:NAME", help="an object that sees every queue call")
    w.add_argument(
        "--request-timeout", type=float, default=10.0, help="seconds for one HTTP request"
    )
    w.add_argument(
        "--metrics-addr",
        metavar="[HOST:]PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (a bare PORT: 127.0.0.1; "
        "needs rqueue[metrics])",
    )


def _problem(args: argparse.Namespace) -> str | None:
    from ._cli_check import options

    # the connection options this command offers, by their declared checks
    names = ("queue", "max_deliveries", "max_age", "timeout", "request_timeout")
    problem = options(args, *names)
    if problem:
        return problem
    try:
        Options(
            args.concurrency,
            args.visibility,
            args.grace,
            args.retry_delay,
            args.min_priority,
            args.worker_id,
        )
    except ValueError as exc:
        name, _, rest = str(exc).partition(":")
        return f"--{name.replace('_', '-')}:{rest}"
    return None


def run(args: argparse.Namespace, url_env: str) -> int:
    """Check everything, connect, work until a signal; the exit status."""
    from ._cli_check import connection

    # the nodes given and well formed, a CA file that is there, a password for --user
    problem = _problem(args) or connection(args, prompt=False)
    url = args.url or os.environ.get(url_env)
    if problem is None:
        sys.path.insert(0, os.getcwd())  # as `python -m` does: the handler's module is found
        try:
            address = None if args.metrics_addr is None else parse_address(args.metrics_addr)
            if address is not None:
                _metrics.client()  # the library is there, before anything else is loaded
            handler = load_handler(args.handler)
            observer = _load_observer(args.observer)
            auth = _auth(args)
            server, metrics = _serve(address, args.queue, observer)
        except ValueError as exc:
            problem = str(exc)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return USAGE
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr
    )
    if server is not None:
        logging.getLogger("rqueue.worker").info("metrics at %s", server.url)
    try:
        return _work(args, url, handler, metrics or observer, auth, metrics)
    finally:
        if server is not None:
            server.close()


def _serve(
    address: Address | None, queue: str | None, observer: Any
) -> tuple[_metrics.Server | None, WorkerMetrics | None]:
    """The metrics server listening at ``address`` and the observer that feeds it (which
    hands every call on to ``observer``); nothing without an address."""
    if address is None:
        return None, None
    registry = _metrics.registry()
    metrics = WorkerMetrics(registry, display(queue), inner=observer)
    return _metrics.Server(address, registry), metrics


def _work(
    args: argparse.Namespace,
    url: str,
    handler: Any,
    observer: Any,
    auth: Any,
    metrics: WorkerMetrics | None,
) -> int:
    """Connect and work until a signal; the exit status."""
    kw = dict(
        concurrency=args.concurrency,
        visibility=args.visibility,
        grace=args.grace,
        retry_delay=args.retry_delay,
        min_priority=args.min_priority,
        worker_id=args.worker_id,
        observer=observer,
    )
    connect = dict(
        timeout=args.timeout,
        request_timeout=min(args.request_timeout, args.timeout),
        max_deliveries=args.max_deliveries,
        max_age=args.max_age,
        verify=not args.insecure,
        ca_bundle=args.ca_bundle,
        auth=auth,
        queue=args.queue,
        on_dead_letter=functools.partial(_dead_lettered, args.queue, metrics),
    )
    try:
        if inspect.iscoroutinefunction(handler):
            return asyncio.run(_run_async(url, handler, connect, kw))
        return _run_sync(url, handler, connect, kw)
    except RqueueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return FAILED


def _dead_lettered(queue: str | None, metrics: WorkerMetrics | None, d: DeadLetter) -> None:
    """Log a message one of this worker's claims moved to the dead-letter queue (of the
    queue ``queue``: the commands it names say which), and count it in ``metrics``."""
    if metrics is not None:
        metrics.dead_lettered(d)
    why = (
        f"after {d.deliveries} deliveries"
        if d.reason in (None, "max_deliveries")
        else "queued past --max-age"
    )
    named = "" if queue in (None, "default") else f" --queue {queue}"
    logging.getLogger("rqueue.worker").error(
        "message %s of group %r dead-lettered %s; last error: %s "
        "(`python -m rqueue dlq list%s` shows it, `dlq redrive %s%s` puts it back)",
        d.seq,
        d.group_id,
        why,
        d.last_error,
        named,
        d.seq,
        named,
    )


def _auth(args: argparse.Namespace) -> tuple[str, str] | None:
    if not args.user:
        return None
    password = os.environ.get("RQUEUE_PASSWORD")
    if password is None:
        raise ValueError("--user needs $RQUEUE_PASSWORD (a worker does not prompt)")
    return (args.user, password)


def _load_observer(spec: str | None) -> Any:
    if spec is None:
        return None
    obj = load_handler(spec)  # a class or a factory: called with no arguments
    try:
        made = obj()
    except Exception as exc:
        raise ValueError(f"observer {spec!r}: {failure_text(exc)}") from exc
    if not (callable(getattr(made, "invoke", None)) and callable(getattr(made, "complete", None))):
        raise ValueError(f"observer {spec!r}: needs invoke() and complete() methods")
    return made


def _run_sync(url: str, handler: Any, connect: dict[str, Any], kw: dict[str, Any]) -> int:
    from ._sync_http import RqliteTransport
    from ._worker import Worker

    transport = RqliteTransport.from_url(url, **connect)
    try:
        worker = Worker(transport, handler, **kw)
        logging.getLogger("rqueue.worker").info(
            "%s: %d at once on %s%s", worker.options.worker_id, kw["concurrency"], url, _of(connect)
        )
        tally = worker.run(install_signals=True)
    finally:
        transport.close()
    _report(tally)
    return OK


async def _run_async(url: str, handler: Any, connect: dict[str, Any], kw: dict[str, Any]) -> int:
    from ._async_http import AsyncRqliteTransport
    from ._worker_async import AsyncWorker

    transport = await AsyncRqliteTransport.from_url(url, **connect)
    try:
        worker = AsyncWorker(transport, handler, **kw)
        logging.getLogger("rqueue.worker").info(
            "%s: %d at once (asyncio) on %s%s",
            worker.options.worker_id,
            kw["concurrency"],
            url,
            _of(connect),
        )
        tally = await worker.run(install_signals=True)
    finally:
        await transport.close()
    _report(tally)
    return OK


def _of(connect: dict[str, Any]) -> str:
    """The queue worked on, as the start-up line says it (nothing for the default)."""
    queue = connect.get("queue")
    return "" if queue in (None, "default") else f", queue {queue}"


def _report(tally: Any) -> None:
    logging.getLogger("rqueue.worker").info(
        "stopped: %d handled, %d failed, %d released",
        tally.handled,
        tally.failed,
        tally.released,
    )
