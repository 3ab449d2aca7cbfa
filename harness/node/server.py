"""Wiring: clock + database + Raft + HTTP API, and a clean shutdown on SIGTERM/SIGINT."""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
import time

from pysyncobj.encryptor import HAS_CRYPTO

from .api import NodeService
from .clock import OffsetClock, OffsetClockError
from .config import NodeConfig, exposure_refusal, parse_args
from .database import Database
from .httpd import make_server
from .localzone import resolve
from .membership import JoinError, join
from .raft import RaftStore
from .versions import get as get_version

log = logging.getLogger("harness.node")
#: a shorter cluster secret is accepted with a warning
MIN_SECRET_BYTES = 16


def _check_bindable(flag: str, addr: str) -> None:
    host, _, port = addr.rpartition(":")
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host.strip("[]"), int(port)))
        except OSError as exc:
            raise SystemExit(f"harness.node: cannot listen on {flag} {addr}: {exc}") from None


def refusal(cfg: NodeConfig) -> str | None:
    """Why the node must not start at all (one line), or None."""
    why = exposure_refusal(cfg)
    if why is None and cfg.cluster_secret is not None and not HAS_CRYPTO:
        why = (
            "a cluster secret needs the 'cryptography' package, which is not installed "
            "(pip install 'rqueue[harness]')"
        )
    return why


def run(cfg: NodeConfig) -> int:
    """Run the node until SIGTERM/SIGINT; return the exit status (2: refused to start)."""
    why = refusal(cfg)
    if why is not None:
        print(f"harness.node: {why}", file=sys.stderr, flush=True)
        return 2
    if cfg.cluster_secret is not None and len(cfg.cluster_secret) < MIN_SECRET_BYTES:
        log.warning(
            "the cluster secret is shorter than %d bytes: use a long random one",
            MIN_SECRET_BYTES,
        )
    zone = resolve()  # once, from this process's TZ, as Go's time package does
    try:
        clock = OffsetClock(str(cfg.clock_offset_file) if cfg.clock_offset_file else None, zone)
    except OffsetClockError as exc:
        raise SystemExit(f"harness.node: {exc}") from None
    log.info("node %s: %s", cfg.node_id, zone.describe(time.time() + clock.offset))
    _check_bindable("--raft-addr", cfg.raft_addr)
    _check_bindable("--http-addr", cfg.http_addr)
    joining = False
    if cfg.join:
        try:
            cfg, joining = join(cfg, cfg.join)
        except JoinError as exc:
            print(f"harness.node: {exc}", file=sys.stderr, flush=True)
            return 1
    db = Database(
        now=clock.now, api=get_version(cfg.rqlite_version).api, foreign_keys=cfg.foreign_keys
    )
    store = RaftStore(cfg, db, clock.now, joining=joining)
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
        "node %s: http %s raft %s peers %s raft auth %s",
        cfg.node_id,
        cfg.http_addr,
        cfg.raft_addr,
        ",".join(p.node_id for p in cfg.peers) or "-",
        "cluster secret" if cfg.cluster_secret is not None else "none (loopback only)",
    )
    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        httpd.server_close()
        service.close()
        store.destroy()
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return run(parse_args(argv))
