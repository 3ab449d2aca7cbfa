"""What both transports and the admin CLI share: their settings, and turning them into a
core."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from . import _queues, _validate
from ._clock import LeaderClock
from ._core import DEFAULT_DEDUP_TTL, QueueCore
from ._endpoints import Credentials, Endpoints, parse_urls
from ._models import DeadLetter, HttpCall, Lease
from ._statements import DEFAULT_CLOCK_TOLERANCE, Statements
from ._version import TIME_REWRITING, ServerInfo
from ._zone import ZoneGuard

#: the call used for ``GET /status`` in error messages
STATUS_CALL = HttpCall("/status", (), idempotent=True, what="connect")


@dataclass(frozen=True)
class Settings:
    """A transport's settings, validated; credentials are kept out of ``repr``."""

    urls: tuple[str, ...]
    credentials: Credentials | None
    timeout: float
    request_timeout: float
    verify: bool
    ca_bundle: str | None
    read_consistency: str
    clock: Callable[[], float] | None
    server_clock: bool | None
    clock_tolerance: float
    assume_version: str | None
    dedup_ttl: float
    max_deliveries: int | None = None
    #: the queue's name (rqueue._queues); None: the default queue
    queue: str | None = None
    on_dead_letter: Callable[[DeadLetter], None] | None = None
    max_age: float | None = None

    @classmethod
    def build(
        cls,
        url: str | Iterable[str],
        *,
        timeout: float = 30.0,
        request_timeout: float = 10.0,
        auth: tuple[str, str] | None = None,
        verify: bool = True,
        ca_bundle: str | None = None,
        read_consistency: str = "strong",
        clock: Callable[[], float] | None = None,
        server_clock: bool | None = None,
        clock_tolerance: float = DEFAULT_CLOCK_TOLERANCE,
        assume_version: str | None = None,
        dedup_ttl: float = DEFAULT_DEDUP_TTL,
        max_deliveries: int | None = None,
        queue: str | None = None,
        on_dead_letter: Callable[[DeadLetter], None] | None = None,
        max_age: float | None = None,
    ) -> Settings:
        urls, creds = parse_urls(url, auth)
        if read_consistency not in ("strong", "linearizable"):
            raise ValueError(
                f"read_consistency: must be 'strong' or 'linearizable', got {read_consistency!r}"
            )
        if not isinstance(verify, bool):
            raise TypeError("verify: expected a bool (use ca_bundle= for a CA file)")
        if ca_bundle is not None and not isinstance(ca_bundle, str):
            raise TypeError("ca_bundle: expected a path (str)")
        if ca_bundle is not None and not os.path.isfile(ca_bundle):  # no retry could help
            raise ValueError(f"ca_bundle: no such file: {ca_bundle!r}")
        if clock is not None and not callable(clock):
            raise TypeError("clock: expected a callable returning epoch seconds")
        if server_clock not in (None, True, False):
            raise TypeError("server_clock: expected None, True or False")
        if on_dead_letter is not None and not callable(on_dead_letter):
            raise TypeError("on_dead_letter: expected a callable taking a DeadLetter")
        return cls(
            urls=tuple(urls),
            credentials=creds,
            timeout=_validate.seconds("timeout", timeout, allow_zero=False),
            request_timeout=_validate.seconds("request_timeout", request_timeout, allow_zero=False),
            verify=verify,
            ca_bundle=ca_bundle,
            read_consistency=read_consistency,
            clock=clock,
            server_clock=server_clock,
            clock_tolerance=_validate.seconds("clock_tolerance", clock_tolerance, allow_zero=True),
            assume_version=_validate.optional_text("assume_version", assume_version),
            dedup_ttl=_validate.seconds("dedup_ttl", dedup_ttl, allow_zero=False),
            max_deliveries=_validate.max_deliveries(max_deliveries),
            queue=_queues.check_name(queue),
            on_dead_letter=on_dead_letter,
            max_age=_validate.max_age(max_age),
        )

    def endpoints(self) -> Endpoints:
        return Endpoints(list(self.urls))

    def core(self, detected: ServerInfo, statements_class: type[Statements]) -> QueueCore:
        """The queue's core for this server (or the version given as ``assume_version``)."""
        server = ServerInfo.from_version(self.assume_version) if self.assume_version else detected
        # how strings bind is the server's own parsing, whatever protocol is assumed
        text_as_bytes = detected.hex_blob_params and statements_class.text_as_bytes
        use_server = self.server_clock
        if use_server is None:
            use_server = server.time_rewriting
        elif use_server and not server.time_rewriting:
            raise ValueError(
                "server_clock: the server does not rewrite time functions "
                f"(needs rqlite >= {'.'.join(map(str, TIME_REWRITING))}, "
                f"it reports {server.version or 'no version'})"
            )
        # without the server's stamp, the lease clock is the caller's or the leader's
        leader_clock = None if use_server or self.clock is not None else LeaderClock()
        source = "server" if use_server else "leader" if leader_clock else "caller's"
        server = server.in_use(clock=source, read_consistency=self.read_consistency)
        clock = self.clock or (leader_clock.now if leader_clock else _no_clock)
        statements = statements_class(
            server_clock=use_server, clock=clock, clock_tolerance=self.clock_tolerance
        )
        statements.max_deliveries = self.max_deliveries
        statements.max_age = self.max_age
        # the server's stamp is guarded against nodes whose rewritten time is off UTC
        zone = ZoneGuard() if use_server and statements_class.zone_guard else None
        statements.zone = zone
        return QueueCore(
            statements,
            server,
            read_consistency=self.read_consistency,
            origin=_queues.origin(self.urls, self.queue),
            dedup_ttl=self.dedup_ttl,
            leader_clock=leader_clock,
            on_dead_letter=self.on_dead_letter,
            queue=self.queue,
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
