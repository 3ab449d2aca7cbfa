"""Check a queue history for the anomalies the history format defines.

The format and the definitions are the project's public contract
(``docs/history-format.md``); this package follows it.

:func:`check` is a pure function of the events: it builds the model (:mod:`.model`: the
operations paired, the leases, each message's publishes and acks, the dead-letterings),
runs one finder per anomaly (:mod:`.finders`, :mod:`.deadletters`; each anomaly
registered once, with its finder, in :mod:`.registry`) and adds statistics
(:mod:`.statistics`). ``python -m harness check FILE`` is :mod:`harness.check_cli`.

Definitions, in short (the document is the authority):

* a lease's *certain window* is ``[claim.ok, claim.invoke + visibility]``, cut at the
  invoke of the holder's own ack/nack of it, stretched by each ``ok`` extend to
  ``extend.invoke + visibility``; its *expiry* (for stale acks: when it has certainly
  expired) is ``claim.ok + visibility``, stretched by each ``ok`` extend to
  ``extend.ok + visibility`` and by each extend whose outcome is unknown to
  ``extend.invoke + visibility``;
* ``ok`` and ``info`` acks (and dead-letters) count as possible acknowledgements, an
  operation still open at the end of the history as ``info``; a dead-letter by a lease's
  holder cuts that lease's window (and counts for stale acks) exactly as its ack would;
* a message's stored copies are the distinct ``seq`` its leases and dead-letterings
  name: more of them than its publishes that may have taken effect (and at least two) is
  ``duplicated``; ``delivered-after-ack``, ``stale-ack-accepted`` and ``over-delivered``
  compare leases and acknowledgements of one copy;
* each lease of a ``claim-many`` is a lease, each entry of an ``ack-many`` an ack with
  its own outcome; a delayed message (``delay`` on its publish) leased more than
  :data:`CLOCK_TOLERANCE` before its earliest publish invoke + delay is an
  ``early-delivery``.
"""

from .model import CLOCK_TOLERANCE, Dead, HistoryModel, Lease
from .registry import ANOMALIES, FINDERS
from .result import MAX_EXAMPLES, check
from .statistics import availability, statistics

__all__ = [
    "ANOMALIES",
    "CLOCK_TOLERANCE",
    "FINDERS",
    "MAX_EXAMPLES",
    "Dead",
    "HistoryModel",
    "Lease",
    "availability",
    "check",
    "statistics",
]
