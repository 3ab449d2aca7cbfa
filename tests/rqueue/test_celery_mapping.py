"""rqueue.celery's mapping of kombu's terms (pure), its registration with kombu, and
``import rqueue`` importing neither kombu nor Celery."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest

from rqueue.celery._mapping import (
    delay_of,
    group_of,
    mask_password,
    node_urls,
    queue_name,
    rqueue_priority,
)


def test_node_urls_many_hosts_default_port_and_credentials() -> None:
    assert node_urls("rqlite://a:4001,b:4011,c") == (
        ["http://a:4001", "http://b:4011", "http://c:4001"],
        None,
    )
    assert node_urls("rqlites://u:p%40ss@a:4001,b/") == (
        ["https://a:4001", "https://b:4001"],
        ("u", "p@ss"),
    )
    assert node_urls("rqlite://[::1]:4001") == (["http://[::1]:4001"], None)


@pytest.mark.parametrize("url", ["redis://a:6379", "a:4001", "rqlite://", "rqlite:///x"])
def test_node_urls_refuses_other_urls(url: str) -> None:
    with pytest.raises(ValueError, match="broker URL"):
        node_urls(url)


def test_mask_password() -> None:
    assert mask_password("rqlite://u:secret@a:1,b:2/") == "rqlite://u:**@a:1,b:2/"
    assert mask_password("rqlite://a:1,b:2") == "rqlite://a:1,b:2"


def test_queue_names_valid_kept_others_mapped_apart() -> None:
    assert queue_name("celery") == "celery"
    assert queue_name("default") == "default"
    mapped = queue_name("celery.pidbox")
    assert mapped.startswith("celery_pidbox_") and len(mapped) <= 40
    assert queue_name("Celery") != queue_name("celery")
    assert queue_name("a.b") != queue_name("a_b")
    assert queue_name("9lives")[0].isalpha()
    assert len(queue_name("x" * 200)) <= 40


def test_priorities_0_to_9_on_0_to_4() -> None:
    assert [rqueue_priority(p) for p in range(10)] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert rqueue_priority(-3) == 0 and rqueue_priority(255) == 4


def test_group_from_header_else_own() -> None:
    assert group_of({"rqueue_group": "order-1"}, "t1", "rqueue_group") == "order-1"
    assert group_of({"rqueue_group": 7}, "t1", "rqueue_group") == "7"
    assert group_of({}, "t1", "rqueue_group") == "m:t1"
    assert group_of(None, "t2", "rqueue_group") != group_of(None, "t1", "rqueue_group")


def test_delay_from_eta_and_delay_seconds() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    assert delay_of({"eta": "2026-01-01T00:00:05+00:00"}, {}, now) == 5.0
    assert delay_of({"eta": "2026-01-01T00:00:05"}, {}, now) == 5.0  # naive: UTC
    assert delay_of({"eta": "2025-12-31T23:00:00+00:00"}, {}, now) == 0.0
    assert delay_of({"eta": None}, {"delay_seconds": 3}, now) == 3.0
    assert delay_of(None, {}, now) == 0.0
    with pytest.raises(ValueError, match="eta"):
        delay_of({"eta": "tomorrow"}, {}, now)
    with pytest.raises(ValueError, match="delay_seconds"):
        delay_of({}, {"delay_seconds": "soon"}, now)


def test_kombu_resolves_the_schemes_and_masks_the_password() -> None:
    from kombu import Connection

    import rqueue.celery
    from rqueue.celery.transport import Transport

    conn = Connection("rqlite://u:pw@a:4001,b:4001")
    assert conn.transport_cls == "rqlite"
    assert isinstance(conn.transport, Transport)
    assert conn.as_uri() == "rqlite://u:**@a:4001,b:4001"
    assert Connection("rqlites://a").transport.__class__ is Transport
    assert rqueue.celery.TRANSPORT == "rqueue.celery.transport:Transport"


def test_import_rqueue_imports_neither_kombu_nor_celery() -> None:
    code = (
        "import sys, rqueue, rqueue._sync; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('kombu', 'celery')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
