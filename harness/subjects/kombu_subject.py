"""``kombu``: rqueue's kombu transport (:mod:`rqueue.celery`), driven through kombu.

Every operation goes through a kombu channel of the ``rqlite://`` transport, as Celery's
would: a publish is ``basic_publish`` of a message whose group is its ``rqueue_group``
header (the workload's group), whose priority is kombu's (the workload's 0..4 doubled)
and whose delay is the ``delay_seconds`` property; a claim is ``basic_get`` (a lease, its
token the delivery tag), an ack ``basic_ack``, a nack the channel's ``release``, an
extend its ``extend``. The kombu queue ``harness`` is the rqueue queue of that name, so
the drain counts its table (:func:`pending`). Needs ``rqueue[celery]``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .base import Clock, Subject, SubjectError
from .rqueue_subject import queue_options, transport_timeouts

#: the kombu queue the workload uses (an rqueue named queue of the same name)
QUEUE = "harness"


@dataclass(frozen=True)
class Delivery:
    """A kombu delivery as the workload sees a lease."""

    seq: int
    group_id: str
    event: str
    token: str


class KombuClient:
    """One kombu connection and channel of rqueue's transport (one worker thread's)."""

    def __init__(self, urls: Sequence[str], timeout: float, options: dict[str, Any]) -> None:
        try:
            import kombu

            import rqueue.celery
            from rqueue.celery import GROUP_HEADER
        except ImportError as e:
            raise SubjectError(
                f"subject kombu: {e} (it needs the celery extra: pip install 'rqueue[celery]')"
            ) from None

        self._header = GROUP_HEADER
        hosts = ",".join(u.split("://", 1)[1].rstrip("/") for u in urls)
        scheme = "rqlites" if urls and urls[0].startswith("https") else "rqlite"
        self._conn = kombu.Connection(
            f"{scheme}://{hosts}",
            transport_options={**transport_timeouts(timeout), **queue_options(options)},
        )
        try:
            self._channel: rqueue.celery.Channel = self._conn.channel()
            self._channel.rqueue(QUEUE)  # open (and create) the queue now
        except BaseException:
            self._conn.release()
            raise

    def publish(self, group_id: str, event: str, priority: int = 0, *, delay: float = 0) -> int:
        ch = self._channel
        message = ch.prepare_message(
            event.encode(),
            priority=2 * priority,
            content_type="application/json",
            content_encoding="utf-8",
            headers={self._header: group_id},
            properties={"delay_seconds": delay} if delay else None,
        )
        return int(ch.basic_publish(message, exchange="", routing_key=QUEUE))

    def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> Delivery | None:
        ch = self._channel
        ch.worker_id, ch.visibility_timeout, ch.min_priority = worker_id, visibility, min_priority
        message = ch.basic_get(QUEUE, no_ack=False)
        if message is None:
            return None
        info = message.delivery_info
        return Delivery(
            seq=int(info["rqueue_seq"]),
            group_id=str(info["rqueue_group"]),
            event=message.body.decode() if isinstance(message.body, bytes) else message.body,
            token=message.delivery_tag,
        )

    def ack(self, lease: Delivery) -> None:
        self._channel.basic_ack(lease.token)

    def ack_and_claim(
        self, lease: Delivery, worker_id: str, visibility: float, min_priority: int = 0
    ) -> Delivery | None:
        self.ack(lease)
        try:
            return self.claim(worker_id, visibility, min_priority)
        except Exception as e:
            e.acked = True  # type: ignore[attr-defined]
            raise

    def nack(self, lease: Delivery, delay: float = 0) -> None:
        self._channel.release(lease.token, delay)

    def extend(self, lease: Delivery, visibility: float) -> object:
        return self._channel.extend(lease.token, visibility)

    def close(self) -> None:
        try:
            self._channel.close()
        finally:
            self._conn.release()


class AsyncKombuClient:
    """The same client for the workload's asyncio tasks: each call in a thread."""

    def __init__(self, client: KombuClient) -> None:
        self._client = client

    async def _run(self, name: str, *args: Any, **kwargs: Any) -> Any:
        call = functools.partial(getattr(self._client, name), *args, **kwargs)
        return await asyncio.to_thread(call)

    async def publish(
        self, group_id: str, event: str, priority: int = 0, *, delay: float = 0
    ) -> int:
        return await self._run("publish", group_id, event, priority, delay=delay)

    async def claim(
        self, worker_id: str, visibility: float, min_priority: int = 0
    ) -> Delivery | None:
        return await self._run("claim", worker_id, visibility, min_priority)

    async def ack(self, lease: Delivery) -> None:
        await self._run("ack", lease)

    async def ack_and_claim(
        self, lease: Delivery, worker_id: str, visibility: float, min_priority: int = 0
    ) -> Delivery | None:
        return await self._run("ack_and_claim", lease, worker_id, visibility, min_priority)

    async def nack(self, lease: Delivery, delay: float = 0) -> None:
        await self._run("nack", lease, delay)

    async def extend(self, lease: Delivery, visibility: float) -> object:
        return await self._run("extend", lease, visibility)

    async def close(self) -> None:
        await self._run("close")


def open_sync(urls: Sequence[str], clock: Clock, timeout: float, **options: Any) -> KombuClient:
    return KombuClient(urls, timeout, options)


async def open_async(
    urls: Sequence[str], clock: Clock, timeout: float, **options: Any
) -> AsyncKombuClient:
    return AsyncKombuClient(await asyncio.to_thread(KombuClient, urls, timeout, options))


def pending(urls: Sequence[str], timeout: float) -> int | None:
    """Messages left in the queue ``harness`` (None if no node answers)."""
    from rqueue import RqliteTransport, RqueueError

    try:
        with RqliteTransport.from_url(list(urls), queue=QUEUE, timeout=timeout) as rq:
            s = rq.stats()
    except RqueueError:
        return None
    return s.ready + s.leased + s.parked


SUBJECT = Subject(
    name="kombu",
    description="rqueue's kombu transport (rqueue.celery) through kombu channels",
    open_sync=open_sync,
    open_async=open_async,
    pending=pending,
)
