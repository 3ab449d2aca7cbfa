"""The connection options, declared once (rqueue._options): both twins' ``from_url``
signature is the declaration, its docstring lists every option, every option is checked
by the check declared beside it, and the CLIs check theirs with it."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from rqueue import AsyncRqliteTransport, RqliteTransport
from rqueue._cli_check import option
from rqueue._config import Settings
from rqueue._options import NAMES, ConnectOptions

FIELDS = dataclasses.fields(ConnectOptions)

#: a value each option refuses, and the start of the error it gives
BAD: dict[str, tuple[Any, type[Exception], str]] = {
    "timeout": (0, ValueError, "timeout: must be > 0"),
    "request_timeout": ("10", TypeError, "request_timeout: expected a number of seconds"),
    "auth": (("user",), TypeError, "auth: expected a (username, password) tuple"),
    "verify": ("/ca.pem", TypeError, "verify: expected a bool (use ca_bundle="),
    "ca_bundle": ("/no/such/ca.pem", ValueError, "ca_bundle: no such file"),
    "read_consistency": ("weak", ValueError, "read_consistency: must be 'strong' or"),
    "clock": (12.0, TypeError, "clock: expected a callable returning epoch seconds"),
    "server_clock": ("yes", TypeError, "server_clock: expected None, True or False"),
    "clock_tolerance": (-1.0, ValueError, "clock_tolerance: must be >= 0"),
    "assume_version": ("", ValueError, "assume_version: must not be empty"),
    "dedup_ttl": (float("inf"), ValueError, "dedup_ttl: must be finite"),
    "max_deliveries": (0, ValueError, "max_deliveries: must be >= 1, got 0"),
    "queue": ("Orders!", ValueError, "queue: "),
    "on_dead_letter": ("print", TypeError, "on_dead_letter: expected a callable"),
    "max_age": (0, ValueError, "max_age: must be > 0"),
    "create": (1, TypeError, "create: expected a bool, got int"),
}


@pytest.mark.parametrize("twin", [RqliteTransport, AsyncRqliteTransport])
def test_from_url_takes_exactly_the_declared_options(twin: type) -> None:
    url, *params = inspect.signature(twin.from_url).parameters.values()
    assert url.name == "url" and url.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert [p.name for p in params] == [f.name for f in FIELDS]
    for p, f in zip(params, FIELDS, strict=True):
        assert p.kind is inspect.Parameter.KEYWORD_ONLY, p.name
        assert p.default == f.default, p.name
        assert p.annotation == f.type, p.name  # both are the source's text


@pytest.mark.parametrize("twin", [RqliteTransport, AsyncRqliteTransport])
def test_from_url_documents_every_option_from_the_declaration(twin: type) -> None:
    doc = inspect.getdoc(twin.from_url) or ""
    for f in FIELDS:
        assert f"``{f.name}`` (default ``{f.default!r}``): {f.metadata['doc']}." in doc


def test_every_option_declares_a_check_and_a_doc() -> None:
    assert set(BAD) == set(NAMES)
    for f in FIELDS:
        assert callable(f.metadata["check"]) and f.metadata["doc"], f.name


@pytest.mark.parametrize("name", NAMES)
def test_every_option_is_checked_naming_it(name: str) -> None:
    value, error, message = BAD[name]
    with pytest.raises(error) as caught:
        Settings.build("http://127.0.0.1:4001", **{name: value})
    assert str(caught.value).startswith(message)


def test_from_url_refuses_a_bad_option_before_connecting() -> None:
    """Nothing listens on port 9: the option's error comes first, at once."""
    with pytest.raises(ValueError, match=r"^max_age: must be > 0, got 0$"):
        RqliteTransport.from_url("http://127.0.0.1:9", timeout=30, max_age=0)


def test_the_defaults_and_the_checked_values() -> None:
    options = Settings.build("http://127.0.0.1:4001", timeout=5, max_age=1).options
    assert options == dataclasses.replace(ConnectOptions(), timeout=5.0, max_age=1.0)
    assert type(options.timeout) is float and type(options.max_age) is float


def test_the_password_stays_out_of_repr() -> None:
    settings = Settings.build("http://127.0.0.1:4001", auth=("u", "s3cret"))
    assert "s3cret" not in repr(settings) and settings.credentials is not None


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("max_deliveries", 0, "--max-deliveries: must be >= 1, got 0"),
        ("max_age", 0.0, "--max-age: must be a number of seconds > 0, got 0"),
        ("request_timeout", float("nan"), "--request-timeout: must be a number of seconds > 0"),
        ("queue", "Orders!", "--queue: "),
        ("max_age", None, None),
        ("timeout", 3.0, None),
    ],
)
def test_the_clis_check_their_options_with_the_declared_checks(
    name: str, value: Any, problem: str | None
) -> None:
    found = option(name, value)
    assert found == problem if problem is None else (found or "").startswith(problem)
