"""The connection options of ``from_url``, declared once: each option's name, type,
default, check and doc are one field of :class:`ConnectOptions`.

Every layer reads them from here: both twins' ``from_url`` (whose signature is written
out for IDEs and readers, and which ``tests/rqueue/test_options.py`` proves equal to this
declaration; its docstring lists the options from here, :func:`documented`), the
transports' settings (:class:`rqueue._config.Settings`), and the CLIs, which check the
options they offer with the checks declared here (:func:`rqueue._cli_check.option`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import _queues, _validate
from ._core import DEFAULT_DEDUP_TTL
from ._endpoints import check_auth
from ._models import DeadLetter
from ._statements import DEFAULT_CLOCK_TOLERANCE

F = TypeVar("F", bound=Callable[..., Any])

#: an option's check: given the name to report (the option's, or a CLI flag) and the
#: value, the value to use, or TypeError/ValueError naming it
Check = Callable[[str, Any], Any]


@dataclass(frozen=True)
class Seconds:
    """A check: a number of seconds (> 0, or >= 0 with ``allow_zero``; None too where
    ``optional``: the option is off)."""

    allow_zero: bool = False
    optional: bool = False

    def __call__(self, name: str, value: Any) -> float | None:
        if value is None and self.optional:
            return None
        return _validate.seconds(name, value, allow_zero=self.allow_zero)


def _count(name: str, value: Any) -> int | None:
    """None (off) or an int >= 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int or None, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name}: must be >= 1, got {value}")
    return value


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
    return value


def _verify(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name}: expected a bool (use ca_bundle= for a CA file)")
    return value


def _ca_bundle(name: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name}: expected a path (str)")
    if value is not None and not os.path.isfile(value):  # no retry could help
        raise ValueError(f"{name}: no such file: {value!r}")
    return value


def _callable(what: str) -> Check:
    def check(name: str, value: Any) -> Any:
        if value is not None and not callable(value):
            raise TypeError(f"{name}: expected a callable {what}")
        return value

    return check


def _server_clock(name: str, value: Any) -> bool | None:
    if value not in (None, True, False):
        raise TypeError(f"{name}: expected None, True or False")
    return value


def _auth(name: str, value: Any) -> tuple[str, str] | None:
    return check_auth(value)


def _assume_version(name: str, value: Any) -> str | None:
    return _validate.optional_text(name, value)


def _queue(name: str, value: Any) -> str | None:
    return _queues.check_name(value, name)


def option(default: Any, check: Check, doc: str, *, repr: bool = True) -> Any:
    """A field of :class:`ConnectOptions`: its default, its check and its doc."""
    return field(default=default, repr=repr, metadata={"check": check, "doc": doc})


_CLOCK = _callable("returning epoch seconds")
_ON_DEAD_LETTER = _callable("taking a DeadLetter")


@dataclass(frozen=True)
class ConnectOptions:
    """``from_url``'s options, checked (in this order) when built: each error names the
    option. The credentials of ``auth`` are kept out of ``repr``."""

    timeout: float = option(
        30.0,
        Seconds(),
        "seconds in all: connecting retries until a node answers and the cluster has a "
        "leader, then raises Unavailable naming the URLs and the last failure; it also "
        "bounds every later operation",
    )
    request_timeout: float = option(10.0, Seconds(), "seconds for one HTTP request")
    auth: tuple[str, str] | None = option(
        None, _auth, "(user, password) for basic auth (or user info in the URL)", repr=False
    )
    verify: bool = option(True, _verify, "verify the nodes' TLS certificates")
    ca_bundle: str | None = option(None, _ca_bundle, "a CA file for HTTPS")
    read_consistency: str = option(
        "strong", _validate.read_consistency, "'strong', or 'linearizable' (rqlite >= 8.32)"
    )
    clock: Callable[[], float] | None = option(
        None,
        _CLOCK,
        "a lease clock of your own (epoch seconds), where the server's stamp is not used",
    )
    server_clock: bool | None = option(
        None,
        _server_clock,
        "lease times from the server's stamp (rqlite >= 8.33); None: where the server "
        "rewrites time; False (or a server without): from the leader's clock read over "
        "HTTP and advanced by this process's monotonic clock",
    )
    clock_tolerance: float = option(
        DEFAULT_CLOCK_TOLERANCE,
        Seconds(allow_zero=True),
        "seconds the clocks that stamp and check a lease may be apart: a lapsed lease is "
        "claimable again only that long (plus one server-clock step of 86.4 ms) after it "
        "expired",
    )
    assume_version: str | None = option(
        None,
        _assume_version,
        "a server version to use instead of the detected one (to exercise older protocols)",
    )
    dedup_ttl: float = option(
        DEFAULT_DEDUP_TTL, Seconds(), "seconds a publish's dedup_id is remembered"
    )
    max_deliveries: int | None = option(
        None,
        _count,
        "a message claimed that many times without an ack moves to the dead-letter queue "
        "at the next claim that reaches it, and its group moves on (None: off)",
    )
    queue: str | None = option(
        None,
        _queue,
        "one of the database's queues (each with its own groups, FIFO and dead letters); "
        "None or 'default': the queue of the tables without a prefix, created when absent",
    )
    on_dead_letter: Callable[[DeadLetter], None] | None = option(
        None,
        _ON_DEAD_LETTER,
        "called with each DeadLetter a claim of this transport moved",
    )
    max_age: float | None = option(
        None,
        Seconds(optional=True),
        "retention: a message still queued that many seconds after it was due moves to the "
        "dead-letter queue at the next claim that reaches it, unless leased (None: off)",
    )
    create: bool = option(
        False,
        _bool,
        "create the named queue if absent; without, a queue that does not exist raises "
        "QueueNotFound naming it, so a misspelt name never becomes a new, empty queue",
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, f.metadata["check"](f.name, getattr(self, f.name)))


#: every option's name, in the declared order
NAMES = tuple(f.name for f in dataclasses.fields(ConnectOptions))
#: each option's field (its default, and its check and doc in ``metadata``)
FIELDS = {f.name: f for f in dataclasses.fields(ConnectOptions)}


def given(values: Mapping[str, Any]) -> dict[str, Any]:
    """The options among ``values``, by name: a ``from_url``'s ``locals()``, whose
    signature is this declaration (tests/rqueue/test_options.py)."""
    return {name: values[name] for name in NAMES}


def check_of(name: str) -> Check:
    """The declared check of the option ``name``."""
    return FIELDS[name].metadata["check"]


def documented(method: F) -> F:
    """Append the options, each with its default and doc, to ``method``'s docstring."""
    lines = [
        f"        - ``{f.name}`` (default ``{f.default!r}``): {f.metadata['doc']}."
        for f in dataclasses.fields(ConnectOptions)
    ]
    method.__doc__ = (method.__doc__ or "").rstrip() + "\n\n        Options:\n\n" + "\n".join(lines)
    return method
