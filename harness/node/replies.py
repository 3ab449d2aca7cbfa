"""An HTTP reply of the node, and the two ways rqlite shapes one (JSON, or Go's ``http.Error``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json; charset=utf-8"
    location: str | None = None
    served_by: str | None = None  # the leader's Raft address, on a forwarded answer


def json_reply(obj: Any, status: int = 200, pretty: bool = False) -> Reply:
    text = json.dumps(
        obj,
        ensure_ascii=False,
        indent=4 if pretty else None,
        separators=None if pretty else (",", ":"),
    )
    return Reply(status, text.encode("utf-8"))


def text_reply(status: int, message: str) -> Reply:
    """Like Go's ``http.Error``: text/plain with a trailing newline."""
    return Reply(status, (message + "\n").encode("utf-8"), "text/plain; charset=utf-8")
