"""Wiring: clock + database + Raft + HTTP API, and a clean shutdown on SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading

from .api import NodeService
from .clock import OffsetClock, OffsetClockError
from .config import NodeConfig, parse_args
from .database import Database
from .httpd import make_server
from .raft import RaftStore

log = logging.getLogger("harness.node")


def _check_bindable(flag: str, addr: str) -> None:
    host, _, port = addr.rpartition(":")
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host.strip("[]"), int(port)))
        except OSError as exc:
            raise SystemExit(f"harness.node: cannot listen on {flag} {addr}: {exc}") from None


def run(cfg: NodeConfig) -> int:
    """Run the node until SIGTERM/SIGINT; return the exit status."""
    try:
        clock = OffsetClock(str(cfg.clock_offset_file) if cfg.clock_offset_file else None)
    except OffsetClockError as exc:
        raise SystemExit(f"harness.node: {exc}") from None
    _check_bindable("--raft-addr", cfg.raft_addr)
    _check_bindable("--http-addr", cfg.http_addr)
    db = Database(now=clock.now)
    store = RaftStore(cfg, db)
    service = NodeService(cfg, store, db, clock)
    httpd = make_server(service)
    stopping = threading.Event()

    def stop(signum: int, _frame: object) -> None:
        if not stopping.is_set():
            stopping.set()
            log.info("signal %d: shutting down", signum)
            threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info(
        "node %s: http %s raft %s peers %s",
        cfg.node_id,
        cfg.http_addr,
        cfg.raft_addr,
        ",".join(p.node_id for p in cfg.peers) or "-",
    )
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()
        store.destroy()
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return run(parse_args(argv))
