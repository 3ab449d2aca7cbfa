"""``RqliteTransport``: the blocking twin's own parts, written by hand: the HTTP session
over ``requests``, and the merger (group commit) for threads. The rest is
:class:`rqueue._sync.Transport`, generated from the asyncio twin's source."""

from __future__ import annotations

import threading
import time

import requests
import urllib3.exceptions

from . import _batch, _sync
from ._attempts import CONNECT_TIMEOUT, Reply, SendError, describe_error, unknown_host
from ._config import Settings
from ._models import HttpCall

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
    """One ``requests.Session`` (a keep-alive pool per node): the twin's
    :class:`~rqueue._sync.Session`.

    Requests go straight to the session's adapter, prepared here: ``Session.request``
    would merge session settings, environment and cookies into every request, which
    costs more client CPU than the rest of a claim. Nothing of that applies here (no
    proxies, no cookies, no redirects), and the headers and auth are fixed at start.
    """

    def __init__(self, settings: Settings) -> None:
        session = requests.Session()
        session.trust_env = False  # no proxies or .netrc from the environment
        session.verify = settings.options.ca_bundle or settings.options.verify
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
            sent, unknown = not _not_sent(exc), unknown_host(exc)
            raise SendError(describe_error(exc), sent=sent, unknown_host=unknown) from exc
        return Reply(response.status_code, text, response.headers)

    def close(self) -> None:
        self._session.close()


class _Merger:
    """Group commit for one transport's threads (see :mod:`rqueue._batch`): a thread
    whose call arrives during another's merged request waits, then the oldest waiting
    thread sends every waiting call as one request and hands each its results."""

    def __init__(self, send: _batch.SendBatch) -> None:
        self._send = send
        self._lock = threading.Lock()
        self.coalescer = _batch.Coalescer()

    def run(self, call: HttpCall, deadline: float, request_timeout: float) -> _batch.Settled:
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


class RqliteTransport(_sync.Transport):
    """A FIFO queue with per-group exclusivity on an rqlite cluster (blocking API).

    Create it with :meth:`from_url`. ``statements_class`` is the hook for mutant
    subjects: subclass the transport and set it to a :class:`~rqueue.Statements`
    subclass that overrides one builder (see :mod:`rqueue._statements`).
    """

    _session_class = _Session
    _merger_class = _Merger
