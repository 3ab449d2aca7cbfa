"""Nodes started with rqlited's flags introduce themselves before Raft starts.

rqlited's ``-join`` names the peers' Raft addresses only; the embedded node needs each
peer's id and HTTP address too. Each node listens on its Raft address and dials every
peer's: one JSON line each way (its :class:`NodeCard`), then the connection closes. A node
hands its Raft port to PySyncObj once every peer is *settled*:

- its own dial got the peer's card back: the peer recorded this node's card before
  answering, so both know each other; or
- it holds the peer's card (the peer dialled it) and the peer's Raft port no longer
  answers cards: the peer has handed its port to Raft, which it does only once its own
  dial to this node succeeded.

Every card learnt is written to ``DATA_DIR/rqlited-peers.json`` before it is answered,
so a restarted node needs nobody. With a cluster secret (``RQUEUE_CLUSTER_SECRET`` or
``-cluster-secret-file``) every card carries an HMAC of it and cards without a valid one
are ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

log = logging.getLogger(__name__)

PROTOCOL = "rqueue-hello/1"
PEERS_FILE = "rqlited-peers.json"
SECRET_ENV = "RQUEUE_CLUSTER_SECRET"
WILDCARDS = ("", "0.0.0.0", "::", "[::]")
#: how long one dial waits for a connection, and then for the answer
CONNECT_TIMEOUT = 1.0
ANSWER_TIMEOUT = 3.0
RETRY_PERIOD = 0.3
MAX_LINE = 4096


class DiscoveryError(RuntimeError):
    """The peers could not be learnt; the message is one line."""


@dataclass(frozen=True)
class NodeCard:
    """What one node tells the others about itself."""

    node_id: str
    raft: str  # advertised Raft address: its identity in Raft
    http: str  # advertised HTTP address
    http_bind: str  # the address its HTTP API listens on

    @classmethod
    def from_json(cls, obj: object) -> NodeCard | None:
        if not isinstance(obj, dict):
            return None
        try:
            card = cls(**{k: obj[k] for k in ("node_id", "raft", "http", "http_bind")})
        except (KeyError, TypeError):
            return None
        if not all(isinstance(v, str) and v for v in asdict(card).values()):
            return None
        return card


def reach_addr(card: NodeCard, raft_addr: str) -> str:
    """Where another node reaches ``card``'s HTTP API: its bind address, or, when it binds
    every interface, its Raft host with its HTTP port."""
    host, _, port = card.http_bind.rpartition(":")
    if host in WILDCARDS:
        return f"{raft_addr.rpartition(':')[0]}:{port}"
    return card.http_bind


def read_secret(secret_file: str | None, env: dict[str, str] | None = None) -> bytes | None:
    """The cluster secret: the file's contents, else ``$RQUEUE_CLUSTER_SECRET``, else None."""
    if secret_file is not None:
        try:
            return Path(secret_file).read_bytes().strip() or None
        except OSError as exc:
            raise DiscoveryError(
                f"cannot read the cluster secret file {secret_file}: {exc}"
            ) from None
    value = (os.environ if env is None else env).get(SECRET_ENV, "")
    return value.strip().encode("utf-8", "surrogateescape") or None


def encode(card: NodeCard, secret: bytes | None) -> bytes:
    body = json.dumps(asdict(card), sort_keys=True)
    mac = hmac.new(secret, body.encode(), hashlib.sha256).hexdigest() if secret else ""
    return (json.dumps({"protocol": PROTOCOL, "card": body, "mac": mac}) + "\n").encode()


def decode(line: bytes, secret: bytes | None) -> NodeCard | None:
    """The card in ``line``, or None (not this protocol, malformed, wrong or missing MAC)."""
    try:
        msg = json.loads(line)
        if not isinstance(msg, dict) or msg.get("protocol") != PROTOCOL:
            return None
        body = msg["card"]
        if secret is not None:
            want = hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()
            if not hmac.compare_digest(want, str(msg.get("mac", ""))):
                return None
        return NodeCard.from_json(json.loads(body))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _read_line(sock: socket.socket, deadline: float) -> bytes | None:
    """One line from ``sock``; None when none came by ``deadline`` or the connection
    ended or was reset (a peer that just handed its port to Raft may reset it)."""
    data = b""
    while b"\n" not in data and len(data) < MAX_LINE:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            chunk = sock.recv(MAX_LINE)
        except OSError:  # TimeoutError, ConnectionResetError, ...
            return None
        if not chunk:
            return None
        data += chunk
    return data.split(b"\n", 1)[0]


