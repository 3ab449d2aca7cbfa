"""rqueue.celery's kombu transport against the shared cluster, through kombu's own API:
deliveries as leases (ack, reject, requeue, a closed channel's unacked messages, a
lapsed visibility timeout), eta as a delayed message, priority first, a group's FIFO."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kombu import Connection

import rqueue.celery  # registers rqlite://
from rqueue.celery._mapping import queue_name


def _broker(cluster: Any) -> str:
    return "rqlite://" + ",".join(u.split("://", 1)[1] for u in cluster.urls)


@pytest.fixture
def conn(cluster: Any) -> Iterator[Connection]:
    c = Connection(
        _broker(cluster),
        transport_options={"visibility_timeout": 30, "timeout": 20, "request_timeout": 5},
    )
    try:
        yield c
    finally:
        c.release()


@pytest.fixture
def qname() -> str:
    return "t_" + uuid.uuid4().hex[:12]


def _get(queue: Any, timeout: float = 5.0) -> Any:
    """The next message of ``queue`` (kombu's SimpleQueue), waiting up to ``timeout``."""
    return queue.get(block=True, timeout=timeout)


def test_publish_get_ack_and_the_queue_is_rqueues(
    conn: Connection, qname: str, cluster: Any
) -> None:
    q = conn.SimpleQueue(qname)
    q.put({"n": 1})
    m = _get(q)
    assert m.payload == {"n": 1}
    info = m.delivery_info
    assert info["rqueue_seq"] > 0 and info["rqueue_group"].startswith("m:")
    lease = q.channel.lease_of(m.delivery_tag)
    assert lease is not None and lease.token == m.delivery_tag
    m.ack()
    assert q.channel.lease_of(m.delivery_tag) is None
    with pytest.raises(q.Empty):
        q.get(block=False)
    from rqueue import RqliteTransport

    with RqliteTransport.from_url(cluster.urls, queue=queue_name(qname)) as rq:
        assert rq.stats().ready == rq.stats().leased == 0
    q.close()


def test_reject_requeue_gives_back_reject_discards(conn: Connection, qname: str) -> None:
    q = conn.SimpleQueue(qname)
    q.put("a")
    m = _get(q)
    m.requeue()
    again = _get(q)
    assert again.payload == "a" and again.delivery_tag != m.delivery_tag
    again.reject()
    with pytest.raises(q.Empty):
        q.get(block=False)
    q.close()


def test_a_closed_channels_unacked_messages_come_back(conn: Connection, qname: str) -> None:
    channel = conn.channel()
    q = conn.SimpleQueue(qname, channel=channel)
    q.put("x")
    assert _get(q).payload == "x"
    channel.close()  # not acked: given back at once, not after the visibility timeout
    with conn.SimpleQueue(qname) as q2:
        m = _get(q2, timeout=3.0)
        assert m.payload == "x"
        m.ack()


def test_an_unsettled_delivery_is_delivered_again_after_the_visibility_timeout(
    cluster: Any, qname: str
) -> None:
    with Connection(_broker(cluster), transport_options={"visibility_timeout": 1.5}) as c:
        q = c.SimpleQueue(qname)
        q.put("late")
        first = _get(q)
        started = time.monotonic()
        second = _get(q, timeout=10.0)  # the first lease lapses
        assert second.payload == "late" and time.monotonic() - started >= 1.0
        with pytest.raises(rqueue.LeaseLost):
            first.ack()
        second.ack()
        q.close()


def test_eta_is_a_delayed_message_not_delivered_before(conn: Connection, qname: str) -> None:
    q = conn.SimpleQueue(qname)
    eta = (datetime.now(UTC) + timedelta(seconds=1.5)).isoformat()
    q.put("due", headers={"eta": eta})
    q.put("now")
    assert _get(q).payload == "now"
    published = time.monotonic()
    with pytest.raises(q.Empty):
        q.get(block=True, timeout=0.6)
    m = _get(q, timeout=5.0)
    assert m.payload == "due" and time.monotonic() - published >= 1.0
    m.ack()
    q.close()


def test_higher_priority_first(conn: Connection, qname: str) -> None:
    q = conn.SimpleQueue(qname)
    for i in range(3):
        q.put(f"low{i}", priority=0)
    q.put("urgent", priority=9)
    q.put("middle", priority=5)
    got = []
    for _ in range(5):
        m = _get(q)
        got.append(m.payload)
        m.ack()
    assert got[:2] == ["urgent", "middle"], got
    assert sorted(got[2:]) == ["low0", "low1", "low2"]
    q.close()


def test_a_group_header_delivers_one_at_a_time_in_order(conn: Connection, qname: str) -> None:
    q = conn.SimpleQueue(qname)
    for i in range(3):
        q.put(i, headers={"rqueue_group": "g1"})
    q.put("other")
    first = _get(q)
    assert first.payload == 0 and first.delivery_info["rqueue_group"] == "g1"
    second = _get(q)  # g1 is held: only the other group's message is deliverable
    assert second.payload == "other"
    with pytest.raises(q.Empty):
        q.get(block=False)
    first.ack()
    second.ack()
    order = []
    for _ in range(2):
        m = _get(q)
        order.append(m.payload)
        m.ack()
    assert order == [1, 2]
    q.close()


def test_queue_purge_and_size(conn: Connection, qname: str) -> None:
    q = conn.SimpleQueue(qname)
    for i in range(4):
        q.put(i)
    assert q.qsize() == 4
    assert q.clear() == 4
    assert q.qsize() == 0
    q.close()


@pytest.mark.parametrize(
    ("option", "value"), [("visibility_timeout", 0), ("min_priority", 10), ("min_priority", "9")]
)
def test_bad_transport_option_names_it(cluster: Any, option: str, value: Any) -> None:
    c = Connection(_broker(cluster), transport_options={option: value})
    with c, pytest.raises(ValueError, match=f"transport option {option}: must be"):
        c.channel()


def test_unbound_direct_goes_to_the_routing_keys_queue_topic_is_dropped(
    cluster: Any, conn: Connection, qname: str
) -> None:
    from kombu import Exchange, Producer

    from rqueue import RqliteTransport

    channel = conn.channel()
    try:
        Producer(channel).publish({"d": 1}, exchange=Exchange("elsewhere"), routing_key=qname)
        events = Exchange("events_" + qname, type="topic", channel=channel)
        events.declare()
        Producer(channel).publish({"e": 1}, exchange=events, routing_key="worker.heartbeat")
        with conn.SimpleQueue(qname, channel=channel) as q:
            m = _get(q)
            assert m.payload == {"d": 1}
            m.ack()
    finally:
        channel.close()
    with RqliteTransport.from_url(cluster.urls) as rq:
        names = {info.name for info in rq.queues()}
    assert queue_name(qname) in names
    assert not any(n.startswith("worker_heartbeat") for n in names), names
