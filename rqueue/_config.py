"""What both transports and the admin CLI share: their settings (where to connect, and
the options declared in :mod:`rqueue._options`), and turning them into a core."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import _queues, _validate
from ._clock import LeaderClock
from ._core import QueueCore
from ._endpoints import Credentials, Endpoints, parse_urls
from ._models import HttpCall, Lease
from ._options import ConnectOptions
from ._statements import Statements
from ._version import TIME_REWRITING, ServerInfo
from ._zone import ZoneGuard

#: the call used for ``GET /status`` in error messages
STATUS_CALL = HttpCall("/status", (), idempotent=True, what="connect")


@dataclass(frozen=True)
class Settings:
    """A transport's settings, checked: the nodes' URLs, the credentials (kept out of
    ``repr``), and the options (:class:`~rqueue._options.ConnectOptions`)."""

    urls: tuple[str, ...]
    credentials: Credentials | None
    options: ConnectOptions

    @classmethod
    def build(cls, url: str | Iterable[str], **options: Any) -> Settings:
        """The settings for ``url`` (one URL, comma-separated URLs, or a list) and the
        options given by name (:data:`rqueue._options.NAMES`; the rest take their
        defaults); the URLs are checked first."""
        urls, creds = parse_urls(url, options.get("auth"))
        return cls(tuple(urls), creds, ConnectOptions(**options))

    def endpoints(self) -> Endpoints:
        return Endpoints(list(self.urls))

    def core(self, detected: ServerInfo, statements_class: type[Statements]) -> QueueCore:
        """The queue's core for this server (or the version given as ``assume_version``)."""
        o = self.options
        server = ServerInfo.from_version(o.assume_version) if o.assume_version else detected
        # how strings bind is the server's own parsing, whatever protocol is assumed
        text_as_bytes = detected.hex_blob_params and statements_class.text_as_bytes
        use_server = o.server_clock
        if use_server is None:
            use_server = server.time_rewriting
        elif use_server and not server.time_rewriting:
            raise ValueError(
                "server_clock: the server does not rewrite time functions "
                f"(needs rqlite >= {'.'.join(map(str, TIME_REWRITING))}, "
                f"it reports {server.version or 'no version'})"
            )
        # without the server's stamp, the lease clock is the caller's or the leader's
        leader_clock = None if use_server or o.clock is not None else LeaderClock()
        source = "server" if use_server else "leader" if leader_clock else "caller's"
        server = server.in_use(clock=source, read_consistency=o.read_consistency)
        clock = o.clock or (leader_clock.now if leader_clock else _no_clock)
        # the server's stamp is guarded against nodes whose rewritten time is off UTC
        zone = ZoneGuard() if use_server and statements_class.zone_guard else None
        statements = statements_class(
            server_clock=use_server,
            clock=clock,
            clock_tolerance=o.clock_tolerance,
            max_deliveries=o.max_deliveries,
            max_age=o.max_age,
            zone=zone,
        )
        return QueueCore(
            statements,
            server,
            read_consistency=o.read_consistency,
            origin=_queues.origin(self.urls, o.queue),
            dedup_ttl=o.dedup_ttl,
            leader_clock=leader_clock,
            on_dead_letter=o.on_dead_letter,
            queue=o.queue,
            text_as_bytes=text_as_bytes,
            zone=zone,
        )


def _no_clock() -> float:
    raise AssertionError("the server stamps time: no worker clock is read")


def publish_items(items: Any) -> list[tuple[str, str, int, float]]:
    """Validate ``publish_many`` items: ``(group_id, event[, priority[, delay]])``."""
    try:
        listed = list(items)
    except TypeError:
        raise TypeError(
            "items: expected an iterable of (group_id, event[, priority[, delay]])"
        ) from None
    out = []
    for i, item in enumerate(listed):
        if not isinstance(item, tuple | list) or len(item) not in (2, 3, 4):
            raise TypeError(
                f"items[{i}]: expected (group_id, event), (group_id, event, priority) "
                "or (group_id, event, priority, delay)"
            )
        group_id = _validate.text(f"items[{i}].group_id", item[0])
        try:
            event = _validate.event(item[1])
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"items[{i}].{exc}") from None
        prio = _validate.priority(f"items[{i}].priority", item[2] if len(item) > 2 else 0)
        delay = item[3] if len(item) > 3 else 0
        delay = _validate.seconds(f"items[{i}].delay", delay, allow_zero=True)
        out.append((group_id, event, prio, delay))
    return out


def check_lease(lease: Any, core: QueueCore) -> Lease:
    return _validate.lease(lease, core.origin)
