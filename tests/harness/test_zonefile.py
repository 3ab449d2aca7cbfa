"""harness/zonefile.py: the TZif files it writes read back as asked, with Python's
``zoneinfo`` and with the C library's ``zdump -v``; :func:`write` keeps the inode."""

from __future__ import annotations

import io
import os
import re
import shutil
import struct
import subprocess
import zoneinfo
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness import zonefile
from harness.zonefile import Transition, ZoneFileError

T = 1_800_000_000  # 2027-01-15 08:00:00 UTC
ZDUMP = shutil.which("zdump")
_ZDUMP_LINE = re.compile(
    r"\s(?P<ut>\w{3} \w{3} +\d+ \d\d:\d\d:\d\d -?\d+) UT = .* (?P<abbr>\S+) "
    r"isdst=(?P<dst>\d) gmtoff=(?P<off>-?\d+)$"
)


def _offsets(data: bytes, *times: int) -> list[tuple[int, str, bool]]:
    zi = zoneinfo.ZoneInfo.from_file(io.BytesIO(data))
    out = []
    for t in times:
        d = datetime.fromtimestamp(t, zi)
        out.append((int(d.utcoffset().total_seconds()), d.tzname(), bool(d.dst())))
    return out


def _zdump(data: bytes, tmp_path: Path, years: str = "1800,2200") -> list[tuple[int, int, int]]:
    """``zdump -v -c years`` of the zone: (unix time, gmtoff, isdst) of each line it prints
    around a transition."""
    if ZDUMP is None:
        pytest.skip("zdump is not installed (Debian: libc-bin)")
    path = tmp_path / "zone.tzif"
    path.write_bytes(data)
    text = subprocess.run(
        [ZDUMP, "-v", "-c", years, str(path)], capture_output=True, text=True, check=True
    ).stdout
    rows = []
    for line in text.splitlines():
        m = _ZDUMP_LINE.search(line)
        if m:
            ut = datetime.strptime(" ".join(m["ut"].split()), "%a %b %d %H:%M:%S %Y")
            rows.append((int(ut.replace(tzinfo=UTC).timestamp()), int(m["off"]), int(m["dst"])))
    return rows


def test_a_fixed_zone_has_one_offset_for_all_time(tmp_path: Path) -> None:
    data = zonefile.fixed(19800)
    assert _offsets(data, -(10**10), 0, T, 10**10) == [(19800, "+0530", False)] * 4
    assert _zdump(data, tmp_path) == []  # no transition at all
    assert data.endswith(b"\n<+0530>-5:30\n")
    named = zonefile.fixed(-18000, "EST")
    assert _offsets(named, T) == [(-18000, "EST", False)] and named.endswith(b"\nEST5\n")


def test_a_dst_jump_moves_the_offset_at_its_second(tmp_path: Path) -> None:
    data = zonefile.dst_jump(T, 3600, abbr="CET", dst_abbr="CEST")
    assert _offsets(data, 0, T - 1, T, T + 10**8) == [
        (3600, "CET", False),
        (3600, "CET", False),
        (7200, "CEST", True),
        (7200, "CEST", True),
    ]
    assert _zdump(data, tmp_path) == [(T - 1, 3600, 0), (T, 7200, 1)]
    back = zonefile.dst_jump(T, 7200, -3600)  # a fall-back: standard time again
    assert _offsets(back, T - 1, T) == [(7200, "+02", False), (3600, "+01", False)]
    assert _zdump(back, tmp_path) == [(T - 1, 7200, 0), (T, 3600, 0)]


def test_transitions_outside_32_bits_and_the_footer(tmp_path: Path) -> None:
    early, late = -3_000_000_000, 3_000_000_000  # 1874 and 2065: only the 64-bit block
    steps = [(early, -3600), (T, 3600), Transition(T + 60, 5400, abbr="XST"), (late, -1800)]
    data = zonefile.build(0, steps)
    assert [o for o, _, _ in _offsets(data, early - 1, early, T - 1, T, T + 59, T + 60)] == [
        0, -3600, -3600, 3600, 3600, 5400,
    ]  # fmt: skip
    assert _offsets(data, late, late + 10**9) == [(-1800, "-0030", False)] * 2  # the footer
    assert data.endswith(b"\n<-0030>0:30\n")
    rows = _zdump(data, tmp_path)
    assert [(t, off) for t, off, _ in rows] == [
        (early - 1, 0), (early, -3600), (T - 1, -3600), (T, 3600),
        (T + 59, 3600), (T + 60, 5400), (late - 1, 5400), (late, -1800),
    ]  # fmt: skip
    # the 32-bit block holds the two transitions that fit, the 64-bit block all four
    v1_count = struct.unpack(">6l", data[20:44])[3]
    assert data[:5] == b"TZif2" and v1_count == 2


def test_bad_zones_are_refused_naming_the_problem() -> None:
    with pytest.raises(ZoneFileError, match="transition 1 is at 5, not after transition 0"):
        zonefile.build(0, [(5, 0), (5, 3600)])
    with pytest.raises(ZoneFileError, match="initial_offset 90000 s is outside"):
        zonefile.fixed(90000)
    with pytest.raises(ZoneFileError, match="transition 0: time must be whole Unix seconds"):
        zonefile.build(0, [(1.5, 0)])  # type: ignore[list-item]
    with pytest.raises(ZoneFileError, match="transition 0 must be"):
        zonefile.build(0, [5])  # type: ignore[list-item]
    with pytest.raises(ZoneFileError, match="abbreviation is 3 to 16"):
        zonefile.fixed(0, "a b")
    with pytest.raises(ZoneFileError, match="footer must be one line"):
        zonefile.build(0, footer="A\nB")
    assert isinstance(ZoneFileError("x"), ValueError)


def test_write_keeps_the_inode(tmp_path: Path) -> None:
    path = tmp_path / "localtime"
    zonefile.write(path, zonefile.dst_jump(T, 3600, abbr="CET", dst_abbr="CEST"))
    inode = os.stat(path).st_ino
    short = zonefile.fixed(0, "UTC")
    zonefile.write(path, short)  # shorter than before: the rest is cut off
    assert os.stat(path).st_ino == inode and path.read_bytes() == short
    assert _offsets(path.read_bytes(), T) == [(0, "UTC", False)]
