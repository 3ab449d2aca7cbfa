"""Node URLs: parsing, credentials out of sight, failover and stickiness."""

from __future__ import annotations

import pytest

from rqueue._endpoints import Endpoints, parse_urls


def test_several_urls_and_defaults() -> None:
    urls, creds = parse_urls("http://a:4001, b:4011/ ,https://c")
    assert urls == ["http://a:4001", "http://b:4011", "https://c"]
    assert creds is None


def test_credentials_are_taken_out_of_the_url() -> None:
    urls, creds = parse_urls("http://bob:s%40cret@a:4001,http://bob:s%40cret@b:4011")
    assert urls == ["http://a:4001", "http://b:4011"]
    assert creds.as_tuple() == ("bob", "s@cret")
    assert "cret" not in repr(creds)


def test_explicit_auth_wins() -> None:
    _, creds = parse_urls("http://bob:x@a:4001", auth=("alice", "y"))
    assert creds.as_tuple() == ("alice", "y")


@pytest.mark.parametrize(
    ("url", "exc", "match"),
    [
        ("", ValueError, "no node URL"),
        ("ftp://a", ValueError, "scheme"),
        ("http://a:99999", ValueError, "port"),
        ("http://u:p@a,http://v:q@b", ValueError, "different credentials"),
        (42, TypeError, "url"),
    ],
)
def test_bad_urls_name_the_argument(url: object, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match) as info:
        parse_urls(url)  # type: ignore[arg-type]
    assert "url" in str(info.value)
    assert "p@" not in str(info.value) and "q@" not in str(info.value)


def test_bad_auth() -> None:
    with pytest.raises(TypeError, match="auth"):
        parse_urls("http://a", auth=("only-user",))  # type: ignore[arg-type]


def test_failover_moves_on_and_sticks() -> None:
    e = Endpoints(["a", "b", "c"])
    assert e.current == "a"
    e.failed("a")
    assert e.current == "b" and not e.round_done()
    e.succeeded("b")
    assert e.current == "b"  # sticky
    e.failed("b"), e.failed("c"), e.failed("a")
    assert e.round_done()
    assert e.identity == "a,b,c"
