"""The admin CLI's checks of its arguments, all made before anything is sent.

A bad argument exits 2 at once with one line naming it, whether or not the nodes can be
reached: each command's own arguments are checked with the API's validators
(:mod:`rqueue._validate`, so a limit the API would refuse is refused here first), then
the connection's (nodes given and well formed, a CA file that exists, a password for
``--user``). Only then does :func:`settings` build what connecting needs (asking for the
password on a terminal).
"""

from __future__ import annotations

import argparse
import getpass
import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from . import _cli_lease, _validate
from ._config import Settings
from ._endpoints import parse_urls
from ._options import Seconds, check_of
from ._queues import check_name
from ._text import check as unicode_text

#: the environment variables the CLI reads
URL_ENV, PASSWORD_ENV = "RQUEUE_URL", "RQUEUE_PASSWORD"


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments, before anything is sent (None: nothing)."""
    return _command(args) or connection(args, prompt=True)


def _first(*checks: Callable[[], object]) -> str | None:
    """The message of the first check that raises ``ValueError`` or ``TypeError``."""
    for run in checks:
        try:
            run()
        except (TypeError, ValueError) as exc:
            return str(exc)
    return None


def seconds(name: str, value: float, *, allow_zero: bool = False) -> str | None:
    """What is wrong with a number of seconds given on the command line."""
    if not (math.isfinite(value) and (value > 0 or (allow_zero and value == 0))):
        bound = ">= 0" if allow_zero else "> 0"
        return f"{name}: must be a number of seconds {bound}, got {value:g}"
    return None


def option(name: str, value: Any) -> str | None:
    """What is wrong with the connection option ``name`` (:mod:`rqueue._options`) given
    as its flag (``--max-age`` for ``max_age``): its declared check, a number of seconds
    in the words of :func:`seconds`."""
    flag = "--" + name.replace("_", "-")
    check = check_of(name)
    if isinstance(check, Seconds) and value is not None:
        return seconds(flag, value, allow_zero=check.allow_zero)
    return _first(lambda: check(flag, value))


def options(args: argparse.Namespace, *names: str) -> str | None:
    """The first problem among the connection options ``names`` of ``args``."""
    return next((p for p in (option(n, getattr(args, n)) for n in names) if p), None)


def _command(args: argparse.Namespace) -> str | None:
    """The command's own arguments."""
    problem = options(args, "timeout", "queue")
    if problem:
        return problem
    command = args.command
    if command == "stats":
        if args.watch is not None and (problem := seconds("--watch", args.watch)):
            return problem
        if args.count is not None and args.watch is None:
            return "--count needs --watch (without --watch, stats reads once)"
        if args.count is not None and args.count < 1:
            return f"--count: must be >= 1, got {args.count}"
    for attr in ("group", "event", "dedup_id"):  # argv may carry lone surrogates
        value = getattr(args, attr, None)
        if value is not None:
            try:
                unicode_text("JSON" if attr == "event" else attr.replace("_", "-"), value)
            except ValueError as exc:
                return str(exc)
    if command == "publish":
        try:
            json.loads(args.event, parse_constant=_validate.refuse_constant)
        except ValueError as exc:
            return f"JSON: not a JSON document ({exc}): {args.event[:80]!r}"
        return _first(
            lambda: _validate.text("group", args.group),
            lambda: _validate.priority("--priority", args.priority),
            lambda: _validate.optional_text("dedup-id", args.dedup_id),
        ) or seconds("--delay", args.delay, allow_zero=True)
    if command == "peek" and (problem := _first(lambda: _validate.text("group", args.group))):
        return problem
    if getattr(args, "limit", None) is not None and not 1 <= args.limit <= _validate.MAX_LIMIT:
        return f"--limit: must be between 1 and {_validate.MAX_LIMIT}, got {args.limit}"
    if getattr(args, "after", 0) < 0:
        return f"--after: must be >= 0, got {args.after}"
    if command == "dlq" and (problem := _first(lambda: _group_option(args))):
        return problem
    if command == "dlq" and args.action in ("redrive", "purge"):
        chosen = (args.seq is not None) + (args.group is not None) + bool(args.all)
        if chosen != 1:
            return "give exactly one of SEQ, --group GROUP or --all"
        if args.seq is not None and args.seq <= 0:
            return f"SEQ: must be > 0, got {args.seq}"
        if args.action == "purge" and args.all and not args.yes and not sys.stdin.isatty():
            return (
                "dlq purge --all deletes every dead letter: confirm with --yes "
                "(standard input is not a terminal to ask on)"
            )
    if command == "queues" and args.action == "create":
        return _first(lambda: check_name(args.name, "NAME"))
    if command in _cli_lease.COMMANDS:
        return _cli_lease.problem(args)
    return None


def _group_option(args: argparse.Namespace) -> None:
    if args.group is not None:
        _validate.text("group", args.group)


def connection(args: argparse.Namespace, *, prompt: bool) -> str | None:
    """What is wrong with the connection's arguments: no nodes, a malformed URL, a CA
    file that is not there, ``--user`` without a password to use (``prompt``: one may be
    asked for on a terminal), a lease of other nodes or another queue."""
    url = args.url or os.environ.get(URL_ENV)
    if not url:
        return f"no nodes: give --url or set {URL_ENV}"
    try:
        urls, _ = parse_urls(url)
    except (TypeError, ValueError) as exc:
        text = str(exc)
        return "--" + text if text.startswith("url: ") else f"--url: {text}"
    if args.ca_bundle is not None and not os.path.isfile(args.ca_bundle):
        return f"--ca-bundle: no such file: {args.ca_bundle}"
    if args.user and os.environ.get(PASSWORD_ENV) is None:
        if not prompt:
            return f"--user needs ${PASSWORD_ENV} (a worker does not prompt)"
        if not sys.stdin.isatty():
            return f"--user needs ${PASSWORD_ENV} (no terminal to ask on)"
    if args.command in _cli_lease.COMMANDS:
        return _cli_lease.origin_problem(args, urls)
    return None


def settings(args: argparse.Namespace) -> Settings:
    """What connecting needs, from arguments :func:`check` found good; asks for the
    password of ``--user`` on the terminal when ``$RQUEUE_PASSWORD`` is not set."""
    auth = None
    if args.user:
        password = os.environ.get(PASSWORD_ENV)
        if password is None:
            password = getpass.getpass(f"password for {args.user}: ")
        auth = (args.user, password)
    if args.command == "queues":  # the registry is read through the default queue
        queue = args.name if args.action == "create" else None
    else:
        queue = args.queue
    return Settings.build(
        args.url or os.environ[URL_ENV],
        timeout=args.timeout,
        request_timeout=min(args.timeout, 10.0),
        auth=auth,
        verify=not args.insecure,
        ca_bundle=args.ca_bundle,
        queue=queue,
    )