class Directory:
    """The cards this node knows, kept in ``DATA_DIR/rqlited-peers.json``."""

    def __init__(self, data_dir: Path, me: NodeCard, peers: Iterable[str]) -> None:
        self.path = data_dir / PEERS_FILE
        self.me = me
        self.wanted = list(peers)
        self.cards: dict[str, NodeCard] = {}
        self.lock = threading.Lock()
        with contextlib.suppress(OSError, ValueError):
            saved = json.loads(self.path.read_text())
            for obj in saved.get("peers", []):
                card = NodeCard.from_json(obj)
                if card is not None and card.raft in self.wanted:
                    self.cards[card.raft] = card

    def learn(self, card: NodeCard) -> bool:
        """Record a peer's card (written to disk before this returns); False if it is not
        one of the peers ``-join`` names."""
        if card.raft not in self.wanted:
            return False
        with self.lock:
            if self.cards.get(card.raft) != card:
                self.cards[card.raft] = card
                self._save()
        return True

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        state = {"self": asdict(self.me), "peers": [asdict(c) for c in self.cards.values()]}
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        os.replace(tmp, self.path)

    def complete(self) -> bool:
        with self.lock:
            return all(a in self.cards for a in self.wanted)


def _serve(
    server: socket.socket, directory: Directory, secret: bytes | None, stop: threading.Event
) -> None:
    server.settimeout(0.2)
    while not stop.is_set():
        try:
            conn, peer = server.accept()
        except TimeoutError:
            continue
        except OSError:
            return
        with conn:
            line = _read_line(conn, time.monotonic() + ANSWER_TIMEOUT)
            card = decode(line, secret) if line is not None else None
            if card is None or card.raft == directory.me.raft:
                continue
            if not directory.learn(card):
                log.warning("ignoring %s at %s: not one of -join's nodes", card.raft, peer[0])
                continue
            with contextlib.suppress(OSError):
                conn.sendall(encode(directory.me, secret))


def _dial(addr: str, directory: Directory, secret: bytes | None) -> str:
    """One introduction to ``addr``: "ok", "down" (no connection), or "other" (connected,
    but no card came back: the port speaks Raft now)."""
    host, _, port = addr.rpartition(":")
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT)
    except OSError:
        return "down"
    with sock:
        try:
            sock.sendall(encode(directory.me, secret))
        except OSError:
            return "other"
        line = _read_line(sock, time.monotonic() + ANSWER_TIMEOUT)
    card = decode(line, secret) if line is not None else None
    if card is None:
        return "other"
    if card.raft != addr:
        raise DiscoveryError(
            f"-join names {addr}, but the node there advertises {card.raft}: -join must list "
            "the nodes' advertised Raft addresses (-raft-adv-addr)"
        )
    directory.learn(card)
    return "ok"


def discover(
    me: NodeCard,
    bind: str,
    peers: list[str],
    data_dir: Path,
    timeout: float,
    secret_file: str | None = None,
) -> list[NodeCard]:
    """Every peer's card (see the module docstring), in ``peers`` order."""
    directory = Directory(Path(data_dir), me, peers)
    if directory.complete():
        return [directory.cards[a] for a in peers]
    secret = read_secret(secret_file)
    host, _, port = bind.rpartition(":")
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        server.bind((host.strip("[]"), int(port)))
    except OSError as exc:
        server.close()
        raise DiscoveryError(f"cannot listen on -raft-addr {bind}: {exc}") from None
    server.listen(16)
    stop = threading.Event()
    thread = threading.Thread(target=_serve, args=(server, directory, secret, stop), daemon=True)
    thread.start()
    settled: set[str] = set()
    last: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    log.info("introducing %s to %s", me.node_id, ", ".join(peers))
    try:
        while True:
            for addr in peers:
                if addr in settled:
                    continue
                last[addr] = _dial(addr, directory, secret)
                if last[addr] == "ok" or (last[addr] == "other" and addr in directory.cards):
                    settled.add(addr)
            if len(settled) == len(peers):
                break
            if time.monotonic() >= deadline:
                waiting = [f"{a} ({_WHY[last.get(a, 'down')]})" for a in peers if a not in settled]
                raise DiscoveryError(
                    f"-bootstrap-expect {len(peers) + 1}: after {timeout:g}s still waiting for "
                    + ", ".join(waiting)
                )
            time.sleep(RETRY_PERIOD)
    finally:
        stop.set()
        thread.join(timeout=ANSWER_TIMEOUT + 1.0)
        server.close()
    log.info(
        "peers known: %s", ", ".join(f"{c.node_id}={c.raft}" for c in directory.cards.values())
    )
    return [directory.cards[a] for a in peers]


_WHY = {
    "down": "nothing listens there",
    "other": "it answers, but not with its node card: a node started another way, or "
    "another cluster secret",
}
