"""A zone file read as Go's ``time`` package reads it, into Python's ``zoneinfo``.

Go's ``LoadLocationFromTZData`` (``time/zoneinfo_read.go``) rejects a file whose magic,
version byte (NUL, ``2``, ``3``, ``4``) or counts do not hold up, that has no zone types,
or whose transitions or abbreviations point past their tables (:func:`tzif_problem`).
Everything else it takes; so does :func:`load`, which hands the data to
``zoneinfo.ZoneInfo.from_file`` after smoothing what Go ignores and Python's reader does
not: the second header's magic and version byte (Go skips it), abbreviations that are
not UTF-8 (Go keeps raw bytes; they only name the zone), and a footer (the POSIX rule
after the last transition) that is not one line between newlines or that Python cannot
parse (Go then keeps the last transition's zone; Python's reader would loop forever on a
footer with no final newline). Where the two still part: an offset of 24 h or more,
which Go uses and Python's ``datetime`` cannot hold, is refused here (the file does not
load, so the node falls back to UTC where Go would not).
"""

from __future__ import annotations

import io
import struct
import zoneinfo
from dataclasses import dataclass

#: Go's ``maxFileSize``: a longer zone file does not load
MAX_FILE_SIZE = 10 << 20
#: the TZif versions Go reads (a NUL byte is version 1)
_VERSIONS = {0: 1, ord("2"): 2, ord("3"): 3, ord("4"): 4}
#: what Python's TZif reader raises on data it cannot read (its footer check asserts)
_PARSE_ERRORS = (ValueError, AssertionError, LookupError, struct.error, OverflowError)
_DAY = 86400


@dataclass(frozen=True)
class _Layout:
    """Where the parts of the last data block are (the 64-bit one from version 2 on)."""

    header: int  # that block's header
    zones: int  # its zone types (6 bytes each)
    nzone: int
    chars: int  # its abbreviations
    nchar: int
    end: int  # where the block ends and the footer starts


def load(path: str) -> tuple[zoneinfo.ZoneInfo | None, str]:
    """The zone in the file at ``path``, or None and why it does not load (one line)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_SIZE + 1)
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"
    if len(data) > MAX_FILE_SIZE:
        return None, f"{path}: larger than {MAX_FILE_SIZE} bytes"
    zone, problem = parse(data, path)
    return zone, "" if zone is not None else f"{path}: not a zone file ({problem})"


def parse(data: bytes, key: str | None = None) -> tuple[zoneinfo.ZoneInfo | None, str]:
    """``data`` as a zone (``key`` names it), or None and what is wrong with it."""
    layout = _layout(data)
    if isinstance(layout, str):
        return None, layout
    offsets = [
        struct.unpack(">l", data[layout.zones + 6 * i : layout.zones + 6 * i + 4])[0]
        for i in range(layout.nzone)
    ]
    if any(abs(o) >= _DAY for o in offsets):
        return None, "an offset of 24 h or more (Go would use it; Python's datetime cannot)"
    fixed = bytearray(data[: layout.end])
    fixed[layout.header : layout.header + 5] = data[:5]
    for i in range(layout.chars, layout.chars + layout.nchar):
        if fixed[i] >= 0x80:
            fixed[i] = ord("?")
    if data[4] == 0:
        candidates = [bytes(fixed)]
    else:
        rest = data[layout.end :]
        one_line = len(rest) >= 2 and rest[:1] == rest[-1:] == b"\n" and b"\n" not in rest[1:-1]
        candidates = [bytes(fixed) + rest] if one_line else []
        candidates.append(bytes(fixed) + b"\n\n")  # no footer: the last zone holds
    problem = ""
    for candidate in candidates:
        try:
            return zoneinfo.ZoneInfo.from_file(io.BytesIO(candidate), key=key), ""
        except _PARSE_ERRORS as exc:
            problem = problem or f"{type(exc).__name__}: {exc}"
    return None, problem


def tzif_problem(data: bytes) -> str | None:
    """Why Go's ``LoadLocationFromTZData`` would reject ``data`` (None: it would not)."""
    layout = _layout(data)
    return layout if isinstance(layout, str) else None


def _layout(data: bytes) -> _Layout | str:
    """The last data block's parts, or why Go rejects ``data``."""
    if data[:4] != b"TZif":
        return "no TZif magic"
    if len(data) < 44 or data[4] not in _VERSIONS:
        return "a bad header or version byte"
    header, size = 0, 4
    counts = struct.unpack(">6L", data[20:44])
    if _VERSIONS[data[4]] > 1:  # skip the 32-bit block; the 64-bit one has its own counts
        header = 44 + _block_size(counts, 4)
        if len(data) < header + 44:
            return "the data ends inside the 32-bit block"
        counts = struct.unpack(">6L", data[header + 20 : header + 44])
        size = 8
    ntime, nzone, nchar = counts[3], counts[4], counts[5]
    start = header + 44
    end = start + _block_size(counts, size)
    if len(data) < end:
        return "the data ends inside its data block"
    if nzone == 0:
        return "no zone types"
    zones = start + ntime * (size + 1)
    if any(k >= nzone for k in data[start + ntime * size : zones]):
        return "a transition names a zone type that does not exist"
    if any(data[zones + 6 * i + 5] >= nchar for i in range(nzone)):
        return "an abbreviation index is out of range"
    return _Layout(header, zones, nzone, zones + 6 * nzone, nchar, end)


def _block_size(counts: tuple[int, ...], size: int) -> int:
    """Bytes of one data block: transitions and their types, zone types, abbreviations,
    leap seconds, standard/wall and UT/local indicators."""
    isut, isstd, leap, ntime, nzone, nchar = counts
    return ntime * (size + 1) + nzone * 6 + nchar + leap * (size + 4) + isstd + isut
