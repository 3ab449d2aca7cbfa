"""``RqliteTransport``: the queue over a ``requests`` session (only sends and receives)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import requests
import urllib3.exceptions

from . import _admin, _batch, _blocking, _validate
from ._attempts import CONNECT_TIMEOUT, Reply, SendError, describe_error
from ._config import Settings, check_lease, publish_items
from ._core import DEFAULT_DEDUP_TTL, Op, QueueCore
from ._exceptions import TransportClosed
from ._models import Call, DeadLetter, Lease, Result
from ._statements import DEFAULT_CLOCK_TOLERANCE, Statements
from ._version import ServerInfo

_NOT_SENT_REASONS = (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError)
_JSON = {"Content-Type": "application/json"}


def _not_sent(exc: requests.RequestException) -> bool:
    """True when the request certainly never reached a server."""
    if isinstance(exc, requests.exceptions.ConnectTimeout | requests.exceptions.SSLError):
        return True  # no connection, or the TLS handshake failed: nothing was sent
    if isinstance(exc, requests.exceptions.ConnectionError) and exc.args:
        reason = getattr(exc.args[0], "reason", exc.args[0])
        return isinstance(reason, _NOT_SENT_REASONS)
    return False


class _Session:
    """One ``requests.Session`` (a keep-alive pool per node) behind the small interface
    both twins' I/O layers share: ``request(...) -> Reply``, raising :class:`SendError`.

    Requests go straight to the session's adapter, prepared here: ``Session.request``
    would merge session settings, environment and cookies into every request, which
    costs more client CPU than the rest of a claim. Nothing of that applies here (no
    proxies, no cookies, no redirects), and the headers and auth are fixed at start.
    """

    def __init__(self, settings: Settings) -> None:
        session = requests.Session()
        session.trust_env = False  # no proxies or .netrc from the environment
        session.verify = settings.ca_bundle or settings.verify
        adapter = requests.adapters.HTTPAdapter(pool_connections=8, pool_maxsize=64, max_retries=0)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        template = requests.PreparedRequest()
        template.prepare_headers(_JSON)
        if settings.credentials is not None:
            template.prepare_auth(settings.credentials.as_tuple())
        self._headers = template.headers
        self._session = session
        self._adapter = adapter

    def request(
        self, method: str, url: str, path: str, body: bytes | None, timeout: float
    ) -> Reply:
        prepared = requests.PreparedRequest()
        prepared.method = method
        prepared.url = url + path  # already a clean URL (parse_urls) and an encoded path
        prepared.headers = self._headers.copy()
        prepared.prepare_body(body, None)
        try:
            response = self._adapter.send(
                prepared,
                timeout=(min(CONNECT_TIMEOUT, timeout), timeout),
                verify=self._session.verify,
            )
            text = response.text
        except requests.RequestException as exc:
            raise SendError(describe_error(exc), sent=not _not_sent(exc)) from exc
        return Reply(response.status_code, text, response.headers)

    def close(self) -> None:
        self._session.close()


class _Merger:
    """Group commit for one transport's threads (see :mod:`rqueue._batch`): a thread
    whose call arrives during another's merged request waits, then the oldest waiting
    thread sends every waiting call as one request and hands each its results."""

    def __init__(self, send: Callable[[list[_batch.Waiting], float], list[_batch.Settled]]) -> None:
        self._send = send
        self._lock = threading.Lock()
        self.coalescer = _batch.Coalescer()

    def run(self, call: Call, deadline: float, request_timeout: float) -> _batch.Settled:
        item = _batch.Waiting(
            call, deadline, handle=threading.Event(), fragment=_batch.fragment(call)
        )
        with self._lock:
            if not self.coalescer.accepting(time.monotonic()):
                return _batch.Alone("merging paused after a failed statement")
            batch = self.coalescer.arrive(item)
        if batch is None:
            settled = self._wait(item, deadline, request_timeout)
            if settled is not None:
                return settled
            batch = item.batch
            assert batch is not None
        return self._flush(item, batch)

    def _wait(
        self, item: _batch.Waiting, deadline: float, request_timeout: float
    ) -> _batch.Settled | None:
        """Wait to be settled (returned) or made the sender of a batch (None)."""
        if not item.handle.wait(max(0.0, deadline - time.monotonic())):
            with self._lock:
                if self.coalescer.withdraw(item):
                    return _batch.Alone("no time left while waiting to be merged")
            # taken into a batch: its one exchange is bounded by the request timeout
            bound = request_timeout + _batch.SETTLE_MARGIN
            if not item.handle.wait(bound):
                return _batch.no_word(item, bound)
        return None if item.batch is not None else item.settled

    def _flush(self, item: _batch.Waiting, batch: list[_batch.Waiting]) -> _batch.Settled:
        """Send ``batch`` (``item`` is ours), settle the others, pass the turn on."""
        settled: list[_batch.Settled] | None = None
        try:
            settled = self._send(batch, _batch.deadline_of(batch))
        finally:
            if settled is None:  # interrupted: the request may have gone out
                settled = _batch.stopped_sender(batch, sent=True)
            with self._lock:
                wake = self.coalescer.conclude(batch, settled, item, time.monotonic())
            for w in wake:
                w.handle.set()
        return settled[batch.index(item)]


class RqliteTransport(_admin.Admin):
    """A FIFO queue with per-group exclusivity on an rqlite cluster (blocking API).

    Create it with :meth:`from_url`. ``statements_class`` is the hook for mutant
    subjects: subclass the transport and set it to a :class:`~rqueue.Statements`
    subclass that overrides one builder (see :mod:`rqueue._statements`).
    """

    statements_class: type[Statements] = Statements

    def __init__(self, settings: Settings, session: _Session, core: QueueCore) -> None:
        self._settings = settings
        self._session = session
        self._endpoints = settings.endpoints()
        self._core = core
        self._closed = False
        self._merger = _Merger(self._send_merged)

    @classmethod
    def from_url(
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
        on_dead_letter: Callable[[DeadLetter], None] | None = None,
    ) -> RqliteTransport:
        """Connect to the nodes in ``url`` (comma-separated), create the schema, return.

        Retries for at most ``timeout`` seconds in all until a node answers and the
        cluster has a leader; then raises :class:`~rqueue.Unavailable` naming the URLs
        and the last failure. ``timeout`` also bounds every later operation;
        ``request_timeout`` bounds one HTTP request. ``auth`` (or user info in the URL)
        enables basic auth; ``ca_bundle`` names a CA file for HTTPS. Lease times come
        from the server's stamp (rqlite >= 8.33) or, on servers without time rewriting
        or with ``server_clock=False``, from the leader's clock read over HTTP and
        advanced by this process's monotonic clock; ``clock`` (epoch seconds) replaces
        that with a clock of your own. ``assume_version`` overrides the detected
        server version (to exercise older protocols). ``clock_tolerance`` (seconds,
        default 0.25) bounds how far apart the clocks that stamp and check a lease may be;
        a lapsed lease is claimable again only that long (plus one server-clock step of
        86.4 ms) after it expired. ``max_deliveries`` (off by default): a message claimed
        that many times without an ack moves to the dead-letter queue at the next claim
        that reaches it, and its group moves on; ``on_dead_letter`` is called with each
        :class:`~rqueue.DeadLetter` a claim of this transport moved.
        """
        settings = Settings.build(
            url,
            timeout=timeout,
            request_timeout=request_timeout,
            auth=auth,
            verify=verify,
            ca_bundle=ca_bundle,
            read_consistency=read_consistency,
            clock=clock,
            server_clock=server_clock,
            clock_tolerance=clock_tolerance,
            assume_version=assume_version,
            dedup_ttl=dedup_ttl,
            max_deliveries=max_deliveries,
            on_dead_letter=on_dead_letter,
        )
        session = _Session(settings)
        try:
            endpoints = settings.endpoints()
            deadline = time.monotonic() + settings.timeout
            server = _blocking.detect(
                session, endpoints, deadline, settings.request_timeout, settings.timeout
            )
            core = settings.core(server, cls.statements_class)
            self = cls(settings, session, core)
            self._endpoints = endpoints
            self._drive(core.open(), deadline)
        except BaseException:
            session.close()
            raise
        return self

    # -- the queue ----------------------------------------------------------------------
    def publish(
        self, group_id: str, event: Any, priority: int = 0, dedup_id: str | None = None
    ) -> int:
        """Append ``event`` to ``group_id``; return its seq. ``dedup_id``: at most once."""
        core = self._open()
        group_id = _validate.text("group_id", group_id)
        text = _validate.event(event)
        priority = _validate.priority("priority", priority)
        dedup_id = _validate.optional_text("dedup_id", dedup_id)
        return self._drive(core.publish(group_id, text, priority, dedup_id))

    def publish_many(self, items: Iterable[tuple[Any, ...]]) -> list[int]:
        """Publish ``(group_id, event[, priority])`` items atomically in one request."""
        core = self._open()
        return self._drive(core.publish_many(publish_items(items)))

    def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> Lease | None:
        """Lease the next deliverable message for ``visibility`` seconds, or None."""
        core = self._open()
        worker_id, visibility, min_priority = _validate.claim_args(
            worker_id, visibility, min_priority
        )
        return self._drive(core.claim(worker_id, visibility, min_priority))

    def ack(self, lease: Lease) -> None:
        """Delete the leased message; :class:`~rqueue.LeaseLost` if no longer held."""
        core = self._open()
        self._drive(core.ack(check_lease(lease, core)))

    def ack_and_claim(
        self, lease: Lease, worker_id: str, visibility: float, min_priority: int = 0
    ) -> Lease | None:
        """Ack ``lease`` and claim the next message, in one request where the server allows.

        As ``ack`` then ``claim``, but one Raft entry: the claim runs only if the ack
        took effect. Errors are the ack's (nothing claimed) unless ``exc.acked`` is True.
        """
        core = self._open()
        lease = check_lease(lease, core)
        worker_id, visibility, min_priority = _validate.claim_args(
            worker_id, visibility, min_priority
        )
        return self._drive(core.ack_and_claim(lease, worker_id, visibility, min_priority))

    def nack(self, lease: Lease, delay: float = 0, error: str | None = None) -> None:
        """Give the message back now (``delay == 0``) or park it for ``delay`` seconds;
        ``error`` (why) is shown by the dead-letter queue if the message ends there."""
        core = self._open()
        lease = check_lease(lease, core)
        delay = _validate.seconds("delay", delay, allow_zero=True)
        self._drive(core.nack(lease, delay, _admin.error_text(error)))

    def extend(self, lease: Lease, visibility: float) -> Lease:
        """Keep the lease for ``visibility`` more seconds from now (a heartbeat).

        Returns the extended lease: a new :class:`~rqueue.Lease` (same message and token)
        whose ``expires_at`` is the new deadline (None if the extend applied but the
        deadline could not be read back); ``lease`` itself is left unchanged. Either
        settles the message. :class:`~rqueue.LeaseLost` if the lease was no longer held.
        """
        core = self._open()
        lease = check_lease(lease, core)
        visibility = _validate.seconds("visibility", visibility, allow_zero=False)
        return self._drive(core.extend(lease, visibility))

    def close(self) -> None:
        """Close the HTTP connections; later calls raise :class:`~rqueue.TransportClosed`."""
        if not self._closed:
            self._closed = True
            self._session.close()

    @property
    def server(self) -> ServerInfo:
        """The server's version and the features in use."""
        return self._core.server

    def __enter__(self) -> RqliteTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"{type(self).__name__}(urls={list(self._settings.urls)!r}, "
            f"server={self._core.server.version!r}, {state})"
        )

    # -- driving the core ---------------------------------------------------------------
    def _open(self) -> QueueCore:
        if self._closed:
            raise TransportClosed(f"{type(self).__name__} is closed")
        return self._core

    def _drive(self, op: Op[Any], deadline: float | None = None) -> Any:
        if deadline is None:
            deadline = time.monotonic() + self._settings.timeout
        until = deadline
        return _blocking.drive(op, lambda call: self._send(call, until))

    def _send(self, call: Call, deadline: float) -> tuple[Result, ...]:
        if call.mergeable:
            settled = self._merger.run(call, deadline, self._settings.request_timeout)
            if isinstance(settled, _batch.Done):
                return settled.results
            if isinstance(settled, _batch.Failed):
                raise settled.error
        return self._send_alone(call, deadline)

    def _send_merged(self, batch: list[_batch.Waiting], deadline: float) -> list[_batch.Settled]:
        """One try of ``batch``'s calls as one request, to the node that answered last."""
        ex = _batch.exchange(
            batch, self._endpoints, self._settings.request_timeout, deadline - time.monotonic()
        )
        if isinstance(ex, list):
            return ex
        try:
            reply = self._session.request("POST", ex.url, ex.path, ex.body, ex.timeout)
        except SendError as exc:
            return ex.failed(str(exc), exc.sent)
        return ex.answered(reply.status, reply.text)

    def _send_alone(self, call: Call, deadline: float) -> tuple[Result, ...]:
        s = self._settings
        return _blocking.send_alone(
            self._session, call, self._endpoints, deadline, s.request_timeout, s.timeout
        )
