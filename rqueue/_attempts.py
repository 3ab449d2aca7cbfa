"""Sending one call with failover, inside a total deadline (no I/O here).

The transports loop: ``url, timeout = attempts.next()``; send; then report what
happened with :meth:`Attempts.not_sent`, :meth:`Attempts.maybe_sent` or
:meth:`Attempts.answered`, and wait :meth:`Attempts.pause` seconds before the next try.
These methods raise rqueue's exceptions when the call is settled badly.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ._batch import request_path, request_target
from ._endpoints import Endpoints
from ._exceptions import OutcomeUnknown, ProtocolError, StatementError, Unavailable, ZoneRefused
from ._models import HttpCall, Result
from ._version import ServerInfo, version_from_status
from ._wire import Outcome, classify_response
from ._zone import MEASURE, ZoneGuard, is_guard_failure

#: connect timeout: a node that does not accept a connection this fast is skipped
CONNECT_TIMEOUT = 2.0
#: a node the client fails over to is first asked ``GET /readyz`` with this timeout: a
#: node that cannot answer (a paused process) or has no leader is skipped at once (nothing
#: was sent) instead of holding the call for a whole request timeout. A healthy node
#: answers in about a millisecond.
PROBE_TIMEOUT = 0.5
#: a probe answer that means "this server has no /readyz we may use": trust the node
PROBE_UNSUPPORTED = frozenset({401, 403, 404, 405})
_FIRST_PAUSE, _MAX_PAUSE = 0.05, 0.5
#: answers to ``GET /status`` that no rqlite node gives (it serves the path on every
#: version, answering 200, 401 without the permission, or 500): a server that is not
#: rqlite, or a wrong path in the URL
NOT_RQLITE = frozenset({404, 405})
#: times one call is sent again after the stamp's guard refused its time (each after the
#: node's check): a node checked just now that still refuses is not tried again
MAX_GUARD_FIRED = 2
#: the time zone check, as a call (for classifying its answer)
CHECK_CALL = HttpCall("/db/query", (MEASURE,), idempotent=True, what="time zone check")


class SendError(Exception):
    """An HTTP exchange failed in the client library; its text describes the failure.

    ``sent`` is False when the request certainly never reached a server (connection
    refused or timed out, TLS handshake failed), True when it may have.
    ``unknown_host``: the node's host name does not resolve, by the resolver's definite
    answer (:func:`unknown_host`).
    """

    def __init__(self, description: str, *, sent: bool, unknown_host: bool = False) -> None:
        super().__init__(description)
        self.sent = sent
        self.unknown_host = unknown_host


#: the resolver's definite answers that a name has no address: no such name (NXDOMAIN,
#: not in /etc/hosts), or a name without an address; not EAI_AGAIN ("temporary failure in
#: name resolution": the resolver could not be asked), which is retried
_NO_SUCH_NAME = frozenset(
    getattr(socket, name) for name in ("EAI_NONAME", "EAI_NODATA") if hasattr(socket, name)
)


def unknown_host(exc: BaseException) -> bool:
    """Whether ``exc`` (a client library's, with its causes) is the resolver saying the
    host name does not exist: a :class:`socket.gaierror` of :data:`_NO_SUCH_NAME`."""
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, socket.gaierror):
            return e.errno in _NO_SUCH_NAME
        todo.extend((e.__cause__, e.__context__, getattr(e, "reason", None), *e.args))
    return False


@dataclass(frozen=True)
class Reply:
    """An HTTP answer as the transports' I/O layers hand it to the core."""

    status: int
    text: str
    headers: Mapping[str, str]


def describe_error(exc: BaseException) -> str:
    """A short one-line description of a client library's exception."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:240]}" if text else type(exc).__name__


class Attempts:
    """The tries of one call: which node next, how long, and when to give up."""

    def __init__(
        self,
        call: HttpCall,
        endpoints: Endpoints,
        deadline: float,
        request_timeout: float,
        monotonic: Callable[[], float] = time.monotonic,
        limit: float | None = None,
        zone: ZoneGuard | None = None,
    ) -> None:
        self.call = call
        self.endpoints = endpoints
        self.deadline = deadline
        self.request_timeout = request_timeout
        self._monotonic = monotonic
        self.limit = limit
        self._rounds = 0
        self.last_failure = "no attempt made"
        #: the stamp's guard (rqueue._zone), for a timed call (one that starts with it)
        self.zone = zone if call.stamped else None
        self._target: tuple[str, bytes] | None = None
        self._guard_fired = 0
        #: nodes this call can never reach (connecting: see :meth:`hopeless`), and why
        self._hopeless: dict[str, str] = {}

    def remaining(self) -> float:
        return self.deadline - self._monotonic()

    def next(self) -> tuple[str, float]:
        """The node to try and the timeout for this try; Unavailable when time is up,
        :class:`ZoneRefused` when every node is refused for a timed call."""
        if self.zone is not None:
            everyone = self.zone.all_refused(self.endpoints.urls)
            if everyone is not None:
                raise ZoneRefused(everyone)
            for _ in self.endpoints.urls:  # past the refused nodes
                if not self.zone.refused(self.endpoints.current):
                    break
                self.endpoints.skip(self.endpoints.current)
        for _ in self.endpoints.urls:  # past the nodes retrying cannot help
            if self.endpoints.current not in self._hopeless:
                break
            self.endpoints.skip(self.endpoints.current)
        left = self.remaining()
        if left <= 0:
            limit = f" of {self.limit:g} s" if self.limit is not None else ""
            never = "".join(f"; {u} never can: {why}" for u, why in self._hopeless.items())
            raise Unavailable(
                f"{self.call.what}: gave up after the time limit{limit}; tried "
                f"{', '.join(self.endpoints.urls)}; last failure: {self.last_failure}{never}"
            )
        return self.endpoints.current, min(self.request_timeout, left)

    def probe(self, url: str) -> float | None:
        """The timeout for a readiness probe of ``url`` before the call, or None when the
        node is trusted (it answered the last successful call) or the call is a probe-free
        one (``/status``)."""
        if self.endpoints.trusted(url) or not self.call.path.startswith("/db/"):
            return None
        return max(0.001, min(PROBE_TIMEOUT, self.remaining()))

    def probe_answered(self, url: str, status: int, text: str) -> bool:
        """Whether a probe's answer lets the call go to ``url``; if not, it counts as a
        failure of that node (nothing of the call was sent)."""
        if status == 200 or status in PROBE_UNSUPPORTED:
            return True
        snippet = " ".join(text.split())[:120]
        self.not_sent(url, f"not ready (GET /readyz answered HTTP {status}: {snippet})")
        return False

    # -- a node's time zone (rqueue._zone): checked before its first timed call ---------
    def zone_check_due(self, url: str) -> bool:
        """Whether ``url`` must pass the time zone check before this call goes there."""
        return self.zone is not None and self.zone.check_due(url)

    def zone_check(self) -> tuple[str, bytes]:
        """The check's request: a strong read of the node's rewritten time and its UTC."""
        return "/db/query?level=strong", json.dumps([MEASURE.sql]).encode()

    def zone_answered(self, url: str, status: int, text: str) -> bool:
        """The check's answer: True, the call may go to ``url``; False, try another node
        (refused, with the one line logged, or the check failed: nothing was sent)."""
        assert self.zone is not None
        verdict = classify_response(CHECK_CALL, status, text)
        if verdict.outcome is not Outcome.OK or not verdict.results[0].rows:
            self.not_sent(url, f"time zone check failed: {verdict.reason or 'no row'}")
            return False
        try:
            line = self.zone.measured(url, verdict.results[0].rows)
        except ProtocolError as exc:
            self.not_sent(url, str(exc))
            return False
        if line is None:
            return True
        self.last_failure = line
        self.endpoints.skip(url)
        return False

    def target(self) -> tuple[str, bytes]:
        """The path and body of this try: a timed call's stamp carries the reference of
        the moment (the guard's, rqueue._zone); others are built once."""
        if self.zone is not None:
            body = self.call.body(self.zone.stamp())
            return request_path(self.call), json.dumps(body).encode()
        if self._target is None:
            self._target = request_target(self.call)
        return self._target

    def pause(self) -> float:
        """Seconds to wait before the next try: a backoff after each failed round."""
        if not self.endpoints.round_done():
            return 0.0
        self._rounds += 1
        wanted = min(_FIRST_PAUSE * 2 ** (self._rounds - 1), _MAX_PAUSE)
        return max(0.0, min(wanted, self.remaining()))

    def not_sent(self, url: str, reason: str) -> None:
        """The request certainly did not reach the server (refused, connect timeout)."""
        self.last_failure = f"{url}: {reason}"
        self.endpoints.failed(url)

    def hopeless(self, url: str, reason: str) -> None:
        """``url`` can never take this call, whatever the wait: its host name does not
        resolve, or the server there is not rqlite (``/status`` not found). It is not
        tried again; when every node is so, :class:`Unavailable` at once, naming each."""
        self._hopeless[url] = reason
        self.not_sent(url, reason)
        if all(u in self._hopeless for u in self.endpoints.urls):
            each = "; ".join(f"{u}: {why}" for u, why in self._hopeless.items())
            raise Unavailable(f"{self.call.what}: no node can answer, retrying cannot help: {each}")

    def unresolved(self, url: str, error: SendError) -> None:
        """Connecting, ``url``'s host name does not resolve (:func:`unknown_host`): a
        misspelt name, or a container that was never started, is :meth:`hopeless`."""
        host = urlsplit(url).hostname
        self.hopeless(url, f"the host name {host!r} does not resolve (misspelt?) ({error})")

    def not_rqlite(self, url: str, what: str) -> None:
        """Connecting, ``url`` answered ``/status`` as no rqlite node does: :meth:`hopeless`."""
        self.hopeless(url, f"not an rqlite node: GET /status answered {what}")

    def maybe_sent(self, url: str, reason: str) -> None:
        """The request may have reached the server (timeout or drop after sending)."""
        self.last_failure = f"{url}: {reason}"
        self.endpoints.failed(url)
        if not self.call.idempotent:
            raise OutcomeUnknown(f"{self.call.what}: outcome unknown: {self.last_failure}")

    def answered(self, url: str, status: int, text: str) -> tuple[Result, ...] | None:
        """The server answered: results, or None to try again, or raise."""
        verdict = classify_response(self.call, status, text)
        if verdict.outcome is Outcome.OK:
            self.endpoints.succeeded(url)
            if self.zone is not None:
                self.zone.observed(verdict.results[0])
            return verdict.results
        self.last_failure = f"{url}: {verdict.reason}"
        if self.zone is not None and is_guard_failure(verdict.reason):
            # the stamp refused its own time: nothing applied; check the node again
            self._guard_fired += 1
            if self._guard_fired <= MAX_GUARD_FIRED:
                self.zone.forget(url)
                return None
        if verdict.outcome is Outcome.RETRY:
            self.endpoints.failed(url)
            return None
        if verdict.outcome is Outcome.UNKNOWN:
            unknown = OutcomeUnknown(f"{self.call.what}: outcome unknown: {self.last_failure}")
            unknown.statement_failed = verdict.statement_failed
            if not verdict.statement_failed:  # a statement's error is not the node's fault
                self.endpoints.failed(url)
            raise unknown
        if verdict.auth_failed:
            raise Unavailable(f"{self.call.what}: {self.last_failure}")
        raise StatementError(f"{self.call.what}: {self.last_failure}")

    def status_answered(self, url: str, status: int, headers: Any, body: Any) -> ServerInfo | None:
        """A ``GET /status`` answer: the server's version, or None to try another node."""
        if status == 200:
            self.endpoints.succeeded(url)
            return ServerInfo.from_version(version_from_status(headers, body))
        if status in NOT_RQLITE:
            self.not_rqlite(url, f"HTTP {status}")
            return None
        self.last_failure = f"{url}: /status answered HTTP {status}"
        self.endpoints.failed(url)
        if status in (401, 403):
            # a user without the "status" permission: every answer still names the version
            version = version_from_status(headers, None)
            if version is not None:
                return ServerInfo.from_version(version)
            raise Unavailable(f"{self.call.what}: {self.last_failure}: authentication refused")
        return None
