"""Node URLs: parsing, credentials kept out of sight, failover with stickiness."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit


@dataclass(frozen=True)
class Credentials:
    """Basic-auth credentials; their repr never shows the password."""

    username: str
    password: str

    def __repr__(self) -> str:
        return f"Credentials(username={self.username!r}, password='***')"

    def as_tuple(self) -> tuple[str, str]:
        return self.username, self.password


def parse_urls(
    url: str | Iterable[str], auth: tuple[str, str] | None = None
) -> tuple[list[str], Credentials | None]:
    """Split ``"http://a:4001,http://b:4011"`` (or a list) into clean base URLs.

    User info in a URL is removed from it and returned as :class:`Credentials`; an
    explicit ``auth`` wins. Raises ``ValueError`` naming ``url`` or ``auth`` on bad input.
    """
    if isinstance(url, str):
        parts = [p.strip() for p in url.split(",")]
    else:
        try:
            parts = [p.strip() for p in url]
        except TypeError:
            raise TypeError(
                f"url: expected a str or a list of str, got {type(url).__name__}"
            ) from None
        if not all(isinstance(p, str) for p in parts):
            raise TypeError("url: every URL must be a str")
    parts = [p for p in parts if p]
    if not parts:
        raise ValueError("url: no node URL given")
    creds: Credentials | None = None
    clean: list[str] = []
    for raw in parts:
        split = urlsplit(raw if "://" in raw else "http://" + raw)
        if split.scheme not in ("http", "https"):
            raise ValueError(f"url: scheme must be http or https, got {split.scheme!r}")
        try:
            port = split.port
        except ValueError:
            raise ValueError(f"url: bad port in {_hide(split)!r}") from None
        if not split.hostname:
            raise ValueError(f"url: no host in {_hide(split)!r}")
        if split.username is not None:
            found = Credentials(unquote(split.username), unquote(split.password or ""))
            if creds is not None and creds != found:
                raise ValueError("url: the URLs carry different credentials")
            creds = found
        host = split.hostname if ":" not in split.hostname else f"[{split.hostname}]"
        netloc = f"{host}:{port}" if port else host
        clean.append(urlunsplit((split.scheme, netloc, split.path.rstrip("/"), "", "")))
    if check_auth(auth) is not None:
        creds = Credentials(*auth)
    return clean, creds


def check_auth(auth: Any) -> tuple[str, str] | None:
    """``auth`` checked: None, or a ``(username, password)`` tuple of str."""
    if auth is not None and not (
        isinstance(auth, tuple) and len(auth) == 2 and all(isinstance(a, str) for a in auth)
    ):
        raise TypeError("auth: expected a (username, password) tuple of str")
    return auth


def _hide(split) -> str:  # a URL for messages, user info removed
    netloc = split.netloc.rpartition("@")[2]
    return urlunsplit((split.scheme, netloc, split.path, "", ""))


class Endpoints:
    """Which node to talk to: stick to one that works, move on when it fails.

    Pure state, no I/O: the transports call :meth:`current`, then :meth:`failed` or
    :meth:`succeeded`, and ask :meth:`round_done` whether every node failed in a row.
    A node is :meth:`trusted` while it is the last one that answered a call
    successfully; the transports probe any other node before sending it a call.
    Safe to share between threads.
    """

    def __init__(self, urls: list[str]) -> None:
        if not urls:
            raise ValueError("url: no node URL given")
        self.urls = list(urls)
        self._index = 0
        self._failures_in_row = 0
        self._good: str | None = None
        self._lock = threading.Lock()

    @property
    def current(self) -> str:
        return self.urls[self._index]

    def succeeded(self, url: str) -> None:
        with self._lock:
            self._failures_in_row = 0
            if url in self.urls:
                self._index = self.urls.index(url)
                self._good = url

    def failed(self, url: str) -> None:
        """Record a failure of ``url`` and move to the next node."""
        with self._lock:
            self._failures_in_row += 1
            if self._good == url:
                self._good = None
            if self.urls[self._index] == url:
                self._index = (self._index + 1) % len(self.urls)

    def skip(self, url: str) -> None:
        """Move past ``url`` without counting a failure (refused for a call's kind: its
        time zone, see rqueue._zone), and stop trusting it."""
        with self._lock:
            if self._good == url:
                self._good = None
            if self.urls[self._index] == url:
                self._index = (self._index + 1) % len(self.urls)

    def trusted(self, url: str) -> bool:
        """Whether ``url`` answered the last successful call (no probe needed)."""
        return self._good == url

    def round_done(self) -> bool:
        """True after every node failed once since the last success (time to back off)."""
        return self._failures_in_row > 0 and self._failures_in_row % len(self.urls) == 0

    @property
    def identity(self) -> str:
        """A stable name for the queue these URLs reach (used to tag leases)."""
        return ",".join(sorted(self.urls))
