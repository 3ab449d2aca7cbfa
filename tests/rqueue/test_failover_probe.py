"""Failover probes: a node the client moves to is asked ``/readyz`` before it gets a call."""

from __future__ import annotations

from rqueue._attempts import PROBE_TIMEOUT, Attempts
from rqueue._config import STATUS_CALL
from rqueue._endpoints import Endpoints
from rqueue._models import HttpCall

A, B, C = "http://a:4001", "http://b:4001", "http://c:4001"
CALL = HttpCall("/db/request", (), (), what="claim")


def attempts(ep: Endpoints, call: HttpCall = CALL, now: float = 0.0) -> Attempts:
    return Attempts(call, ep, deadline=10.0, request_timeout=2.5, monotonic=lambda: now)


def test_the_node_of_the_last_success_is_trusted_others_are_probed() -> None:
    ep = Endpoints([A, B, C])
    assert attempts(ep).probe(A) == PROBE_TIMEOUT  # nothing succeeded yet
    ep.succeeded(A)
    assert attempts(ep).probe(A) is None
    ep.failed(A)
    url, _ = attempts(ep).next()
    assert url == B and attempts(ep).probe(B) == PROBE_TIMEOUT
    assert attempts(ep).probe(A) == PROBE_TIMEOUT, "a failure ends the trust"


def test_probe_never_outlasts_the_call() -> None:
    ep = Endpoints([A, B])
    assert attempts(ep, now=9.8).probe(A) == 10.0 - 9.8


def test_status_detection_is_not_probed() -> None:
    assert attempts(Endpoints([A]), STATUS_CALL).probe(A) is None


def test_not_ready_answer_skips_the_node_without_sending() -> None:
    ep = Endpoints([A, B, C])
    att = attempts(ep)
    assert not att.probe_answered(A, 503, "[+]node ok\n[+]leader does not exist")
    assert ep.current == B
    assert "leader does not exist" in att.last_failure and att.last_failure.startswith(A)


def test_servers_without_a_usable_readyz_are_trusted() -> None:
    ep = Endpoints([A, B])
    for status in (200, 401, 403, 404, 405):
        assert attempts(ep).probe_answered(A, status, "")
    assert ep.current == A
