"""The blocking I/O loops, shared by the sync twin and the admin CLI.

Both drive the sans-IO core over a *session*: anything with ``request(method, url, path,
body, timeout) -> Reply`` that raises :class:`~rqueue._attempts.SendError` (the sync
twin's over ``requests``, the CLI's over a plain socket). The decisions are the core's
and :class:`~rqueue._attempts.Attempts`'s; these loops only send, wait and hand back.
No HTTP library is imported here, so the CLI starts without one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Protocol

from . import _batch
from ._attempts import Attempts, Reply, SendError, describe_error
from ._config import STATUS_CALL
from ._core import Op
from ._endpoints import Endpoints
from ._exceptions import RqueueError
from ._models import Call, Result
from ._version import ServerInfo


class Session(Protocol):
    def request(
        self, method: str, url: str, path: str, body: bytes | None, timeout: float
    ) -> Reply: ...


def drive(op: Op[Any], send: Callable[[Call], tuple[Result, ...]]) -> Any:
    """Run one operation of the core: send each call it yields, hand back its results
    (or its error), until it returns."""
    try:
        call = next(op)
        while True:
            try:
                results = send(call)
            except RqueueError as exc:
                call = op.throw(exc)
            else:
                call = op.send(call.for_caller(results))
    except StopIteration as stop:
        return stop.value


def send_alone(
    session: Session,
    call: Call,
    endpoints: Endpoints,
    deadline: float,
    request_timeout: float,
    limit: float,
) -> tuple[Result, ...]:
    """Send ``call`` by itself, failing over between nodes as :class:`Attempts` decides;
    a node failed over to is asked ``/readyz`` first."""
    attempts = Attempts(call, endpoints, deadline, request_timeout, limit=limit)
    path, body = _batch.request_target(call)
    while True:
        url, timeout = attempts.next()
        probe = attempts.probe(url)
        if probe is not None and not _ready(session, attempts, url, probe):
            _pause(attempts)
            continue
        try:
            reply = session.request("POST", url, path, body, timeout)
        except SendError as exc:
            if exc.sent:
                attempts.maybe_sent(url, str(exc))
            else:
                attempts.not_sent(url, str(exc))
        else:
            results = attempts.answered(url, reply.status, reply.text)
            if results is not None:
                return results
        _pause(attempts)


def _ready(session: Session, attempts: Attempts, url: str, timeout: float) -> bool:
    """Ask a node we fail over to whether it is ready, before sending it the call."""
    try:
        reply = session.request("GET", url, "/readyz", None, timeout)
    except SendError as exc:
        attempts.not_sent(url, f"not ready (GET /readyz: {exc})")
        return False
    return attempts.probe_answered(url, reply.status, reply.text)


def detect(
    session: Session, endpoints: Endpoints, deadline: float, request_timeout: float, limit: float
) -> ServerInfo:
    """Ask nodes for ``/status`` until one answers; its version decides the protocol."""
    attempts = Attempts(STATUS_CALL, endpoints, deadline, request_timeout, limit=limit)
    while True:
        url, timeout = attempts.next()
        try:
            reply = session.request("GET", url, "/status", None, timeout)
            body = json.loads(reply.text) if reply.status == 200 else None
        except SendError as exc:
            attempts.not_sent(url, str(exc))
        except ValueError as exc:
            attempts.not_sent(url, describe_error(exc))
        else:
            server = attempts.status_answered(url, reply.status, reply.headers, body)
            if server is not None:
                return server
        _pause(attempts)


def _pause(attempts: Attempts) -> None:
    pause = attempts.pause()
    if pause:
        time.sleep(pause)
