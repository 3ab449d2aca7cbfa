"""Restart nodes in another time zone, and in UTC again: ``timezone``, recorded as
``timezone`` then ``timezone-reset``.

The target nodes restart together in a zone (``Cluster.set_time_zone``: rqlite and the
embedded node rewrite ``'now'`` in their local time), a zone file built by
:mod:`harness.zonefile`: ``offset`` seconds off UTC, and with a ``transition``, a
daylight-saving change by ``jump`` seconds that many seconds after the fault's start,
so that it happens while the nodes run; its end restarts them in UTC.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from .. import zonefile
from ..cluster.base import TIME_ZONES, Cluster, ClusterError
from .base import NODE_TARGETS, RECOVERY, Action, FaultKind, ParamReader, Stage
from .nodes import on_every_node

log = logging.getLogger(__name__)

#: a ``timezone`` fault's zone: its offset and jump are whole seconds that a zone file
#: can hold (harness.zonefile), the offset before and after the transition alike
ZONE_OFFSET_LIMIT = 89999


class Timezone(FaultKind):
    name = "timezone"
    f_start, f_end = "timezone", "timezone-reset"
    #: ``transition``: seconds into the window at which daylight saving moves the zone's
    #: offset by ``jump`` seconds (None: a fixed zone of ``offset`` seconds); ``jump``:
    #: with a transition, 3600 unless given
    params: ClassVar[Mapping[str, Any]] = {
        "offset": 0.0,
        "target": "leader",
        "transition": None,
        "jump": None,
    }
    #: it restarts its nodes in their new zone, and again in UTC at its end
    recovery = RECOVERY
    needs = frozenset({TIME_ZONES})
    #: a random schedule's window: the restart into the zone (2-3 s idle; on Docker at
    #: load 20 restarting every node took 11.8 s), then the daylight-saving change while
    #: the nodes run, then 4 s in the zone
    draw_length = (16.0, 20.0)

    @classmethod
    def draw(cls, rng: random.Random, length: float) -> dict[str, Any]:
        """A spring-forward (the change that makes live leases look expired to a stamp
        without the zone guard) 4 s before the window's end, from UTC or from UTC+01:00
        (from a zone behind UTC, every lease stamped before the restart looks hours
        longer, the groups stay locked and nothing is leased twice), on every node: a
        leader or minority restarted into a zone is failed over from, and its clients
        stick to the nodes they moved to, so the change on it may reach no request at all
        (a zone-blind queue then passed chaos on seeds 2 and 3); every node off UTC makes
        rqueue refuse timed calls, which is what it must do."""
        return {
            "offset": float(rng.choice((0, 3600))),
            "target": "all",
            "transition": float(max(4, math.floor(length) - 4)),
            "jump": 3600.0,
        }

    @classmethod
    def read(cls, r: ParamReader, length: float) -> dict[str, Any]:
        """The zone: whole seconds a zone file holds, off UTC somewhere in the window, its
        transition (if any) inside the window."""
        offset = r.number("offset", 0.0, minimum=-1e9)
        out: dict[str, Any] = {
            "offset": offset,
            "target": r.text("target", "leader", choices=NODE_TARGETS),
        }
        limit = ZONE_OFFSET_LIMIT
        if offset != int(offset) or abs(offset) > limit:
            raise r.fail("offset", f"whole seconds between -{limit} and {limit} (a zone's)", offset)
        if r.table.get("transition") is not None:
            at = r.number("transition", 0.0)
            if at >= length:
                raise r.fail(
                    "transition", f"seconds into the fault, under its duration ({length:g})", at
                )
            jump = r.number("jump", 3600.0, minimum=-limit)
            if jump == 0 or jump != int(jump) or abs(offset + jump) > limit:
                raise r.fail(
                    "jump",
                    f"whole seconds other than 0, the offset after it within ±{limit}",
                    jump,
                )
            out.update(transition=at, jump=jump)
        elif "jump" in r.table:
            raise r.fail("transition", "seconds into the fault when 'jump' is given")
        elif offset == 0:
            raise r.fail("offset", "a zone off UTC: an offset other than 0, or a 'transition'", 0)
        return out

    @classmethod
    def begin(cls, stage: Stage, params: Mapping[str, Any]) -> Action:
        nodes = stage.targets(params["target"])
        offset = int(params["offset"])
        value: dict[str, Any] = {"nodes": nodes, "offset": offset}
        at = math.inf
        if params["transition"] is None:
            tzif = zonefile.fixed(offset)
            value["zone"] = f"UTC{hhmm(offset)}"
        else:
            now = time.time()
            at = math.ceil(now + params["transition"])  # a zone file's moments are whole seconds
            jump = int(params["jump"] or 3600)
            tzif = zonefile.dst_jump(at, offset, jump)
            value.update(jump=jump, transition=round(at - now, 3))
            label = f"UTC{hhmm(offset)}, UTC{hhmm(offset + jump)}"
            value["zone"] = f"{label} from +{value['transition']:.1f} s"
        zones = _Zones(stage.cluster, nodes, at)
        return cls.action(value, zones.setter(tzif), zones.setter(None))


class _Zones:
    """Sets the time zone of ``nodes`` together; ``at``: when the zone's transition is."""

    def __init__(self, cluster: Cluster, nodes: list[str], at: float) -> None:
        self.cluster, self.nodes, self.at = cluster, nodes, at

    def setter(self, zone: bytes | None) -> Callable[[], None]:
        return lambda: self.set(zone)

    def set(self, zone: bytes | None) -> None:
        """Every node in ``zone`` at once (one restart's time, so that the transition
        finds them running), also after one fails; then raise (set_time_zone itself
        waits, bounded, for each node to answer)."""
        try:
            on_every_node(
                "set the time zone of",
                self.nodes,
                lambda n: self.cluster.set_time_zone(n, zone),
                together=True,
            )
        except ClusterError:
            if zone is not None:  # a failed start is not undone later: UTC now
                try:
                    self.set(None)
                except ClusterError:
                    log.exception("after a failed time zone change")
            raise
        if zone is not None and time.time() > self.at:
            log.warning(
                "timezone: the transition came %.1f s before %s ran in the zone: "
                "it happened before their start, not while they ran",
                time.time() - self.at,
                ",".join(self.nodes),
            )


def hhmm(seconds: int) -> str:
    """An offset as a zone names it: ``+01:00``, ``-03:30``, ``+00:00``."""
    sign = "-" if seconds < 0 else "+"
    h, rest = divmod(abs(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{sign}{h:02d}:{m:02d}" + (f":{s:02d}" if s else "")
