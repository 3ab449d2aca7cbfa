"""``python -m rqueue``: the operator's command line over any list of node URLs.

Commands: ``stats`` (``--json``, ``--watch`` refreshing in place), ``dlq list``,
``dlq redrive``, ``dlq purge``, ``peek GROUP`` (with who holds each lease, and until
when), ``publish GROUP JSON`` (``--delay SECONDS``: due later), ``claim``, ``ack LEASE``
and ``nack LEASE`` (one message by hand: :mod:`rqueue._cli_lease`), ``worker
MODULE:HANDLER`` (:mod:`rqueue._cli_worker`), ``exporter`` (every queue's depth for
Prometheus: :mod:`rqueue._cli_exporter`), ``queues`` (every queue of the database,
with its depth) and ``queues create NAME``. Each command but ``queues`` acts on one
queue: ``--queue NAME`` (default: the default queue; :mod:`rqueue._queues`); ``exporter``
without one reads them all.
Nodes come from ``--url`` or the ``RQUEUE_URL`` environment variable (comma-separated,
as ``from_url`` takes them); credentials as in ``from_url``: user info in a URL, or
``--user`` with the password in ``RQUEUE_PASSWORD`` (or asked for on a terminal). They
are never printed: output and errors name the nodes by their URLs without user info.
The connection options go before or after the command (``stats --url URL``); given
twice, the later one counts.

Every argument is checked before anything is sent (:mod:`rqueue._cli_check`; exit
status 2, at once, whether or not the nodes can be reached). A redrive or purge that
matched nothing, or a claim that found nothing, says so and exits 3; ``dlq purge --all``
asks for confirmation on a terminal, and without one needs ``--yes``. A closed standard
output (``| head``) ends a command quietly (:mod:`rqueue._stdout`).

The CLI creates or migrates a schema only where asked to or where it writes a message:
``queues create NAME`` creates a named queue (named queues are created on purpose);
``publish`` opens the default queue as a transport's ``from_url`` does, and ``worker``
opens a transport; every other command only reads, settles one lease, or writes the
dead-letter queue when told to.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, TextIO

from . import _cli_lease
from ._cli_check import PASSWORD_ENV, URL_ENV, check, settings
from ._exceptions import RqueueError, StatementError
from ._models import Stats
from ._queues import DEFAULT, not_found

__all__ = ["PASSWORD_ENV", "URL_ENV", "build_parser", "check", "run"]


#: exit statuses: done, the nodes or the queue refused, bad usage, nothing matched
OK, FAILED, USAGE, NOTHING = 0, 1, 2, 3


def _connection_options(p: argparse.ArgumentParser, *, defaults: bool) -> None:
    """``--url`` and friends; on a command's parser without defaults (SUPPRESS), so that
    they override the ones given before the command only when given after it."""

    def d(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    p.add_argument(
        "--url", default=d(None), help=f"node URLs, comma-separated (default: ${URL_ENV})"
    )
    p.add_argument(
        "--user",
        default=d(None),
        help=f"basic-auth user (password from ${PASSWORD_ENV} or a prompt)",
    )
    p.add_argument("--ca-bundle", default=d(None), help="CA file for https nodes")
    p.add_argument(
        "--insecure", action="store_true", default=d(False), help="do not verify TLS certificates"
    )
    p.add_argument("--timeout", type=float, default=d(10.0), help="seconds for each command")
    p.add_argument(
        "--queue", default=d(None), help="the queue to act on (default: the default queue)"
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m rqueue", description="Inspect and operate an rqueue queue."
    )
    _connection_options(p, defaults=True)
    common = argparse.ArgumentParser(add_help=False)
    _connection_options(common, defaults=False)
    sub = p.add_subparsers(dest="command", required=True)

    stats = sub.add_parser(
        "stats", parents=[common], help="depth: ready, leased, parked, dead-lettered, groups"
    )
    stats.add_argument("--json", action="store_true", help="one JSON object per reading")
    stats.add_argument(
        "--watch", type=float, nargs="?", const=2.0, metavar="SECONDS",
        help="read again every SECONDS (default 2), refreshing in place; Ctrl-C ends",
    )  # fmt: skip
    stats.add_argument("--count", type=int, help="with --watch: stop after this many readings")

    peek = sub.add_parser(
        "peek", parents=[common], help="the first messages of a group, with their state"
    )
    peek.add_argument("group")
    peek.add_argument("--limit", type=int, default=20)
    peek.add_argument("--json", action="store_true")

    publish = sub.add_parser("publish", parents=[common], help="append one message to a group")
    publish.add_argument("group")
    publish.add_argument("event", metavar="JSON", help="the event, a JSON document")
    publish.add_argument("--priority", type=int, default=0)
    publish.add_argument("--dedup-id", help="publish at most once under this id")
    publish.add_argument(
        "--delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="not deliverable before this many seconds from now (default 0: at once)",
    )

    from . import _cli_exporter, _cli_worker

    _cli_worker.add_parser(sub, common)
    _cli_exporter.add_parser(sub, common)

    _cli_lease.add_parsers(sub, common)

    queues = sub.add_parser(
        "queues",
        parents=[common],
        help="every queue of the database, with its depth; `queues create NAME` makes one",
    )
    queues.add_argument("--json", action="store_true", help="one JSON array")
    create = queues.add_subparsers(dest="action").add_parser(
        "create",
        parents=[common],
        help="create a named queue (named queues are created on purpose, never by a typo)",
    )
    create.add_argument("name", metavar="NAME", help="a lowercase letter, then [a-z0-9_]")

    dlq = sub.add_parser("dlq", parents=[common], help="the dead-letter queue").add_subparsers(
        dest="action", required=True
    )
    listing = dlq.add_parser("list", parents=[common], help="dead-lettered messages in seq order")
    listing.add_argument("--group")
    listing.add_argument("--after", type=int, default=0, help="only seqs above this")
    listing.add_argument("--limit", type=int, default=100)
    listing.add_argument("--json", action="store_true")
    for name, what in (
        ("redrive", "put back at the tail of their groups"),
        ("purge", "delete for good"),
    ):
        act = dlq.add_parser(
            name, parents=[common], help=f"dead letters: {what} (one, a group, or --all)"
        )
        act.add_argument("seq", type=int, nargs="?", metavar="SEQ", help="one, by its seq")
        act.add_argument("--group", help="those of one group")
        act.add_argument("--all", action="store_true", help="every dead letter")
        if name == "purge":
            act.add_argument(
                "--yes", action="store_true", help="with --all: do not ask for confirmation"
            )
    return p


def connect(args: argparse.Namespace) -> Any:
    """The operator's API over the nodes (standard-library HTTP; no schema created), for
    the queue of ``--queue`` (``queues``: the default queue's, which lists them all)."""
    from ._cli_http import CliQueue

    return CliQueue(settings(args))


def render_stats(s: Stats, nodes: Sequence[str], queue: str | None = None) -> str:
    """A small table of :class:`Stats` for people (of the queue ``queue``, if named)."""
    age = "-" if s.oldest_ready_age is None else f"{s.oldest_ready_age:.1f} s"
    named = "" if queue is None else f", queue {queue}"
    lines = [
        f"rqueue at {', '.join(nodes)}{named}",
        f"  ready {s.ready}   leased {s.leased}   parked {s.parked}   "
        f"dead-lettered {s.dead_lettered}   groups {s.groups}   oldest ready {age}",
        "  priority     ready    leased    parked      dead    groups",
    ]
    for p, c in sorted(s.by_priority.items(), reverse=True):
        lines.append(
            f"  {p:>8} {c['ready']:>9} {c['leased']:>9} {c['parked']:>9} "
            f"{c['dead']:>9} {c['groups']:>9}"
        )
    return "\n".join(lines)


def _stats(t: Any, args: argparse.Namespace, out: TextIO) -> None:
    nodes, queue = list(t.settings.urls), t.settings.options.queue
    if args.watch is None:
        s = t.stats()
        out.write((json.dumps(s.as_dict()) if args.json else render_stats(s, nodes, queue)) + "\n")
        return
    in_place = out.isatty() and not args.json
    n = 0
    while args.count is None or n < args.count:
        s = t.stats()
        text = json.dumps(s.as_dict()) if args.json else render_stats(s, nodes, queue)
        stamp = time.strftime("%H:%M:%S")
        if in_place:
            out.write("\x1b[H\x1b[J")  # home, clear: the table is redrawn in place
        out.write(text + ("" if args.json else f"\n  at {stamp}, every {args.watch:g} s") + "\n")
        out.flush()
        n += 1
        if args.count is None or n < args.count:
            time.sleep(args.watch)  # the polling period the operator asked for


#: peek's columns about the lease, shown only for a leased message
_HOLDER = ("held_by", "expires_in")
#: peek's column shown only for a parked message (a nack's park, or a delayed head):
#: when it becomes claimable again, in UTC
_UNTIL = "lock_expiry"
#: peek's column shown only for a delayed message behind its group's head: when it is
#: due, in UTC
_DUE = "deliver_at"


def _rows(items: Sequence[Any], as_json: bool, out: TextIO, columns: Sequence[str]) -> None:
    if as_json:
        out.write(json.dumps([asdict(i) for i in items]) + "\n")
        return
    for i in items:
        d = asdict(i)
        shown = [
            f"{d[c]:>8}"
            if c == "seq"
            else f"{c}={d[c]:.1f}s"
            if c == "expires_in"
            else f"parked_until={_utc(d[c])}"
            if c == _UNTIL
            else f"delayed_until={_utc(d[c])}"
            if c == _DUE
            else f"{c}={d[c]!r}"
            for c in columns
            if not (c in _HOLDER and d[c] is None)
            and not (c == _UNTIL and (d.get("state") != "parked" or d[c] is None))
            and not (c == _DUE and (d.get("state") != "delayed" or d[c] is None))
        ]
        out.write("  ".join(shown))
        out.write("\n")
    if not items:
        out.write("(none)\n")


def render_queues(found: Sequence[Any]) -> str:
    """The queues and their depth (where known), one line each, for people."""
    head = ("ready", "leased", "parked", "dead", "groups")
    lines = [f"{'queue':<40}" + "".join(f"{h:>9}" for h in head)]
    for q in found:
        s = q.stats
        depth = () if s is None else (s.ready, s.leased, s.parked, s.dead_lettered, s.groups)
        lines.append(f"{q.name:<40}" + "".join(f"{n:>9}" for n in depth))
    if not found:
        lines.append("(none: no queue was opened on these nodes)")
    elif any(q.stats is None for q in found):
        lines.append(
            "(depth unknown: a schema of an older release; a transport's from_url migrates it)"
        )
    return "\n".join(lines)


def _queues(t: Any, args: argparse.Namespace, out: TextIO) -> None:
    if args.action == "create":
        name = args.name
        if t.create():
            out.write(f"queue {name} exists already (its schema checked)\n")
        else:
            out.write(f"queue {name} created\n")
        return
    found = t.queues()
    if args.json:
        doc = [
            {
                "name": q.name,
                "created_at": q.created_at,
                **(q.stats.as_dict() if q.stats is not None else {}),
            }
            for q in found
        ]
        out.write(json.dumps(doc) + "\n")
    else:
        out.write(render_queues(found) + "\n")


def _utc(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _nothing_matched(args: argparse.Namespace) -> str:
    if args.seq is not None:
        return (
            f"no dead letter with seq {args.seq} (redriven or purged already? "
            "`dlq list` shows what is there)"
        )
    if args.group is not None:
        return f"no dead letters of group {args.group!r}"
    return "the dead-letter queue is empty"


def _confirmed(t: Any) -> bool | None:
    """Ask on the terminal before purging everything: True to go on, False if declined,
    None if there is nothing to purge."""
    n = t.stats().dead_lettered
    if n == 0:
        return None
    sys.stderr.write(f"purge all {n} dead letters for good? [y/N] ")
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except KeyboardInterrupt:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def _settle(t: Any, args: argparse.Namespace, out: TextIO) -> int:
    """``dlq redrive`` or ``dlq purge``: act, then say how many (or that nothing matched)."""
    redriving = args.action == "redrive"
    if not redriving and args.all and not args.yes:
        go = _confirmed(t)
        if go is False:
            print("purge cancelled: nothing was purged", file=sys.stderr)
            return FAILED
        if go is None:
            print(f"error: nothing matched: {_nothing_matched(args)}", file=sys.stderr)
            return NOTHING
    act = t.redrive if redriving else t.purge
    n = act(args.seq, group_id=args.group, all=args.all)
    if n == 0:
        print(f"error: nothing matched: {_nothing_matched(args)}", file=sys.stderr)
        return NOTHING
    done = "redriven (back at the tail of their groups)" if redriving else "purged"
    out.write(f"{n} {done}\n")
    return OK


def run(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    """Run one command; returns the exit status: 0 done, 1 the nodes or the queue refused
    (or a purge was not confirmed), 2 bad usage (nothing sent), 3 a redrive or purge that
    matched nothing, or a claim that found nothing."""
    args = build_parser().parse_args(argv)
    if args.command == "worker":
        from . import _cli_worker

        return _cli_worker.run(args, URL_ENV)
    if args.command == "exporter":
        from . import _cli_exporter

        return _cli_exporter.run(args)
    problem = check(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return USAGE
    # every failure ends in the command's own "error:" line (a node refused for its time
    # zone, rqueue._zone, too): the library's log would repeat it
    logging.getLogger("rqueue").addHandler(logging.NullHandler())
    try:
        t = connect(args)
    except (RqueueError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return FAILED
    try:
        if args.command == "stats":
            _stats(t, args, out)
        elif args.command == "queues":
            _queues(t, args, out)
        elif args.command == "peek":
            columns = ("seq", "state", "deliveries", "event", "last_error", *_HOLDER, _UNTIL, _DUE)
            _rows(t.peek(args.group, args.limit), args.json, out, columns)
        elif args.command == "publish":
            seq = t.publish(args.group, args.event, args.priority, args.dedup_id, args.delay)
            out.write(f"{seq}\n")
        elif args.command in _cli_lease.COMMANDS:
            return _cli_lease.run(t, args, out)
        elif args.action == "list":
            found = t.dead_letters(args.group, after=args.after, limit=args.limit)
            columns = ("seq", "group_id", "deliveries", "event", "last_error", "reason")
            _rows(found, args.json, out, columns)
        else:
            return _settle(t, args, out)
    except KeyboardInterrupt:
        return OK
    except StatementError as exc:
        if "no such table" in str(exc) and args.queue not in (None, DEFAULT):
            print(f"error: {exc}: {not_found(args.queue)}", file=sys.stderr)
        elif "no such table" in str(exc):
            print(
                f"error: {exc}: no rqueue schema of this version on these nodes; open the "
                "queue once with this rqueue's from_url, which creates or migrates it",
                file=sys.stderr,
            )
        else:
            print(f"error: {exc}", file=sys.stderr)
        return FAILED
    except (RqueueError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return FAILED
    finally:
        t.close()
    return OK
