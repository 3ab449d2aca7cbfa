"""Time zone files (TZif, RFC 8536) made to order, and rewritten in place.

A node's local time zone is a file: ``/etc/localtime``, or the one ``TZ`` names. To give
a node a zone whose offset changes when a test wants it to, the harness writes such a
file itself: :func:`build` takes the offset in force before any transition and a list of
transitions ``(unix_time, utc_offset_seconds)``; :func:`fixed` is a zone of one offset,
:func:`dst_jump` one whose offset moves by ``jump`` seconds (daylight saving) at a given
moment. The file is version 2: a 32-bit block (the transitions that fit), the 64-bit
block every current reader uses, and a POSIX ``TZ`` footer for the times after the last
transition: the last offset, kept for good (when that is daylight saving, which a
version-2 rule cannot say for all time, the footer is empty: every reader then keeps the
last transition's type, ``is_dst`` included). Go's ``time`` package, Python's
``zoneinfo`` and the C library's ``zdump`` read it alike: the zone in force before the
first transition is type 0, a standard-time type no transition uses first.

:func:`write` replaces a file's bytes **in place** (same inode): a file bind-mounted into
a container is that inode, so the container sees the new zone (``os.replace`` would make
a new inode the mount never shows). Readers that load the zone once at start (rqlite,
the embedded node) see it when they restart.

Standard library only.
"""

from __future__ import annotations

import itertools
import os
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError

#: RFC 8536: a UT offset should lie in [-89999, 93599]; a POSIX footer (hours 0 to 24)
#: holds at most 24:59:59 either way: the offsets both allow
MIN_OFFSET, MAX_OFFSET = -89999, 89999
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
#: RFC 8536 designations: 3 to 6 (we allow up to 16) of these characters
_ABBR = re.compile(r"[A-Za-z0-9+-]{3,16}")


class ZoneFileError(HarnessError, ValueError):
    """A zone cannot be written as asked; the message names what is wrong."""


@dataclass(frozen=True)
class Transition:
    """From ``at`` (Unix seconds, UTC) on, local time is UTC + ``utc_offset`` seconds."""

    at: int
    utc_offset: int
    is_dst: bool = False
    abbr: str | None = None  # None: the offset as tzdata names unnamed zones ("+0530")


def offset_abbr(utc_offset: int) -> str:
    """tzdata's name for a zone known only by its offset: ``+01``, ``-0330``, ``+054521``."""
    sign = "-" if utc_offset < 0 else "+"
    h, rest = divmod(abs(utc_offset), 3600)
    m, s = divmod(rest, 60)
    return f"{sign}{h:02d}" + (f"{m:02d}" if m or s else "") + (f"{s:02d}" if s else "")


def posix_tz(utc_offset: int, abbr: str | None = None) -> str:
    """The POSIX ``TZ`` string of a fixed offset (its sign is west-positive):
    ``+19800`` named ``IST`` → ``IST-5:30``; a name that is not all letters is quoted,
    ``<+0530>-5:30``."""
    _check_offset(utc_offset, "offset")
    name = _check_abbr(abbr if abbr is not None else offset_abbr(utc_offset))
    if not name.isalpha():
        name = f"<{name}>"
    west = -utc_offset
    h, rest = divmod(abs(west), 3600)
    m, s = divmod(rest, 60)
    text = ("-" if west < 0 else "") + str(h)
    if m or s:
        text += f":{m:02d}"
    if s:
        text += f":{s:02d}"
    return name + text


