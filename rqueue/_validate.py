"""Argument checks, run before anything is sent; each error names the argument."""

from __future__ import annotations

import json
import math
from typing import Any

from ._models import Lease
from ._text import check as unicode_text

MIN_PRIORITY, MAX_PRIORITY = 0, 4
#: most rows one ``dead_letters`` or ``peek`` call returns
MAX_LIMIT = 10_000


def text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a non-empty str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{name}: must not be empty")
    return unicode_text(name, value)


def priority(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise ValueError(f"{name}: must be between {MIN_PRIORITY} and {MAX_PRIORITY}, got {value}")
    return value


def claim_args(worker_id: Any, visibility: Any, min_priority: Any) -> tuple[str, float, int]:
    """The checked arguments of a claim (``claim`` and ``ack_and_claim`` alike)."""
    return (
        text("worker_id", worker_id),
        seconds("visibility", visibility, allow_zero=False),
        priority("min_priority", min_priority),
    )


def publish_args(
    group_id: Any, priority_: Any, dedup_id: Any, delay: Any
) -> tuple[str, int, str | None, float]:
    """The checked arguments of a publish besides its event (the event: :func:`event`)."""
    return (
        text("group_id", group_id),
        priority("priority", priority_),
        optional_text("dedup_id", dedup_id),
        seconds("delay", delay, allow_zero=True),
    )


def seconds(name: str, value: Any, *, allow_zero: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name}: expected a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name}: must be finite, got {value}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name}: must be {bound}, got {value}")
    return float(value)


def event(value: Any) -> str:
    """The event as stored: JSON text verbatim, anything else through ``json.dumps``."""
    if isinstance(value, str):
        try:
            json.loads(value, parse_constant=refuse_constant)
        except ValueError as exc:
            raise ValueError(f"event: a str event must be JSON text ({exc})") from None
        return unicode_text("event", value)
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"event: not JSON-serialisable ({exc})") from None


def refuse_constant(name: str) -> Any:
    # Python's json reads NaN and Infinity, which JSON does not have: other readers refuse
    raise ValueError(f"{name} is not JSON (only finite numbers are)")


def optional_text(name: str, value: Any) -> str | None:
    return None if value is None else text(name, value)


def lease(value: Any, origin: str) -> Lease:
    """A :class:`Lease` issued on the same queue (a node URL in common) or untagged."""
    if not isinstance(value, Lease):
        raise TypeError(f"lease: expected a Lease, got {type(value).__name__}")
    if value.origin and not set(value.origin.split(",")) & set(origin.split(",")):
        raise ValueError("lease: it was issued by a transport for another queue")
    return value


def error_text(value: Any) -> str | None:
    """The checked ``error`` of a ``nack``: None or a str (kept up to 4,000 characters)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"error: expected a str, got {type(value).__name__}")
    return unicode_text("error", value[:4000])


def read_consistency(name: str, value: Any) -> str:
    """The checked read consistency: ``"strong"`` or ``"linearizable"``."""
    if value not in ("strong", "linearizable"):
        raise ValueError(f"{name}: must be 'strong' or 'linearizable', got {value!r}")
    return value


def limit(value: Any) -> int:
    """How many rows an operator's listing returns: 1 to :data:`MAX_LIMIT`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"limit: expected an int, got {type(value).__name__}")
    if not 1 <= value <= MAX_LIMIT:
        raise ValueError(f"limit: must be between 1 and {MAX_LIMIT}, got {value}")
    return value


def seq(name: str, value: Any, *, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name}: must be {'>= 0' if allow_zero else '> 0'}, got {value}")
    return value


def selection(one: Any, group_id: Any, everything: Any) -> tuple[int | None, str | None]:
    """Exactly one of ``seq``, ``group_id`` or ``all=True`` (nothing is acted on by default):
    the dead letters a ``redrive`` or ``purge`` acts on, as ``(seq, group_id)``."""
    chosen = [one is not None, group_id is not None, everything is True]
    if not isinstance(everything, bool):
        raise TypeError(f"all: expected a bool, got {type(everything).__name__}")
    if sum(chosen) != 1:
        raise ValueError("give exactly one of seq=, group_id= or all=True")
    return (
        None if one is None else seq("seq", one),
        None if group_id is None else text("group_id", group_id),
    )
