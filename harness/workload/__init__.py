"""The client workload: publishers and claimers driving a subject, every call recorded.

Publishers (threads) each own a few groups and publish to them one message at a time;
every event carries a run-unique ``msg`` id. Claimers claim, "work" for a random time
and then ack, or nack (at once or with a delay), or stall past their visibility, or
extend their lease midway; with ``workload.ack_and_claim`` an ack is sometimes
``ack_and_claim``, whose lease is worked on next. Some claimers are threads with the
subject's sync client, the others are tasks on one asyncio loop with its async client;
both run the same claimer loop, written once as a generator of steps (:class:`Wait`,
:class:`ClientCall`) that a thread or a task drives (:mod:`.plans`, :mod:`.workers`).

Every call becomes an ``invoke`` and one completion in the history
(docs/history-format.md): ``ok``; ``fail`` for rqueue's definite failures
(``Unavailable``, ``StatementError``, ``LeaseLost``, ``TransportClosed``); ``info`` for
``OutcomeUnknown`` and anything unexpected. A process that got ``info`` retires and its
worker carries on under a new process number. ``ack_and_claim`` becomes two overlapping
operations, the ack on the claimer's process and the claim on a companion process of the
same claimer, which then holds the lease it returned (:class:`Fused`, :class:`Processes`;
:mod:`.record` turns calls into history operations).

With ``workload.batch`` some claimers take batches (``claim_many``, settled one by one
or with ``ack_many``: ``claim-many`` and ``ack-many`` operations); with
``workload.delay`` some publishes carry a ``delay``. With ``workload.long_poll`` some
claimers long-poll (``claim(wait=...)``); with
``workload.worker_processes`` the claimers are ``python -m rqueue worker`` processes
that report their calls to the run, and are killed and replaced while it runs
(:mod:`.processes`, :mod:`.in_worker`).

After the faults are healed, :meth:`Workload.drain` claims and acks until the queue's
``messages`` table is empty (waiting out parks and lapsed leases), within a deadline
(:mod:`.drain`).

With ``workload.poison`` some messages are poison: every claimer nacks them (with an
error), the drain too, so only the queue's ``max_deliveries`` takes them out; the
claims record what they dead-lettered and the drain ends with one read of the
dead-letter queue (:mod:`harness.workload.deadletters`).
"""

from .drain import DrainResult, pending_messages
from .plans import ClientCall, Plan, Steps, Wait, plan_lease, release_action
from .record import (
    DEFINITE,
    Fused,
    Ops,
    Processes,
    Single,
    WorkloadError,
    failure_kind,
    fused_kinds,
    lease_value,
    msg_of,
)
from .workers import Workload

__all__ = [
    "DEFINITE",
    "ClientCall",
    "DrainResult",
    "Fused",
    "Ops",
    "Plan",
    "Processes",
    "Single",
    "Steps",
    "Wait",
    "Workload",
    "WorkloadError",
    "failure_kind",
    "fused_kinds",
    "lease_value",
    "msg_of",
    "pending_messages",
    "plan_lease",
    "release_action",
]
