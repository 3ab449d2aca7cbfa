"""A TCP relay that loses one answer after the server sent it: the server did the work,
the client never hears of it (the fault between a follower and its leader that rqlite
v10's cluster client answers by sending the command again)."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

#: what happens to the connection whose answer is lost
MODES = ("close", "reset", "hold")


class ReplyLossRelay:
    """Listens on a loopback port and relays every connection to ``target`` (HOST:PORT).
    After :meth:`lose_next`, the first answer bytes that come back on a connection (on
    the next ``count`` connections that answer) are not passed on: the client's side is
    closed (``close``), reset (``reset``) or left open with nothing more relayed
    (``hold``, until the client gives up)."""

    def __init__(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host, int(port))
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.addr = f"127.0.0.1:{self._srv.getsockname()[1]}"
        self._lock = threading.Lock()
        self._armed: str | None = None
        self._left = 0
        self.lost = 0
        self.connections = 0
        self._socks: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def lose_next(self, mode: str, count: int = 1) -> None:
        """Lose the next ``count`` answers (``mode`` one of :data:`MODES`)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        with self._lock:
            self._armed, self._left = mode, count

    def disarm(self) -> None:
        """Lose no more answers."""
        with self._lock:
            self._armed, self._left = None, 0

    def close(self) -> None:
        self._closed = True
        self._srv.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._srv.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=5.0)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self.connections += 1
                self._socks += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        """Copy ``src`` to ``dst``; on the answer side, lose the armed answer."""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if answers:
                    with self._lock:
                        mode = self._armed
                        if mode:
                            self.lost += 1
                            self._left -= 1
                            self._armed = mode if self._left > 0 else None
                    if mode == "hold":
                        while src.recv(65536):  # the rest of it, never passed on
                            pass
                        return
                    if mode == "reset":
                        linger = struct.pack("ii", 1, 0)
                        dst.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                        dst.shutdown(socket.SHUT_RD)  # wakes the other pump; close resets
                    elif mode == "close":
                        dst.shutdown(socket.SHUT_RDWR)  # the FIN now, not when both let go
                    if mode:
                        break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.close()
