"""Every error rqueue raises, in one tree.

::

    RqueueError                     base of everything below
    ├── Unavailable                 failed: certainly NOT applied (connection refused,
    │   │                           503 "leader not found", no node answered)
    │   └── ZoneRefused             every node rewrites 'now' off UTC (its local time
    │                               zone is not UTC): none may take a timed call
    ├── OutcomeUnknown              unknown: may or may not have been applied (timeout,
    │                               connection dropped after sending, HTTP 200 with a
    │                               top-level "error" such as "leadership lost while
    │                               committing log")
    ├── LeaseLost                   fenced: the lease expired or another worker holds the
    │                               message; nothing was changed
    ├── StatementError              a statement failed inside rqlite (SQL error); not applied
    ├── QueueNotFound               a named queue that was never created (``from_url``
    │                               without ``create=True``); nothing was sent to it
    ├── TransportClosed             the transport was closed before the call
    └── ProtocolError               rqlite answered something rqueue cannot parse

Each carries ``acked`` (False unless ``ack_and_claim`` failed after its ack applied).

Bad arguments raise the built-in ``ValueError`` or ``TypeError`` before anything is
sent. ``Unavailable``, ``StatementError``, ``QueueNotFound``, ``LeaseLost`` and
``TransportClosed`` are *definite*: the operation did not happen. ``OutcomeUnknown`` is
*indefinite*: retrying a publish may store it twice unless it carries a ``dedup_id``.
``ProtocolError`` is indefinite too: it can follow a write that was applied (a publish
whose answer lacks the new row's id, a claim whose read-back row cannot be parsed).
"""

from __future__ import annotations


class RqueueError(Exception):
    """Base class of every error rqueue raises (bad arguments excepted).

    ``acked`` is True only on an error from ``ack_and_claim`` raised *after* its ack
    certainly took effect: the error is the claim's, and the acked message is gone.
    """

    acked: bool = False


class Unavailable(RqueueError):
    """The operation certainly did not take effect: no node could take it."""


class ZoneRefused(Unavailable):
    """Every node rewrites ``'now'`` off UTC (its local time zone is not UTC), so none may
    stamp a timed call (rqueue._zone); certainly not applied. The message is one line
    naming the nodes, their offsets and the cure."""


class OutcomeUnknown(RqueueError):
    """The operation may or may not have taken effect.

    ``statement_failed`` is True when the node answered with a statement's error on
    ``/db/request``, where rqlite commits the request's other statements around one that
    fails to prepare: the same request would fail alike, so rqueue does not send it again.
    """

    statement_failed: bool = False


class LeaseLost(RqueueError):
    """The lease is no longer held by this token; ack, nack or extend changed nothing."""


class StatementError(RqueueError):
    """rqlite reported an error for a statement; the request was not applied."""


class QueueNotFound(RqueueError):
    """The named queue does not exist on these nodes: named queues are created on purpose
    (``from_url(..., queue=NAME, create=True)`` or ``python -m rqueue queues create
    NAME``), so that a misspelt name is an error, not a new empty queue. Nothing was
    written. The message names the queue and both ways to create it."""


class TransportClosed(RqueueError):
    """The transport has been closed."""


class ProtocolError(RqueueError):
    """rqlite's answer could not be understood; the operation may have taken effect."""
