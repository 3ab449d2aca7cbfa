"""``python -m harness serve [FOLDER]``: the runs under a folder, in a browser.

``/`` lists the runs and matrices (:mod:`.index`); every other path is a file under the
folder, and nothing outside it: a path with ``..``, or one that resolves (through a
symbolic link) outside the folder, is not found. Two pages are made when asked, never
written: a run's ``report.html`` when its folder has none (an older run, or one whose
report failed), and a matrix's table (``matrix.html`` beside ``matrix.json``). The
server (the standard library's ``ThreadingHTTPServer``) listens on loopback unless
``--host`` says otherwise.
"""

from __future__ import annotations

import argparse
import ipaddress
import mimetypes
import socket
import sys
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import EXIT_HARNESS, EXIT_OK
from ..store import HISTORY, RUN, SCENARIO
from .index import MATRIX_HTML, MATRIX_JSON, index_page, matrix_page
from .page import REPORT_HTML
from .plain import SHRINK_HTML, SHRINK_MD, failed_page, shrink_page

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8000


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="list the runs under a folder in a browser, with their reports",
        description=(
            "Serve FOLDER (default results/) over HTTP: / lists its runs (scenario, "
            "subject, backend, seed, verdict, date; filtered in the page) and matrices, "
            "each linked to its report.html (made when opened if the run has none) or "
            "its table. Only files under FOLDER are served. Ctrl-C stops it."
        ),
    )
    p.add_argument("folder", nargs="?", default="results", type=Path, help="default: results")
    p.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0: any free"
    )
    p.add_argument(
        "--host",
        default=LOOPBACK,
        help=f"address to listen on (default {LOOPBACK}: this machine only; another "
        "address lets whoever reaches it read every run)",
    )
    p.set_defaults(handler=main_serve)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {port}")
    return port


def main_serve(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C; 2 with one line on stderr when the folder or address is bad."""
    try:
        server = make_server(args.folder, args.host, args.port)
    except ValueError as e:
        print(f"harness: error: {e}", file=sys.stderr)
        return EXIT_HARNESS
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in str(host) else host
    print(f"serving {server.root} at http://{shown}:{port}/ (Ctrl-C stops)", flush=True)
    if not _is_loopback(args.host):
        print(f"note: listening on {args.host}: not only this machine can read the runs")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return EXIT_OK


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class RunServer(ThreadingHTTPServer):
    """The HTTP server of one folder (``root``, resolved)."""

    daemon_threads = True

    def __init__(self, root: Path, address: tuple[str, int]) -> None:
        self.root = root
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler)


def make_server(folder: Path, host: str, port: int) -> RunServer:
    """A server of ``folder`` bound to ``host``:``port`` (not serving yet); ``ValueError``
    saying why when the folder is no folder or the address cannot be bound."""
    if not folder.is_dir():
        raise ValueError(f"serve: {folder} is not a folder (give the folder holding the runs)")
    try:
        return RunServer(folder.resolve(), (host, port))
    except OSError as e:  # socket.gaierror too: an unknown host name
        raise ValueError(f"serve: cannot listen on {host}:{port}: {e.strerror or e}") from None


class Handler(BaseHTTPRequestHandler):
    """GET and HEAD of the index, the files under the folder and the pages made on request."""

    server: RunServer
    server_version = "rqueue-harness"

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"serve: {self.address_string()} {format % args}\n")

    def _answer(self, body: bool) -> None:
        root = self.server.root
        path = urlsplit(self.path).path
        if path in ("/", "/index.html"):
            return self._send(index_page(root).encode(), "text/html; charset=utf-8", body)
        target = resolve(root, path)
        if target is None:
            return self._error(HTTPStatus.NOT_FOUND, "not found")
        if target.is_dir():
            return self._redirect(path.rstrip("/") + "/" + _page_of(target))
        if target.is_file():
            kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            if kind.startswith("text/") or kind in ("application/json", "text/html"):
                kind += "; charset=utf-8"
            try:
                return self._send(target.read_bytes(), kind, body)
            except OSError:
                return self._error(HTTPStatus.NOT_FOUND, "not found")
        try:
            page = self._made(root, target)
        except Exception as e:  # a run folder the report cannot read: say so, keep serving
            return self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}")
        if page is None:
            return self._error(HTTPStatus.NOT_FOUND, "not found")
        return self._send(page.encode(), "text/html; charset=utf-8", body)

    def _made(self, root: Path, target: Path) -> str | None:
        """A page made on request for a missing ``target``, or None."""
        folder = target.parent
        if target.name == MATRIX_HTML and (folder / MATRIX_JSON).is_file():
            return matrix_page(root, folder)
        if target.name == REPORT_HTML and (folder / HISTORY).is_file():
            from ..report import report_parts
            from .page import render

            return render(report_parts(folder))
        if target.name == REPORT_HTML and any((folder / f).is_file() for f in (RUN, SCENARIO)):
            return failed_page(root, folder)
        if target.name == SHRINK_HTML and (folder / SHRINK_MD).is_file():
            return shrink_page(root, folder)
        return None

    def _send(self, data: bytes, kind: str, body: bool) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _redirect(self, location: str) -> None:
        self.send_response(HTTPStatus.FOUND)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _error(self, status: HTTPStatus, text: str) -> None:
        data = f"{status.value} {text}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)


def _page_of(folder: Path) -> str:
    """The page a folder's URL leads to: a matrix's table, a shrink's result, or a run's
    report (made when opened, if the folder has none)."""
    if (folder / MATRIX_JSON).is_file():
        return MATRIX_HTML
    if (folder / SHRINK_MD).is_file() and not (folder / HISTORY).is_file():
        return SHRINK_HTML
    return REPORT_HTML


def resolve(root: Path, url_path: str) -> Path | None:
    """The path under ``root`` (resolved) that ``url_path`` names, or None when it names
    none: a ``..`` or ``.`` segment, a backslash or NUL, or a path resolving outside
    ``root`` (a symbolic link out of it). The path need not exist."""
    parts = unquote(url_path).split("/")
    if any(p in (".", "..") or "\\" in p or "\0" in p for p in parts):
        return None
    target = root.joinpath(*[p for p in parts if p])
    try:
        resolved = target.resolve()
    except (OSError, RuntimeError):
        return None
    return resolved if resolved == root or resolved.is_relative_to(root) else None
