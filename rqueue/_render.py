"""How time enters a statement: ``{now}``, :data:`NOW` and the request's stamp.

Builders write ``{now}`` where the lease clock's current time goes and pass :data:`NOW`
at the matching place among the positional parameters; :meth:`Renderer.stmt` renders
it and checks that placeholders and parameters line up. Every value is a parameter;
nothing a caller passes is put into SQL text.

No write may depend on when or where it is applied: every replica applies each Raft
entry at its own moment (and a restarted node replays its log much later), so a time
function evaluated at apply time makes the replicas disagree. rqlite >= 8.33 rewrites
``'now'`` to a literal on the node that receives the request, but only where its own
SQL parser accepts the statement and its tree walk reaches the call: not inside a scalar
subquery, not in a ``WITH`` clause, not where an unquoted table name ``groups`` stands
where that parser rejects it as a keyword (``UPDATE groups``, ``DELETE FROM groups``,
``FROM groups``). So ``{now}`` in a write never becomes a time function:

- *server clock* (rqlite >= 8.33): a request whose statements need the time starts with
  :meth:`Renderer.stamp`, one top-level ``INSERT ... VALUES`` that rqlite rewrites,
  storing the receiving node's time in the one-row table ``rqueue_clock``; ``{now}``
  reads it back (:data:`CLOCK_REF`), a plain read of replicated data;
- otherwise the time is a bound parameter: the leader's clock as measured over the
  connection (:class:`rqueue._clock.LeaderClock`), or the caller's ``clock``.

Reads (``read=True``) are not replicated and use the answering node's clock: SQLite's own
UTC (:data:`SERVER_UTC`, ``julianday()`` with no argument, which rqlite never rewrites),
not ``'now'``, which rqlite rewrites in a strong read too, in the receiving node's local
time (:mod:`rqueue._zone`: a node whose zone is not UTC is refused for timed calls; its
answers to reads stay right).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ._models import Stmt

#: server time in epoch seconds, as SQL; rqlite >= 8.33 rewrites it to a literal on the
#: node that receives the request, where its parser reaches it (see the module's doc)
SERVER_NOW = "((julianday('now') - 2440587.5) * 86400.0)"
#: SQLite's own UTC time in epoch seconds: ``julianday()`` has no argument, so rqlite
#: never rewrites it (it rewrites date and time calls whose first argument is ``'now'``)
SERVER_UTC = "((julianday() - 2440587.5) * 86400.0)"
#: the stamped server time of this request, as a write reads it (server clock)
CLOCK_REF = "(SELECT ts FROM rqueue_clock WHERE id = 1)"
#: the stamp: a top-level VALUES that rqlite's parser accepts and rewrites (unguarded: the
#: transports send :func:`rqueue._zone.stamp`, guarded against a node off UTC)
STAMP = Stmt(f"INSERT OR REPLACE INTO rqueue_clock (id, ts) VALUES (1, {SERVER_NOW})")
#: resolution of the server clock: rqlite prints the rewritten ``now`` as a Julian day
#: with six decimals, so each server timestamp is rounded by up to half of this
SERVER_CLOCK_STEP = 86400.0 / 1e6


class _Now:
    def __repr__(self) -> str:
        return "NOW"


#: stands in the parameter list where the lease clock's ``now`` goes
NOW = _Now()

_PLACEHOLDER = re.compile(r"\?|\{now\}")


class Renderer:
    """The rendering every builder of :class:`rqueue._statements.Statements` uses (a base
    of that class, which sets ``server_clock``, True where times come from the server,
    and ``clock``, the worker's clock where the server cannot stamp time)."""

    server_clock: bool
    clock: Callable[[], float]
    #: the guard of the stamp against nodes off UTC (:mod:`rqueue._zone`; None: none)
    zone: Any = None

    def stmt(self, sql: str, *params: Any, read: bool = False) -> Stmt:
        """Render ``{now}`` placeholders and their :data:`NOW` parameters.

        With the server clock a write reads the request's stamp (:data:`CLOCK_REF`:
        the request must start with :meth:`stamp`), a read the answering node's UTC.
        """
        slots = _PLACEHOLDER.findall(sql)
        if len(slots) != len(params):
            raise AssertionError(f"{len(slots)} placeholders but {len(params)} params: {sql}")
        for slot, param in zip(slots, params, strict=True):
            if (slot == "{now}") != (param is NOW):
                raise AssertionError(f"placeholder {slot} does not match {param!r}: {sql}")
        if self.server_clock:
            ref = SERVER_UTC if read else CLOCK_REF
            return Stmt(sql.replace("{now}", ref), tuple(p for p in params if p is not NOW))
        if "{now}" not in sql:
            return Stmt(sql, params)
        now = float(self.clock())
        return Stmt(sql.replace("{now}", "?"), tuple(now if p is NOW else p for p in params))

    def stamp(self) -> Stmt | None:
        """The statement a request starts with when its writes read :data:`CLOCK_REF`:
        guarded by :attr:`zone` where there is one (the transports send it again with a
        fresh reference at each try)."""
        if not self.server_clock:
            return None
        return STAMP if self.zone is None else self.zone.stamp()

    def needs_stamp(self, stmts: Sequence[Stmt]) -> bool:
        """Whether ``stmts`` read the stamped time (so the request must stamp it first)."""
        return self.server_clock and any(CLOCK_REF in s.sql for s in stmts)
