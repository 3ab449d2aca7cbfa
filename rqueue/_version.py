"""What the server can do, read from its version string.

rqlite reports its version in the ``X-RQLITE-VERSION`` header of every response and as
``build.version`` in ``/status``; the embedded node reports a compatible rqlite version
with a suffix (``v8.36.0-rqueue-embedded``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")

#: /db/request runs writes and reads as one Raft entry and supports RETURNING
ONE_REQUEST_CLAIM = (8, 23, 0)
#: /db/query?level=linearizable
LINEARIZABLE_READS = (8, 32, 0)
#: a string argument shaped like a blob literal (``x'41'``) binds as a BLOB, and an array
#: of byte values as a BLOB (``http/request_parser.go``: ``db.ParseHex``, ``[]interface{}``)
HEX_BLOB_PARAMS = (8, 31, 0)
#: time functions in writes are rewritten to literals on the receiving node
TIME_REWRITING = (8, 33, 0)


def parse_version(text: str | None) -> tuple[int, int, int] | None:
    """``"v8.36.0-rqueue-embedded"`` -> ``(8, 36, 0)``; None when there is no version."""
    if not text:
        return None
    m = _VERSION.search(text)
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def version_from_status(headers: Any, status_json: Any) -> str | None:
    """The version string from a ``/status`` answer: its header first, then its body."""
    header = headers.get("X-RQLITE-VERSION") if headers is not None else None
    if header and parse_version(header):
        return header
    if isinstance(status_json, dict):
        build = status_json.get("build")
        if isinstance(build, dict) and isinstance(build.get("version"), str):
            return build["version"]
    return header or None


@dataclass(frozen=True, repr=False)
class ServerInfo:
    """The server's version and the features rqueue uses because of it.

    ``one_request_claim``, ``linearizable_reads`` and ``time_rewriting`` say what the
    version offers; ``features`` what a transport uses, e.g. ``("one-request claims",
    "server clock", "strong reads")`` (the claim protocol, where lease times come from:
    the server's stamp, the leader's clock or the caller's, and the read consistency).
    """

    version: str | None
    number: tuple[int, int, int] | None
    #: what the transport uses with this server (set by :meth:`in_use`)
    features: tuple[str, ...] = ()

    @classmethod
    def from_version(cls, version: str | None) -> ServerInfo:
        return cls(version, parse_version(version))

    def in_use(self, *, clock: str, read_consistency: str) -> ServerInfo:
        """This server with the ``features`` of a transport whose lease times come from
        ``clock`` ("server", "leader" or "caller's") and whose reads are
        ``read_consistency``."""
        claims = "one-request claims" if self.one_request_claim else "three-request claims"
        return replace(self, features=(claims, f"{clock} clock", f"{read_consistency} reads"))

    def __repr__(self) -> str:
        return f"ServerInfo(version={self.version!r}, features={self.features!r})"

    def __str__(self) -> str:
        return f"{self.version or 'unknown version'}: {', '.join(self.features) or 'none'}"

    def _at_least(self, wanted: tuple[int, int, int]) -> bool:
        return self.number is not None and self.number >= wanted

    @property
    def one_request_claim(self) -> bool:
        return self._at_least(ONE_REQUEST_CLAIM)

    @property
    def linearizable_reads(self) -> bool:
        return self._at_least(LINEARIZABLE_READS)

    @property
    def hex_blob_params(self) -> bool:
        """Whether the server binds a string shaped ``x'…'`` as a BLOB; an unknown version
        counts as one that does (rqueue then sends such text as bytes, which a server that
        does not refuses with HTTP 400 instead of storing other text)."""
        return self.number is None or self.number >= HEX_BLOB_PARAMS

    @property
    def time_rewriting(self) -> bool:
        return self._at_least(TIME_REWRITING)
