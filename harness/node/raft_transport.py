"""PySyncObj's TCP transport, made to keep its links alive (see docs/embedded-node.md).

PySyncObj opens one TCP connection per pair of nodes (the node with the larger address
dials) and calls a connection dead when nothing was *read* from it for
``connectionTimeout`` (3.5 s). Three of its habits cost elections after a leader dies:

- **Idle links die on first use.** Followers send nothing to each other while a leader
  lives, so their link goes quiet for as long as the leader does. The first vote request
  after the leader's death finds it "timed out": the sender drops it with the connection
  and so does the receiver, which checks the timeout before reading. The election is
  lost and another election timeout passes before the next one. Here every node sends a
  small keepalive on any link it has sent nothing on for :data:`KEEPALIVE_PERIOD`, so a
  live link is never idle and the timeout only ever fires on a dead one.
- **A connect attempt has no timeout.** While a connection is being made PySyncObj
  neither times it out nor retries, so a lost SYN (a partition's DROP rule, a full accept
  queue of a paused node) leaves the link down until the kernel's own SYN retransmission
  (1, 3, 7, 15, 31 s after the first): long after the network is back, the link is still
  down, and a node with no link to anyone never starts an election. Here an attempt not
  connected within :data:`CONNECT_TIMEOUT` is abandoned; the next one sends a fresh SYN.
- **Reconnecting inside a socket callback.** When a connection's read timeout fires in
  the middle of handling one of its socket events, PySyncObj reconnects at once from the
  disconnect callback, and the rest of that event's handling then runs against the *new*
  socket: it is declared connected before its handshake is done. Here reconnects only
  happen from the transport's tick.

With a cluster secret, every message is checked by PySyncObj's Fernet encryptor before it
is unpickled; PySyncObj drops a connection whose message fails that check without a word.
Here such a failure is logged (at most every :data:`AUTH_WARNING_PERIOD`), so that a node
with another secret, or none, shows up in the log of the node it tries to talk to.

An incoming connection whose first message is not a node address (a Raft message on a
link whose handshake went wrong) is closed with a warning; PySyncObj raised a
``TypeError`` out of its poll loop on every message of it, skipping the other sockets'
events of that round.

PySyncObj looks a peer's name up once per ten minutes, so a peer whose address changed
(a container started again gets a new one on its network) stayed unreachable that long.
Here a name is looked up again when its link is redialled, at most every
:data:`DNS_CACHE_TIME` seconds (only dialling looks names up; a live link never does).

**A follower keeps its link to the leader through the leader's own removal in the log.**
PySyncObj applies a configuration change as soon as the entry is appended, and drops the
link of a removed member. A node catching up (a joiner replaying the whole log, a lagging
follower) that replays "remove L" ... "add L" for the node L that leads it now dropped its
link to L at the removal, in the middle of the catch-up: the later "add L" never arrived,
L was refused as an address outside the configuration (or no longer dialled), and the node
stayed cut off from its leader for good. A node L that leads goes on leading after its
removal only until it commits it and steps down (:meth:`RaftStore.remove_self`), so such a
removal is followed by L's return further down the log, or by L stepping down: here the
link to the node this follower follows is kept (the member is out of the configuration
all the same) until L is added back or another leader takes over. PySyncObj's
``dropNode`` also forgot to report the dropped link as
down; here it is, so a member added back logs its link coming up.
"""

from __future__ import annotations

import logging
import select
from typing import Any

from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.monotonic import monotonic
from pysyncobj.tcp_connection import CONNECTION_STATE
from pysyncobj.transport import TCPTransport

log = logging.getLogger(__name__)

#: send a keepalive on a link nothing was sent on for this long (s); well under the
#: 3.5 s receive timeout, so a starved tick or two does not kill a live link
KEEPALIVE_PERIOD = 1.0
#: give up a connect attempt that has not completed after this long (s); a handshake
#: with a live peer takes milliseconds, even with the peer's process stopped
CONNECT_TIMEOUT = 1.0
#: how long a peer's looked-up address is used before its name is looked up again (s)
DNS_CACHE_TIME = 2.0
#: the keepalive message; never handed to Raft
KEEPALIVE = {"type": "rqueue_keepalive"}
#: at most one "failed authentication" warning per this many seconds
AUTH_WARNING_PERIOD = 10.0


