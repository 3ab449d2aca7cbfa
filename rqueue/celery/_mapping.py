"""How kombu's terms become rqueue's, without kombu: the broker URL, queue names,
priorities, a message's group and its delay. Pure functions (tested alone)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

#: the broker URL's schemes: rqlite's HTTP API over plain HTTP, or over TLS
SCHEMES = {"rqlite": "http", "rqlites": "https"}
#: rqlite's HTTP port, for a host given without one
DEFAULT_PORT = 4001
#: the message header that names a message's group (FIFO and one in flight per group)
GROUP_HEADER = "rqueue_group"
#: kombu's priorities run 0..9 (9 most urgent, as AMQP); rqueue's 0..4
KOMBU_MAX_PRIORITY = 9

_QUEUE_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")


def node_urls(broker_url: str) -> tuple[list[str], tuple[str, str] | None]:
    """``rqlite://[user:password@]host[:port][,host[:port]...][/]`` as rqueue's node URLs
    and credentials; ``rqlites://`` for HTTPS. ValueError names what is wrong."""
    scheme, sep, rest = broker_url.partition("://")
    if not sep or scheme not in SCHEMES:
        raise ValueError(
            f"broker URL {broker_url!r}: expected rqlite://host:4001[,host2:4001...] "
            "(or rqlites:// for HTTPS)"
        )
    netloc = rest.split("/", 1)[0].split("?", 1)[0]
    auth: tuple[str, str] | None = None
    if "@" in netloc:
        userinfo, netloc = netloc.rsplit("@", 1)
        user, _, password = userinfo.partition(":")
        auth = (unquote(user), unquote(password))
    hosts = [h.strip() for h in netloc.split(",") if h.strip()]
    if not hosts:
        raise ValueError(f"broker URL {broker_url!r}: no host given")
    urls = []
    for host in hosts:
        if not host.rsplit("]", 1)[-1].count(":"):  # no port (an IPv6 literal is bracketed)
            host = f"{host}:{DEFAULT_PORT}"
        urls.append(f"{SCHEMES[scheme]}://{host}")
    return urls, auth


def mask_password(broker_url: str, mask: str = "**") -> str:
    """``broker_url`` with the password of its user info replaced by ``mask``."""
    scheme, sep, rest = broker_url.partition("://")
    netloc, slash, tail = rest.partition("/")
    if not sep or "@" not in netloc:
        return broker_url
    userinfo, hosts = netloc.rsplit("@", 1)
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}://{user}{colon and ':' + mask}@{hosts}{slash}{tail}"


def queue_name(kombu_queue: str) -> str:
    """The rqueue queue holding kombu's queue ``kombu_queue``: the name itself when it is
    a valid rqueue name (a lowercase letter, then up to 39 lowercase letters, digits or
    underscores); else its letters lowercased, the rest as ``_``, and 8 hex digits of
    its hash so that two names never meet (``celery.pidbox`` -> ``celery_pidbox_<hash>``).
    """
    if _QUEUE_NAME.fullmatch(kombu_queue):
        return kombu_queue
    digest = hashlib.sha256(kombu_queue.encode()).hexdigest()[:8]
    base = re.sub(r"[^a-z0-9_]", "_", kombu_queue.lower())
    if not base[:1].isalpha():
        base = "q" + base
    return f"{base[:30]}_{digest}"


def rqueue_priority(kombu_priority: int) -> int:
    """kombu's 0..9 (clamped) on rqueue's 0..4: 0-1 -> 0, 2-3 -> 1, ..., 8-9 -> 4."""
    return max(0, min(int(kombu_priority), KOMBU_MAX_PRIORITY)) // 2


def group_of(headers: Mapping[str, Any] | None, delivery_tag: str, header: str) -> str:
    """The rqueue group of a message: its ``header`` when set (messages sharing it are
    delivered one at a time, in publish order); else a group of its own (``m:<tag>``),
    so that messages without one are delivered in parallel."""
    value = (headers or {}).get(header)
    if value is None or value == "":
        return f"m:{delivery_tag}"
    return str(value)


def delay_of(headers: Mapping[str, Any] | None, properties: Mapping[str, Any], now: float) -> float:
    """Seconds before the message may be delivered: Celery's ``eta`` header (ISO 8601,
    a countdown or a retry's), or a ``delay_seconds`` property; 0 when absent or past.
    ``now``: the publisher's epoch time."""
    seconds = 0.0
    eta = (headers or {}).get("eta")
    if isinstance(eta, str) and eta:
        try:
            when = datetime.fromisoformat(eta)
        except ValueError:
            raise ValueError(f"message header eta: not an ISO 8601 time: {eta!r}") from None
        if when.tzinfo is None:  # Celery writes naive times in UTC when enable_utc
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - now
    given = properties.get("delay_seconds")
    if given is not None:
        try:
            seconds = max(seconds, float(given))
        except (TypeError, ValueError):
            raise ValueError(f"message property delay_seconds: not a number: {given!r}") from None
    return max(0.0, seconds)
