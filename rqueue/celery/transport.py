"""kombu's virtual transport on rqueue: each kombu queue is an rqueue queue, each
delivery an rqueue lease (docs/celery.md).

A delivery's tag is its lease's token: ``basic_ack`` acks the lease, ``basic_reject``
acks it (discard) or, with ``requeue``, gives it back at once (``nack``); an unacked
delivery of a closed channel is given back too; one never settled (the process died)
is delivered again when its visibility timeout lapses, as on SQS.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any

from kombu.transport import virtual
from kombu.utils.json import dumps, loads

import rqueue
from rqueue import (
    Lease,
    LeaseLost,
    OutcomeUnknown,
    ProtocolError,
    QueueNotFound,
    RqueueError,
    StatementError,
    TransportClosed,
    Unavailable,
)
from rqueue._options import NAMES as RQUEUE_OPTIONS

from ._mapping import (
    DEFAULT_PORT,
    GROUP_HEADER,
    delay_of,
    group_of,
    mask_password,
    node_urls,
    queue_name,
    rqueue_priority,
)

logger = logging.getLogger("rqueue.celery")

#: SQS's default: a delivery not acked within 30 minutes is delivered again
DEFAULT_VISIBILITY_TIMEOUT = 1800.0
#: rqueue's priorities, most urgent first
_LEVELS = (4, 3, 2, 1)
#: rqueue options the channel sets itself
_OWN = frozenset({"queue", "create"})
#: how many ready messages ``queue_purge`` settles per request
_PURGE_BATCH = 100


class Channel(virtual.Channel):
    """One kombu channel: the rqueue transports of the queues it uses, and its leases."""

    def __init__(self, connection: Any, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        client = self.connection.client
        options = dict(client.transport_options or {})
        url = client.hostname or "localhost"
        if "://" not in url:
            url = f"rqlite://{url}:{client.port or DEFAULT_PORT}"
        self._urls, auth = node_urls(url)
        if client.userid and auth is None:
            auth = (client.userid, client.password or "")
        self._options: dict[str, Any] = {
            k: v for k, v in options.items() if k in RQUEUE_OPTIONS and k not in _OWN
        }
        if auth is not None:
            self._options["auth"] = auth
        self.visibility_timeout = _seconds(
            options, "visibility_timeout", DEFAULT_VISIBILITY_TIMEOUT
        )
        self.group_header = str(options.get("group_header", GROUP_HEADER))
        self.priority_order = bool(options.get("priority_order", True))
        #: rqueue's priority floor: this channel takes only messages of that priority or
        #: more (the transport option ``min_priority`` is on kombu's 0..9 scale)
        self.min_priority = rqueue_priority(_level(options.get("min_priority", 0)))
        self.worker_id = str(
            options.get("worker_id")
            or f"kombu:{socket.gethostname()}:{os.getpid()}:{self.channel_id}"
        )
        self._queues: dict[str, Any] = {}
        self._leases: dict[str, tuple[str, Lease]] = {}
        self._noack_queues: set[str] = set()
        self._get_no_ack = False

    # -- the rqueue queues --------------------------------------------------------------
    def rqueue(self, queue: str, create: bool = True) -> Any:
        """The rqueue transport of kombu's ``queue`` (opened on first use)."""
        rq = self._queues.get(queue)
        if rq is None:
            from rqueue import RqliteTransport

            rq = RqliteTransport.from_url(
                self._urls, queue=queue_name(queue), create=create, **self._options
            )
            self._queues[queue] = rq
        return rq

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        self.rqueue(queue)

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        try:
            self.rqueue(queue, create=False)
        except QueueNotFound:
            return False
        return True

    def _size(self, queue: str) -> int:
        return int(self.rqueue(queue).stats().ready)

    def _purge(self, queue: str) -> int:
        """Settle every ready message (leased ones stay, as AMQP's purge leaves them)."""
        rq, purged = self.rqueue(queue), 0
        while leases := rq.claim_many(self.worker_id, 30.0, _PURGE_BATCH):
            purged += sum(e is None for e in rq.ack_many(leases))
        return purged

    def _delete(self, queue: str, *args: Any, **kwargs: Any) -> None:
        self._purge(queue)  # the queue's tables stay: other processes may use it

    # -- publish ------------------------------------------------------------------------
    def _lookup(self, exchange: str, routing_key: str, default: Any = None) -> list[str]:
        """Bound queues, as kombu finds them; else, for a direct exchange, the queue
        named by ``routing_key``: bindings live in each process's memory, and a producer
        that never declared the consumer's queue (Celery names queues after their routing
        keys) must reach it. A topic or fanout message nobody bound here is dropped, as
        kombu drops it (Celery's events: no queue fills with them)."""
        if not exchange:
            return [routing_key] if routing_key else []
        kind = self.typeof(exchange)
        try:
            found = kind.lookup(self.get_table(exchange), exchange, routing_key, default)
        except KeyError:
            found = []
        if found:
            return list(found)
        if routing_key and kind.type == "direct":
            return [routing_key]
        return []

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> int:
        """Publish ``message`` as one rqueue message: its group from the group header (or
        one of its own), its priority, its delay from ``eta``; the delivery tag is its
        dedup id, so a publish whose outcome was unknown is settled, not repeated."""
        props = message["properties"]
        headers = message.get("headers")
        tag = str(props["delivery_tag"])
        return self.rqueue(queue).publish(
            group_of(headers, tag, self.group_header),
            dumps(message),
            rqueue_priority(self._get_message_priority(message)),
            dedup_id=tag,
            delay=delay_of(headers, props, time.time()),
        )

    # -- deliver ------------------------------------------------------------------------
    def basic_consume(self, queue: str, no_ack: bool, *args: Any, **kwargs: Any) -> Any:
        if no_ack:
            self._noack_queues.add(queue)
        return super().basic_consume(queue, no_ack, *args, **kwargs)

    def basic_cancel(self, consumer_tag: str) -> Any:
        queue = self._tag_to_queue.get(consumer_tag)
        if queue is not None:
            self._noack_queues.discard(queue)
        return super().basic_cancel(consumer_tag)

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        self._get_no_ack = no_ack
        try:
            return super().basic_get(queue, no_ack=no_ack, **kwargs)
        finally:
            self._get_no_ack = False

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        rq = self.rqueue(queue)
        floor = max(self._floor(rq), self.min_priority)
        lease = rq.claim(self.worker_id, self.visibility_timeout, floor)
        if lease is None and floor > self.min_priority:  # taken meanwhile: any other
            lease = rq.claim(self.worker_id, self.visibility_timeout, self.min_priority)
        if lease is None:
            raise virtual.Empty()
        payload = loads(lease.event)
        props = payload["properties"]
        props["delivery_tag"] = lease.token
        props.setdefault("delivery_info", {}).update(
            rqueue_seq=lease.seq, rqueue_group=lease.group_id
        )
        if self._get_no_ack or queue in self._noack_queues:
            rq.ack(lease)  # at most once: settled before it is handed over
        else:
            self._leases[lease.token] = (queue, lease)
        return payload

    def _floor(self, rq: Any) -> int:
        """The highest rqueue priority with ready messages (a read of the counters), so
        urgent messages go first; 0 when priorities are not ordered."""
        if not self.priority_order:
            return 0
        by = rq.stats().by_priority
        return next((p for p in _LEVELS if by.get(p, {}).get("ready", 0) > 0), 0)

    # -- settle -------------------------------------------------------------------------
    def lease_of(self, delivery_tag: str) -> Lease | None:
        """The rqueue lease behind an unsettled delivery."""
        entry = self._leases.get(delivery_tag)
        return entry[1] if entry else None

    def basic_ack(self, delivery_tag: str, multiple: bool = False) -> None:
        """Ack the lease (:class:`~rqueue.LeaseLost`: it lapsed and may be delivered
        again); the delivery is forgotten whatever the outcome."""
        entry = self._leases.pop(delivery_tag, None)
        try:
            if entry is not None:
                self.rqueue(entry[0]).ack(entry[1])
        finally:
            super().basic_ack(delivery_tag)

    def basic_reject(self, delivery_tag: str, requeue: bool = False) -> None:
        """``requeue``: give the message back at once; else discard it (ack)."""
        if not requeue:
            entry = self._leases.pop(delivery_tag, None)
            try:
                if entry is not None:
                    self.rqueue(entry[0]).ack(entry[1])
            finally:
                super().basic_reject(delivery_tag, requeue=False)
            return
        super().basic_reject(delivery_tag, requeue=True)  # -> _restore

    def release(self, delivery_tag: str, delay: float = 0) -> None:
        """Give the delivery back, deliverable again after ``delay`` seconds (rqueue's
        ``nack``); its group stays blocked meanwhile."""
        entry = self._leases.pop(delivery_tag, None)
        try:
            if entry is not None:
                self.rqueue(entry[0]).nack(entry[1], delay=delay)
        finally:
            self.qos.ack(delivery_tag)

    def extend(self, delivery_tag: str, visibility: float) -> Lease:
        """Keep the delivery ``visibility`` seconds more from now (rqueue's ``extend``)."""
        queue, lease = self._leases[delivery_tag]
        extended = self.rqueue(queue).extend(lease, visibility)
        self._leases[delivery_tag] = (queue, extended)
        return extended

    def _restore(self, message: Any) -> None:
        """Give an unacked delivery back (a requeue, or the channel closing). A failure
        is logged, not raised: the lease lapses and the message is delivered again."""
        entry = self._leases.pop(message.delivery_tag, None)
        if entry is None:
            return
        queue, lease = entry
        try:
            self.rqueue(queue).nack(lease, error="requeued by kombu")
        except LeaseLost:
            pass  # lapsed already: deliverable again
        except RqueueError as exc:
            logger.warning(
                "rqueue.celery: could not give back message %s of queue %s (%s); it is "
                "delivered again when its visibility timeout lapses",
                lease.seq,
                queue,
                exc,
            )

    def close(self) -> None:
        try:
            super().close()  # gives back the unacked deliveries
        finally:
            queues, self._queues = self._queues, {}
            for rq in queues.values():
                rq.close()