class CheckedEncryptor:
    """PySyncObj's encryptor (Fernet), logging the messages that fail authentication."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._last_warning = -AUTH_WARNING_PERIOD

    def encrypt_at_time(self, data: bytes, current_time: int) -> bytes:
        return self._inner.encrypt_at_time(data, current_time)

    def extract_timestamp(self, token: bytes) -> int:
        try:
            return self._inner.extract_timestamp(token)
        except Exception:
            self._warn()
            raise

    def decrypt(self, token: bytes) -> bytes:
        try:
            return self._inner.decrypt(token)
        except Exception:
            self._warn()
            raise

    def _warn(self) -> None:
        now = monotonic()
        if now - self._last_warning >= AUTH_WARNING_PERIOD:
            self._last_warning = now
            log.warning(
                "a raft message failed authentication: a node with another cluster secret, "
                "or none, is trying to talk to this one (connection dropped)"
            )


def _writable(fd: int | None) -> bool:
    """Whether a connecting socket has finished its handshake (or failed) already."""
    if fd is None:
        return True
    try:
        return bool(select.select([], [fd], [], 0)[1])
    except (OSError, ValueError):
        return True  # closed under us: let PySyncObj's own event handling see it


class LinkTransport(TCPTransport):
    """:class:`TCPTransport` with keepalives, a connect timeout and tick-only reconnects."""

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
        # SyncObj has just set PySyncObj's 600 s from its configuration: shorten it
        globalDnsResolver().setTimeouts(DNS_CACHE_TIME, DNS_CACHE_TIME)
        self._last_sent: dict[Any, float] = {}
        self._links_up: set[Any] = set()
        #: removed from the configuration while this follower follows them: link kept
        self._kept: set[Any] = set()
        self._closing = False
        self._in_tick = False
        inner = syncObj.encryptor
        self._encryptor = CheckedEncryptor(inner) if inner is not None else None
        super().__init__(syncObj, selfNode, otherNodes)

    # -- membership changes ---------------------------------------------------------------
    def _follows(self, node: Any) -> bool:
        """Whether this node is a follower whose leader is ``node``, with a link to it."""
        sync = self._syncObj
        return (
            not self._closing
            and node in self._connections
            and not sync._isLeader()
            and sync._getLeader() == node
        )

    def dropNode(self, node: Any) -> None:
        if self._follows(node):
            if node not in self._kept:
                log.info("raft link to %s kept: it leads this node, it will be added back", node)
                self._kept.add(node)
            return
        self._kept.discard(node)
        was_up = node in self._links_up
        super().dropNode(node)
        self._last_sent.pop(node, None)
        if was_up:  # PySyncObj unlinks the connection first: nobody hears it go down
            self._onNodeDisconnected(node)

    def addNode(self, node: Any) -> None:
        if node in self._kept:  # back in the configuration: its link never went away
            self._kept.discard(node)
            self._nodeAddrToNode[node.address] = node
            return
        super().addNode(node)
        conn = self._connections.get(node)
        if conn is not None and self._encryptor is not None:
            conn.encryptor = self._encryptor

    def _onNewIncomingConnection(self, conn: Any) -> None:
        super()._onNewIncomingConnection(conn)
        if self._encryptor is not None:
            conn.encryptor = self._encryptor

    # -- reconnects from the tick only ------------------------------------------------------
    def _connectIfNecessarySingle(self, node: Any) -> bool:
        if not self._in_tick:
            return False  # from a disconnect callback: the next tick reconnects
        return super()._connectIfNecessarySingle(node)

    def destroy(self) -> None:
        self._closing = True
        self._kept.clear()
        super().destroy()

    def _onTick(self) -> None:
        for node in [n for n in self._kept if not self._follows(n)]:
            self.dropNode(node)  # another leader now, and it was never added back
        self._in_tick = True
        try:
            super()._onTick()  # bind if needed, connect to the peers we dial
        finally:
            self._in_tick = False
        now = monotonic()
        for node in list(self._nodes):
            conn = self._connections.get(node)
            if conn is None:
                continue
            if conn.state == CONNECTION_STATE.CONNECTING:
                started = self._lastConnectAttempt.get(node, now)
                if now - started > CONNECT_TIMEOUT and not _writable(conn.fileno()):
                    log.info(
                        "raft link to %s: no connection after %.1f s, retrying", node, now - started
                    )
                    conn.disconnect()
            elif (
                conn.state == CONNECTION_STATE.CONNECTED
                and node in self._links_up
                and now - self._last_sent.get(node, 0.0) > KEEPALIVE_PERIOD
            ):
                self.send(node, KEEPALIVE)

    # -- keepalives -----------------------------------------------------------------------
    def send(self, node: Any, message: Any) -> bool:
        sent = super().send(node, message)
        if sent:
            self._last_sent[node] = monotonic()
        return sent

    def _onMessageReceived(self, node: Any, message: Any) -> None:
        if isinstance(message, dict) and message.get("type") == KEEPALIVE["type"]:
            return  # reading it was the point: the link's receive timeout restarts
        super()._onMessageReceived(node, message)

    # -- handshakes -----------------------------------------------------------------------
    def _onIncomingMessageReceived(self, conn: Any, message: Any) -> None:
        if self._syncObj.encryptor is None and not isinstance(message, str | list):
            log.warning(
                "closing an incoming raft connection whose first message is a %s, "
                "not a node address",
                type(message).__name__,
            )
            self._unknownConnections.discard(conn)
            conn.disconnect()
            return
        super()._onIncomingMessageReceived(conn, message)

    # -- link state in the log ------------------------------------------------------------
    def _onNodeConnected(self, node: Any) -> None:
        if node not in self._links_up:
            self._links_up.add(node)
            self._last_sent[node] = 0.0  # a keepalive goes out on the next tick
            log.info("raft link to %s up", node)
        super()._onNodeConnected(node)

    def _onNodeDisconnected(self, node: Any) -> None:
        if node in self._links_up:
            self._links_up.discard(node)
            log.info("raft link to %s down", node)
        super()._onNodeDisconnected(node)
