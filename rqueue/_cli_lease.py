"""``python -m rqueue claim``, ``ack`` and ``nack``: one message by hand, when debugging
a handler or a stuck group.

``claim`` leases the next deliverable message exactly as a worker's claim does (FIFO per
group, one lease per group) and prints the lease as one JSON object; ``ack`` and ``nack``
take that object back (as an argument, or ``-`` for standard input) and settle it,
fenced by its token like any ack or nack. Every argument, the lease's fields included,
is checked before anything is sent (exit 2); a lease of other nodes or of another queue
is refused there too (its ``origin`` says which). ``claim`` moves nothing to the
dead-letter queue (the CLI has no ``max_deliveries``), so it can take a message out
that workers would dead-letter.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import textwrap
from dataclasses import asdict
from typing import Any, TextIO

from . import _validate
from ._models import Lease
from ._queues import ORIGIN_TAG, check_name, origin

#: the commands of this module
COMMANDS = ("claim", "ack", "nack")
#: exit statuses (as :mod:`rqueue._cli`'s): done; nothing was deliverable
OK, NOTHING = 0, 3
#: a lease's fields, as ``claim`` prints them; the first three are needed to settle it
FIELDS = ("seq", "group_id", "token", "event", "expires_at", "origin")
#: the width of the help's paragraphs (kept as written: the examples are laid out)
WIDTH = 78
#: seconds a lease taken by hand lasts unless told: time to read the message first
DEFAULT_VISIBILITY = 300.0

_LEASE_HELP = "the lease as `claim` printed it (one JSON object), or - to read it from stdin"
_EPILOG = """\
examples:
  python -m rqueue claim > lease.json          # the next message, leased for 300 s
  python -m rqueue nack - --error 'bad date' < lease.json
  python -m rqueue claim --queue orders | python -m rqueue ack -

A lease that lapsed, or that another worker took since, is not settled: exit 1
("no longer leased"). Nothing deliverable: claim exits 3.
"""


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    """The ``claim``, ``ack`` and ``nack`` commands' arguments."""
    raw = argparse.RawDescriptionHelpFormatter
    claim = sub.add_parser(
        "claim",
        parents=[common],
        formatter_class=raw,
        help="lease the next message by hand; prints the lease as JSON",
        description=textwrap.fill(
            "Lease the next deliverable message, as a worker's claim does, and print the "
            "lease as one JSON object (seq, group_id, token, event, expires_at, origin) for "
            "`ack` or `nack`. Its group delivers nothing else until it is settled or its "
            "visibility lapses.",
            WIDTH,
        ),
        epilog=_EPILOG,
    )
    claim.add_argument(
        "--visibility",
        type=float,
        default=DEFAULT_VISIBILITY,
        metavar="SECONDS",
        help=f"how long the lease lasts (default {DEFAULT_VISIBILITY:g}: time to look first)",
    )
    claim.add_argument("--min-priority", type=int, default=0, help="only messages this urgent")
    claim.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for a message to become deliverable (default 0: answer at once)",
    )
    claim.add_argument("--worker-id", help="names the lease (peek's held_by; default cli:host:pid)")
    for name, what in (
        ("ack", "delete the message of a lease: it was handled"),
        ("nack", "give the message of a lease back to its group (now, or after --delay)"),
    ):
        act = sub.add_parser(
            name,
            parents=[common],
            formatter_class=raw,
            help=what,
            description=textwrap.fill(
                f"{what[0].upper()}{what[1:]}. Fenced by the lease's token: nothing changes "
                "if the lease lapsed or another worker holds the message now. Give the same "
                "--url nodes (any of them) as the claim; the queue is the lease's own unless "
                "--queue says another (then it is refused).",
                WIDTH,
            ),
            epilog=_EPILOG,
        )
        act.add_argument("lease", metavar="LEASE", help=_LEASE_HELP)
        if name == "nack":
            act.add_argument(
                "--delay",
                type=float,
                default=0.0,
                metavar="SECONDS",
                help="park the message this long before it is deliverable again (default 0)",
            )
            act.add_argument("--error", help="why: kept with the message, shown by `dlq list`")


def problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the command's own arguments (the lease is read and kept as
    ``args.parsed_lease``)."""
    try:
        if args.command == "claim":
            _validate.seconds("--visibility", args.visibility, allow_zero=False)
            _validate.priority("--min-priority", args.min_priority)
            _validate.seconds("--wait", args.wait, allow_zero=True)
            _validate.optional_text("--worker-id", args.worker_id)
            return None
        text = sys.stdin.read() if args.lease == "-" else args.lease
        args.parsed_lease = lease = lease_of(text, from_stdin=args.lease == "-")
        if args.queue is None:  # the lease says which queue issued it
            args.queue = check_name(queue_of(lease), "LEASE: the queue in its origin")
        if args.command == "nack":
            _validate.seconds("--delay", args.delay, allow_zero=True)
            _validate.error_text(args.error)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


def origin_problem(args: argparse.Namespace, urls: list[str]) -> str | None:
    """A lease given to ``ack`` or ``nack`` that another queue issued (other nodes, or
    another ``--queue``: its origin says which)."""
    if args.command == "claim":
        return None
    lease: Lease = args.parsed_lease
    try:
        _validate.lease(lease, origin(urls, args.queue))
    except ValueError:
        return (
            f"LEASE: claimed from {lease.origin}, not from these nodes and queue: give "
            "the claim's --url (any of its nodes), and its --queue or none"
        )
    return None


def queue_of(lease: Lease) -> str | None:
    """The named queue a lease's origin is tagged with (None: the default queue, or an
    untagged lease); :func:`rqueue._queues.origin` writes the tag."""
    _, tagged, name = lease.origin.partition(ORIGIN_TAG)
    return name.split(",")[0] if tagged else None


def lease_of(text: str, *, from_stdin: bool = False) -> Lease:
    """The :class:`~rqueue.Lease` in ``text``, as ``claim`` printed it; ``ValueError``
    naming what is wrong."""
    where = "standard input" if from_stdin else "LEASE"
    if not text.strip():
        raise ValueError(f"LEASE: {where} is empty (did `claim` find nothing?)")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"LEASE: not JSON ({exc}): give the object `claim` printed") from None
    if not isinstance(doc, dict):
        raise ValueError(f"LEASE: expected the JSON object `claim` printed, got {text[:80]!r}")
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise ValueError(f"LEASE: unknown field {unknown[0]!r}; a lease has {', '.join(FIELDS)}")
    missing = [f for f in FIELDS[:3] if f not in doc]
    if missing:
        raise ValueError(f"LEASE: no {', '.join(missing)}: give the whole object `claim` printed")
    expires_at = doc.get("expires_at")
    if expires_at is not None and (
        isinstance(expires_at, bool) or not isinstance(expires_at, int | float)
    ):
        raise ValueError(f"LEASE: expires_at must be a number or null, got {expires_at!r}")
    event, source = doc.get("event", ""), doc.get("origin", "")
    if not isinstance(event, str) or not isinstance(source, str):
        raise ValueError("LEASE: event and origin must be strings")
    return Lease(
        seq=_validate.seq("LEASE: seq", doc["seq"]),
        group_id=_validate.text("LEASE: group_id", doc["group_id"]),
        event=event,
        token=_validate.text("LEASE: token", doc["token"]),
        expires_at=expires_at,
        origin=source,
    )


def run(t: Any, args: argparse.Namespace, out: TextIO) -> int:
    """The command, on the connected queue ``t``; its exit status (an error of the queue,
    a lost lease included, is raised)."""
    if args.command == "claim":
        worker_id = args.worker_id or f"cli:{socket.gethostname()}:{os.getpid()}"
        lease = t.claim(worker_id, args.visibility, args.min_priority, wait=args.wait)
        if lease is None:
            floor = f" of priority >= {args.min_priority}" if args.min_priority else ""
            waited = f" within {args.wait:g} s" if args.wait else ""
            says = f"no message{floor} is deliverable{waited}"
            print(f"error: nothing matched: {says}", file=sys.stderr)
            return NOTHING
        out.write(json.dumps(asdict(lease)) + "\n")
        return OK
    lease = args.parsed_lease
    if args.command == "ack":
        t.ack(lease)
        out.write(f"acked message {lease.seq} of group {lease.group_id!r}\n")
        return OK
    t.nack(lease, args.delay, args.error)
    when = f"deliverable again in {args.delay:g} s" if args.delay else "deliverable again now"
    out.write(f"nacked message {lease.seq} of group {lease.group_id!r}: {when}\n")
    return OK
