"""The typed records the checker's model is built from and the finders read.

Every record names its fields: a finder reads ``acked[msg].i_ok``, never ``acked[msg][2]``.
The small ones are :class:`~typing.NamedTuple` (cheap, and they still unpack where a
caller wants all of a record); a lease, which the model completes as the history goes
on, is a mutable dataclass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

INF = math.inf


class Call(NamedTuple):
    """One client operation, its events paired: the invoke, the completion (None while
    it is still open at the end of the history) and its outcome. The model keeps the
    claims and the reads of the dead-letter queue as these."""

    inv: dict
    comp: dict | None
    #: ``ok``, ``fail``, ``info``, or ``open`` (no completion)
    outcome: str

    @property
    def process(self) -> int:
        return self.inv["process"]

    @property
    def value(self) -> Any:
        """The invoke's value (the call's arguments), None if it has none."""
        return self.inv.get("value")

    @property
    def t_inv(self) -> float:
        return self.inv["time"]

    @property
    def i_inv(self) -> int:
        return self.inv["index"]

    @property
    def done(self) -> dict:
        """The completion event (only for a completed call)."""
        return self.comp  # type: ignore[return-value]

    @property
    def t_ok(self) -> float:
        """The completion's time (only for a completed call)."""
        return self.done["time"]

    @property
    def i_ok(self) -> int:
        """The completion's index, -1 for a call still open."""
        return -1 if self.comp is None else self.comp["index"]


class Stamp(NamedTuple):
    """One event of an operation: a time (which one, the field holding it says) and the
    index of the event it comes from."""

    time: float
    index: int


class OpStamp(NamedTuple):
    """An operation: a time (its invoke's or its completion's, as the field holding it
    says) and the indices of its invoke and completion (-1 while open)."""

    time: float
    i_inv: int
    i_ok: int


class Sighting(NamedTuple):
    """Where a stored copy of a message was first seen: the invoke and ok indices of
    the claim that leased or dead-lettered it, or of the read that listed it."""

    i_inv: int
    i_ok: int


class Form(NamedTuple):
    """How a publish gave a message: its group as text and its body's digest (or None)."""

    group: str
    digest: str | None


@dataclass(slots=True, eq=False)
class Lease:
    """A claim that returned a message, with what its holder did with it."""

    process: int
    i_inv: int  # the claim's invoke and ok indices
    i_ok: int
    ci: float  # the claim's invoke and ok times
    co: float
    group: Any
    msg: Any
    token: Any
    digest: str | None  # of the delivered body, when the history records it
    #: certain end before the cut: claim invoke + visibility, stretched by ok extends only
    stretch: float
    #: for stale acks: the latest the lease can end (it may apply as late as claim ok)
    expiry: float
    cut: float = INF  # invoke of the holder's first ack/nack/dead-letter
    #: the holder's ok acks/nacks/dead-letters: (invoke time, invoke index, ok index)
    releases: list[OpStamp] = field(default_factory=list)
    #: the stored copy the lease names (its ``seq``), None when it names none
    seq: Any = None

    @property
    def end(self) -> float:
        """End of the certain validity window."""
        return min(self.stretch, self.cut)


@dataclass(frozen=True, slots=True)
class Dead:
    """One dead-lettering: by a claim (``ci``/``co``, its process) or seen by a read
    (``process`` None)."""

    msg: Any
    ci: float
    co: float
    i_inv: int
    i_ok: int
    process: int | None

    @classmethod
    def by(cls, msg: Any, call: Call, by_claim: bool) -> Dead:
        """The dead-lettering of ``msg`` by the claim ``call`` or seen by the read ``call``."""
        return cls(
            msg, call.t_inv, call.t_ok, call.i_inv, call.i_ok, call.process if by_claim else None
        )
