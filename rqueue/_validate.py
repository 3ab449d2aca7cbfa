"""Argument checks, run before anything is sent; each error names the argument."""

from __future__ import annotations

import json
import math
from typing import Any

from ._models import Lease

MIN_PRIORITY, MAX_PRIORITY = 0, 4


def text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected a non-empty str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{name}: must not be empty")
    return value


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
            json.loads(value, parse_constant=_refuse_constant)
        except ValueError as exc:
            raise ValueError(f"event: a str event must be JSON text ({exc})") from None
        return value
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"event: not JSON-serialisable ({exc})") from None


def _refuse_constant(name: str) -> Any:
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