def build(
    initial_offset: int,
    transitions: Iterable[tuple[int, int] | Transition] = (),
    *,
    initial_abbr: str | None = None,
    footer: str | None = None,
) -> bytes:
    """A version-2 TZif file: ``initial_offset`` (standard time) before the first
    transition, then each transition's offset from its moment on.

    ``transitions``: ``(unix_time, utc_offset)`` pairs or :class:`Transition` values,
    strictly increasing in time. ``footer``: the POSIX ``TZ`` rule for times after the last
    transition (default: the last offset and name, fixed, see :func:`posix_tz`; empty when
    the last transition is to daylight saving time).
    Raises :class:`ZoneFileError` naming the first bad value.
    """
    _check_offset(initial_offset, "initial_offset")
    initial = (initial_offset, False, _check_abbr(initial_abbr or offset_abbr(initial_offset)))
    steps = [_transition(t, i) for i, t in enumerate(transitions)]
    for i, (a, b) in enumerate(itertools.pairwise(steps)):
        if b.at <= a.at:
            raise ZoneFileError(
                f"transition {i + 1} is at {b.at}, not after transition {i} at {a.at}: "
                "transitions must be strictly increasing in time"
            )
    types: list[tuple[int, bool, str]] = [initial]
    indices = []
    for t in steps:
        key = (t.utc_offset, t.is_dst, t.abbr or offset_abbr(t.utc_offset))
        if key not in types[1:]:  # type 0 is only the time before the first transition
            types.append(key)
        indices.append(types.index(key, 1))
    if footer is None:  # an empty footer: the last type holds for good, is_dst included
        last = types[indices[-1]] if steps else initial
        footer = "" if last[1] else posix_tz(last[0], last[2])
    if "\n" in footer or not footer.isascii():
        raise ZoneFileError(f"footer must be one line of ASCII, got {footer!r}")
    chars, where = _designations([t[2] for t in types])
    ttinfo = b"".join(struct.pack(">lBB", off, dst, where[name]) for off, dst, name in types)
    times = [(t.at, k) for t, k in zip(steps, indices, strict=True)]
    fits32 = [(at, k) for at, k in times if _INT32[0] <= at <= _INT32[1]]
    v1 = _block(fits32, ">l", ttinfo, len(types), chars)
    v2 = _block(times, ">q", ttinfo, len(types), chars)
    return v1 + v2 + b"\n" + footer.encode() + b"\n"


def fixed(utc_offset: int, abbr: str | None = None) -> bytes:
    """A zone of one offset for all time (``abbr`` default: :func:`offset_abbr`)."""
    return build(utc_offset, initial_abbr=abbr)


def dst_jump(
    at: int,
    base_offset: int = 0,
    jump: int = 3600,
    *,
    abbr: str | None = None,
    dst_abbr: str | None = None,
) -> bytes:
    """A zone at ``base_offset`` until ``at`` (Unix seconds), then at ``base_offset + jump``
    (daylight saving, ``is_dst``) for good: a spring-forward with the default ``jump``,
    a fall-back with a negative one."""
    after = Transition(int(at), base_offset + jump, jump > 0, dst_abbr)
    return build(base_offset, [after], initial_abbr=abbr)


def write(path: str | os.PathLike[str], data: bytes) -> None:
    """Make the file at ``path`` hold ``data``, rewriting an existing file in place (same
    inode: see the module docstring; it never reads shorter than the old or new contents
    while being written); a missing file is created. Flushed to disk before returning."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.truncate(len(data))
        fh.flush()
        os.fsync(fh.fileno())


# -- the file's parts ----------------------------------------------------------------------
def _transition(t: tuple[int, int] | Transition, i: int) -> Transition:
    if not isinstance(t, Transition):
        try:
            at, off = t
        except (TypeError, ValueError):
            raise ZoneFileError(
                f"transition {i} must be (unix_time, utc_offset_seconds) or a Transition, got {t!r}"
            ) from None
        t = Transition(at, off)
    if not isinstance(t.at, int) or isinstance(t.at, bool) or not _INT64[0] < t.at <= _INT64[1]:
        raise ZoneFileError(f"transition {i}: time must be whole Unix seconds, got {t.at!r}")
    _check_offset(t.utc_offset, f"transition {i}'s offset")
    if t.abbr is not None:
        _check_abbr(t.abbr)
    return t


def _check_offset(value: object, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ZoneFileError(f"{what} must be whole seconds (an int), got {value!r}")
    if not MIN_OFFSET <= value <= MAX_OFFSET:
        raise ZoneFileError(
            f"{what} {value} s is outside [{MIN_OFFSET}, {MAX_OFFSET}] (just under ±25 h)"
        )


def _check_abbr(abbr: str) -> str:
    if not isinstance(abbr, str) or not _ABBR.fullmatch(abbr):
        raise ZoneFileError(
            f"a zone abbreviation is 3 to 16 letters, digits, '+' or '-', got {abbr!r}"
        )
    return abbr


def _designations(names: Sequence[str]) -> tuple[bytes, dict[str, int]]:
    where: dict[str, int] = {}
    chars = b""
    for name in names:
        if name not in where:
            where[name] = len(chars)
            chars += name.encode() + b"\0"
    return chars, where


def _block(
    times: list[tuple[int, int]], fmt: str, ttinfo: bytes, typecnt: int, chars: bytes
) -> bytes:
    """One header and data block: version 2, no leap seconds, no std/wall or UT/local
    indicators (they only matter to POSIX rules without explicit times)."""
    header = b"TZif2" + b"\0" * 15 + struct.pack(">6l", 0, 0, 0, len(times), typecnt, len(chars))
    at = b"".join(struct.pack(fmt, t) for t, _ in times)
    idx = bytes(k for _, k in times)
    return header + at + idx + ttinfo + chars
