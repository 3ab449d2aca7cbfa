"""A plain in-memory model of the seed's queue semantics, for side-by-side tests.

Time-independent: leases never lapse, parks never end and delayed messages never come
due within a test, so the model needs no clock. Claim times are a counter (round-robin order only).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Message:
    seq: int
    group: str
    event: str
    state: str = "free"  # free | leased | parked | delayed (held back while the head)
    token: str | None = None


@dataclass
class Group:
    priority: int
    last_claimed: int = 0


class SeedModel:
    def __init__(self) -> None:
        self.messages: dict[int, Message] = {}
        self.groups: dict[str, Group] = {}
        self._claims = 0

    def publish(
        self, seq: int, group: str, event: str, priority: int, delayed: bool = False
    ) -> None:
        self.messages[seq] = Message(seq, group, event, "delayed" if delayed else "free")
        self.groups.setdefault(group, Group(priority))

    def _busy(self, group: str) -> bool:
        mine = [m for m in self.messages.values() if m.group == group]
        head = min(mine, key=lambda m: m.seq)
        return head.state == "delayed" or any(m.state in ("leased", "parked") for m in mine)

    def claim(self, min_priority: int) -> Message | None:
        """The seed's selection: free message, group idle, priority floor, round-robin."""
        candidates = [
            m
            for m in self.messages.values()
            if m.state == "free"
            and not self._busy(m.group)
            and self.groups[m.group].priority >= min_priority
        ]
        if not candidates:
            return None
        best = min(candidates, key=lambda m: (self.groups[m.group].last_claimed, m.seq))
        self._claims += 1
        self.groups[best.group].last_claimed = self._claims
        best.state = "leased"
        return best

    def _held(self, seq: int, token: str) -> Message | None:
        m = self.messages.get(seq)
        return m if m is not None and m.state == "leased" and m.token == token else None

    def ack(self, seq: int, token: str) -> bool:
        m = self._held(seq, token)
        if m is None:
            return False
        del self.messages[seq]
        if not any(x.group == m.group for x in self.messages.values()):
            del self.groups[m.group]
        return True

    def nack(self, seq: int, token: str, park: bool) -> bool:
        m = self._held(seq, token)
        if m is None:
            return False
        m.state, m.token = ("parked" if park else "free"), None
        return True

    def extend(self, seq: int, token: str) -> bool:
        return self._held(seq, token) is not None
