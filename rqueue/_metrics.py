"""What the worker's and the exporter's metrics share: the ``--metrics-addr`` they listen
on, the client library (``prometheus_client``, the ``metrics`` extra) loaded only when
asked for, and the HTTP server that serves ``/metrics``.

The address: ``HOST:PORT`` with HOST an IP address (``[::1]:9464`` for IPv6) or
``localhost``, or a bare ``PORT``, which means ``127.0.0.1:PORT``: loopback unless another
address is written out (``0.0.0.0:9464`` listens on every interface, on purpose).
``:PORT`` is refused: elsewhere it means every interface, here it would mean loopback,
and either reading surprises someone. Port 0 lets the system pick one; the start-up line
says which.

Importing this module imports nothing of ``prometheus_client``: :func:`client` does.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

#: the one line that says how to get the client library
INSTALL = "pip install 'rqueue[metrics]'"
#: the host a bare port listens on
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Address:
    """Where ``/metrics`` is served: an IP address (never a name) and a port (0: any)."""

    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.host).is_loopback

    def url(self, port: int | None = None) -> str:
        """``http://HOST:PORT/metrics`` (with the port bound, when given)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}/metrics"


def parse_address(text: str, flag: str = "--metrics-addr") -> Address:
    """The address ``text`` names; a :class:`ValueError` with one line naming ``flag``."""
    text = text.strip()
    if text.isdigit():
        return Address(LOOPBACK, _port(text, text, flag))
    host, sep, port = text.rpartition(":")
    if not sep:
        raise ValueError(f"{flag}: {text!r} is not HOST:PORT or PORT (for example 127.0.0.1:9464)")
    if not host:
        raise ValueError(
            f"{flag}: {text!r} names no host: write 127.0.0.1:{port} (this machine only) "
            f"or 0.0.0.0:{port} (every interface)"
        )
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"{flag}: {text!r}: an IPv6 address goes in brackets, as [::1]:{port}")
    if host == "localhost":
        host = LOOPBACK
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(
            f"{flag}: {text!r}: HOST must be an IP address or localhost, got {host!r}"
        ) from None
    return Address(str(ip), _port(port, text, flag))


def _port(port: str, text: str, flag: str) -> int:
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{flag}: {text!r}: PORT must be a number from 0 to 65535")
    return int(port)


def client() -> Any:
    """The ``prometheus_client`` module; a :class:`ValueError` saying how to install it."""
    try:
        import prometheus_client
    except ImportError:
        raise ValueError(f"metrics need the prometheus_client library: {INSTALL}") from None
    return prometheus_client


def registry() -> Any:
    """A registry of its own (so that two in one process never collide) with the
    process's standard metrics: CPU, memory, file descriptors, Python's GC and version."""
    prom = client()
    prom.disable_created_metrics()  # no ``_created`` series beside every counter
    reg = prom.CollectorRegistry()
    prom.ProcessCollector(registry=reg)
    prom.PlatformCollector(registry=reg)
    prom.GCCollector(registry=reg)
    return reg


class Server:
    """``/metrics`` of ``registry`` served at ``address`` on a daemon thread."""

    def __init__(self, address: Address, registry: Any, flag: str = "--metrics-addr") -> None:
        prom = client()
        try:
            self._httpd, self._thread = prom.start_http_server(
                address.port, addr=address.host, registry=registry
            )
        except OSError as exc:
            shown = address.url().removeprefix("http://").removesuffix("/metrics")
            reason = exc.strerror or str(exc)
            raise ValueError(f"{flag}: cannot listen on {shown}: {reason}") from None
        self.address = address
        #: the port listened on (the one the system picked, for port 0)
        self.port: int = self._httpd.server_port
        self.url = address.url(self.port)

    def close(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5.0)
