"""A small HTTP/1.1 client on asyncio streams and h11, for ``AsyncRqliteTransport``.

Keep-alive connections are pooled per node. h11 (the sans-IO HTTP/1.1 library httpx
itself is built on) does the protocol: framing, chunked bodies, keep-alive rules. This
layer costs about a fifth of the client CPU of ``httpx.AsyncClient`` per request, which
is what decides how many claims one event loop can drive (see docs/performance.md).

Every failure is an :class:`AioError` whose ``sent`` says whether the request may have
reached the server: False for a refused or timed-out connection or a failed TLS
handshake, True once any byte of the request was written.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import h11

_READ = 65536


class AioError(Exception):
    """A request failed; ``sent`` is True when the server may have received it."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class Headers(dict[str, str]):
    """Response headers: names stored in lower case, looked up in any case."""

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(name.lower(), default)


@dataclass(frozen=True)
class Response:
    status: int
    headers: Headers
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


class _Connection:
    """One keep-alive connection and its h11 state."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT)

    async def exchange(self, request: h11.Request, body: bytes | None) -> Response:
        conn = self.h11
        data = conn.send(request)
        if body:
            data += conn.send(h11.Data(data=body))
        data += conn.send(h11.EndOfMessage())
        self.writer.write(data)
        await self.writer.drain()
        status, headers, chunks = 0, Headers(), []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await self.reader.read(_READ))
            elif isinstance(event, h11.Response):
                status = event.status_code
                headers = Headers(
                    (k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers
                )
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return Response(status, headers, b"".join(chunks))
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionResetError("the server closed the connection mid-answer")

    def reusable(self) -> bool:
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
            return True
        return False

    def close(self) -> None:
        self.writer.close()


class HostPool:
    """Idle keep-alive connections to one node, reused last-in first-out."""

    def __init__(
        self, url: str, headers: dict[str, str], ssl_context: ssl.SSLContext | None
    ) -> None:
        parts = urlsplit(url)
        if parts.hostname is None:
            raise ValueError(f"url: no host in {url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path
        self.ssl = ssl_context if parts.scheme == "https" else None
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = (self.ssl is None and self.port == 80) or (self.ssl and self.port == 443)
        self.headers = [("Host", host if default else f"{host}:{self.port}"), *headers.items()]
        self._idle: list[_Connection] = []
        self._closed = False

    async def request(
        self, method: str, path: str, body: bytes | None, timeout: float, connect_timeout: float
    ) -> Response:
        """Send one request; :class:`AioError` on any failure (``sent`` as documented)."""
        conn = self._take_idle() or await self._connect(connect_timeout)
        headers = list(self.headers)
        if body is not None:
            headers.append(("Content-Length", str(len(body))))
        request = h11.Request(method=method, target=self.prefix + path, headers=headers)
        try:
            async with asyncio.timeout(timeout):
                response = await conn.exchange(request, body)
        except TimeoutError:
            conn.close()
            raise AioError(
                f"timed out after {timeout:g} s waiting for the answer", sent=True
            ) from None
        except (OSError, h11.ProtocolError, EOFError) as exc:
            conn.close()
            raise AioError(f"{type(exc).__name__}: {exc}", sent=True) from exc
        except BaseException:  # cancelled mid-request: the connection's state is unknown
            conn.close()
            raise
        if not self._closed and conn.reusable():
            self._idle.append(conn)
        else:
            conn.close()
        return response

    def _take_idle(self) -> _Connection | None:
        """An idle connection the server has not closed meanwhile (a restarted node
        closes them all: reusing one would turn a clean failure into an unknown one)."""
        while self._idle:
            conn = self._idle.pop()
            if conn.reader.at_eof() or conn.writer.is_closing():
                conn.close()
                continue
            return conn
        return None

    async def _connect(self, timeout: float) -> _Connection:
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=self.ssl, limit=_READ
                )
        except TimeoutError:
            raise AioError(f"connect timed out after {timeout:g} s", sent=False) from None
        except (OSError, ssl.SSLError) as exc:  # refused, unreachable, TLS handshake failed
            raise AioError(f"{type(exc).__name__}: {exc}", sent=False) from exc
        return _Connection(reader, writer)

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()


def ssl_context(verify: bool, ca_bundle: str | None) -> ssl.SSLContext:
    """The TLS settings for HTTPS nodes: verification on unless ``verify`` is False."""
    ctx = ssl.create_default_context(cafile=ca_bundle)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class Pools:
    """A :class:`HostPool` per node URL, sharing headers and TLS settings."""

    def __init__(
        self, urls: list[str], headers: dict[str, str], ssl_context: ssl.SSLContext | None
    ) -> None:
        self._pools = {url: HostPool(url, headers, ssl_context) for url in urls}

    async def request(
        self,
        method: str,
        url: str,
        path: str,
        body: bytes | None,
        timeout: float,
        connect_timeout: float,
    ) -> Response:
        return await self._pools[url].request(method, path, body, timeout, connect_timeout)

    async def aclose(self) -> None:
        for pool in self._pools.values():
            pool.close()