def _seconds(options: dict[str, Any], key: str, default: float) -> float:
    value = options.get(key, default)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"transport option {key}: must be a number of seconds > 0, got {value!r}")
    return seconds


def _level(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 9:
        raise ValueError(
            f"transport option min_priority: must be a kombu priority 0..9, got {value!r}"
        )
    return value


class Transport(virtual.Transport):
    """kombu's transport for ``rqlite://host:4001[,host2:4001...]`` (docs/celery.md)."""

    Channel = Channel

    #: the whole URL reaches the channel: kombu's parser takes one host, rqlite has many
    can_parse_url = True
    default_port = DEFAULT_PORT
    polling_interval = 0.5
    driver_type = "rqlite"
    driver_name = "rqueue"

    connection_errors = (*virtual.Transport.connection_errors, Unavailable, OutcomeUnknown,
                         TransportClosed)  # fmt: skip
    channel_errors = (*virtual.Transport.channel_errors, LeaseLost, QueueNotFound,
                      StatementError, ProtocolError)  # fmt: skip

    #: direct exchanges only: no fanout (Celery then runs without remote control)
    implements = virtual.Transport.implements.extend(
        asynchronous=False, exchange_type=frozenset(["direct"])
    )

    def as_uri(self, uri: str, include_password: bool = False, mask: str = "**") -> str:
        """The broker URL as given, its password masked unless ``include_password``
        (kombu's own parser reads one host and fails on ``h1:4001,h2:4001``)."""
        return uri if include_password else mask_password(uri, mask)

    def driver_version(self) -> str:
        return str(rqueue.__version__)
