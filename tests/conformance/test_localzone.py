"""The node's local time zone (harness/node/localzone.py, tzif.py) is found by Go's rules
(``time/zoneinfo_unix.go`` ``initLocal``) and the rewritten ``'now'`` is read in it, as
rqlite's ``julianDay(time.Now())`` is. Pure: the zone files are made here (or copied from
the machine's zone database) into directories that stand for ``/etc/localtime`` and Go's
zone directories."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness import zonefile
from harness.node import tzif
from harness.node.clock import OffsetClock
from harness.node.localzone import ZONE_DIRS, LocalZone, resolve
from harness.node.sql.rewrite import julian_day, julian_day_epoch, process, rqlite_process

SYSTEM_ZONES = Path("/usr/share/zoneinfo")
WINTER = int(datetime(2026, 1, 15, 12, tzinfo=UTC).timestamp())
SUMMER = int(datetime(2026, 7, 15, 12, tzinfo=UTC).timestamp())
T = 1_800_000_000  # 2027-01-15 08:00:00 UTC
#: a zone that is neither of the machine's nor UTC: no test passes by luck in UTC
XST = zonefile.fixed(10800, "XST")


class Machine:
    """A stand-in for the paths Go reads: ``etc/localtime`` and four zone directories."""

    def __init__(self, root: Path) -> None:
        self.localtime = root / "etc" / "localtime"
        self.dirs = [str(root / d.strip("/")) + ("/" if d.endswith("/") else "") for d in ZONE_DIRS]
        self.localtime.parent.mkdir(parents=True)
        for d in self.dirs:
            Path(d).mkdir(parents=True)

    def zone(self, name: str, data: bytes, where: int = 0) -> Path:
        path = Path(self.dirs[where]) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path

    def system_zone(self, name: str) -> None:
        src = SYSTEM_ZONES / name
        if not src.is_file():
            pytest.skip(f"{src} is not on this machine")
        self.zone(name, src.read_bytes())

    def resolve(self, environ: dict[str, str]) -> LocalZone:
        return resolve(environ, localtime=str(self.localtime), zone_dirs=self.dirs)


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


@pytest.mark.parametrize(
    ("name", "winter", "summer"),
    [
        ("Europe/Berlin", 3600, 7200),
        ("America/New_York", -18000, -14400),
        ("Asia/Kolkata", 19800, 19800),
        ("Etc/UTC", 0, 0),
    ],
)
def test_a_zone_by_name_is_read_from_the_zone_directories(
    machine: Machine, name: str, winter: int, summer: int
) -> None:
    machine.system_zone(name)
    zone = machine.resolve({"TZ": name})
    assert (zone.name, zone.offset(WINTER), zone.offset(SUMMER)) == (name, winter, summer)
    assert f"TZ={name}: {machine.dirs[0]}{name}" in zone.why
    assert machine.resolve({"TZ": f":{name}"}).offset(SUMMER) == summer  # ':' dropped


def test_utc_and_an_empty_tz_read_no_file(machine: Machine) -> None:
    machine.zone("UTC", XST)  # Go never looks: TZ=UTC is UTC without a file
    zonefile.write(machine.localtime, XST)
    for tz in ("UTC", ":UTC", "", ":"):
        zone = machine.resolve({"TZ": tz})
        assert zone.is_utc and zone.offset(SUMMER) == 0, tz
    assert machine.resolve({"TZ": "XST"}).is_utc  # no file of that name


def test_tz_unset_reads_etc_localtime(machine: Machine) -> None:
    assert machine.resolve({}).is_utc  # no /etc/localtime: UTC
    zonefile.write(machine.localtime, XST)
    zone = machine.resolve({})
    assert (zone.name, zone.offset(SUMMER)) == ("Local", 10800)
    assert zone.why == f"TZ unset: {machine.localtime}"
    link = machine.localtime.parent / "link"
    link.symlink_to(machine.localtime)
    assert " -> " in resolve({}, localtime=str(link)).why


def test_an_absolute_path_is_that_file(machine: Machine, tmp_path: Path) -> None:
    path = tmp_path / "made.tzif"
    zonefile.write(path, zonefile.dst_jump(T, 3600))
    for tz in (str(path), f":{path}"):
        zone = machine.resolve({"TZ": tz})
        assert (zone.name, zone.offset(T - 1), zone.offset(T)) == (str(path), 3600, 7200)
    assert machine.resolve({"TZ": str(tmp_path / "missing")}).is_utc


def test_what_go_does_not_read_as_a_zone_is_utc(machine: Machine, tmp_path: Path) -> None:
    # a POSIX rule string: the C library would read UTC+3 from it, Go looks for a file
    zone = machine.resolve({"TZ": "XST-3"})
    assert zone.is_utc and "names no loadable zone file" in zone.why
    assert machine.resolve({"TZ": "Nowhere/Land"}).is_utc  # a name with no file
    (Path(machine.dirs[0]) / "Europe").mkdir()
    assert machine.resolve({"TZ": "Europe"}).is_utc  # a directory
    bad = tmp_path / "bad.tzif"
    bad.write_bytes(b"TZif2 this is not a zone file")
    zone = machine.resolve({"TZ": str(bad)})
    assert zone.is_utc and "not a zone file" in zone.why
    machine.zone("Bad/Zone", XST[:50])
    assert machine.resolve({"TZ": "Bad/Zone"}).is_utc


def test_the_first_zone_directory_whose_file_loads_wins(machine: Machine) -> None:
    machine.zone("Some/Zone", zonefile.fixed(3600), where=1)
    machine.zone("Some/Zone", zonefile.fixed(7200), where=3)
    assert machine.resolve({"TZ": "Some/Zone"}).offset(T) == 3600
    machine.zone("Some/Zone", b"TZif not really", where=1)  # malformed: Go tries the next
    assert machine.resolve({"TZ": "Some/Zone"}).offset(T) == 7200


def test_files_go_takes_and_files_it_refuses() -> None:
    good = zonefile.dst_jump(T, 3600)
    # no final newline after the footer: Go ignores the footer (Python's reader alone
    # would loop for ever); a second header with a bad magic: Go skips it unread
    second = good.index(b"TZif2", 1)
    for data in (good.rstrip(b"\n"), good[:second] + b"XXXX" + good[second + 4 :]):
        zone, problem = tzif.parse(data)
        assert zone is not None, problem
        assert datetime.fromtimestamp(T, zone).utcoffset().total_seconds() == 7200
    assert tzif.parse(zonefile.build(0, [(T, 3600)], footer="not a rule"))[0] is not None
    refused = {
        b"": "no TZif magic",
        good[:4] + b"9" + good[5:]: "version",
        good[:60]: "ends inside",
    }
    for data, why in refused.items():
        assert why in (tzif.tzif_problem(data) or ""), data[:10]
    hour, day = (s.to_bytes(4, "big", signed=True) for s in (3600, 90000))
    zone, problem = tzif.parse(zonefile.build(0, [(T, 3600)]).replace(hour, day))
    assert zone is None and "24 h or more" in problem  # Go would use it: Python cannot


def test_the_offset_changes_at_the_transition_second() -> None:
    zone = LocalZone("X", "test", tzif.parse(zonefile.dst_jump(T, 3600))[0])
    assert [zone.offset(t) for t in (T - 1, T, T - 1, T + 1, T)] == [3600, 7200, 3600, 7200, 7200]
    far = T + 400 * 365 * 86400 * 30  # past Python's year 9999: the rule repeats
    assert zone.offset(far) == 7200 and zone.offset(-(10**12)) == 3600


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=4_102_444_800_000_000))
def test_the_rewritten_julian_day_is_rqlites_of_local_time(micros: int) -> None:
    """Go's ``julianDay(time.Now())``: the calendar fields of the local time."""
    for name in ("Europe/Berlin", "America/New_York"):
        zone = resolve({"TZ": name})
        if zone.is_utc:
            pytest.skip(f"{name} is not in this machine's zone database")
        local = datetime.fromtimestamp(micros / 1e6, zoneinfo.ZoneInfo(name))
        local = local.replace(microsecond=micros % 1_000_000)
        assert julian_day_epoch(micros / 1e6, zone.offset) == pytest.approx(
            julian_day(local), abs=2e-11
        )


def test_process_shifts_now_by_the_offset_on_every_version() -> None:
    zone = LocalZone("XST", "test", tzif.parse(XST)[0])
    clock = OffsetClock(zone=zone)
    now = 1_700_000_000.0
    for version in ("8.36.18", "9.4.5", "10.2.7"):
        utc = process("SELECT julianday('now')", now=lambda: now, version=version).sql
        local = process(
            "SELECT julianday('now')",
            now=lambda: now,
            utc_offset=clock.zone.offset,
            version=version,
        ).sql
        assert utc == f"SELECT julianday({julian_day_epoch(now):f})"
        assert local == f"SELECT julianday({julian_day_epoch(now + 10800):f})"
        bound = process(
            "INSERT INTO t(a) VALUES (julianday('now'))",
            now=lambda: now,
            utc_offset=zone.offset,
            positional=0,
            version=version,
        )
        assert bound.bound == (float(f"{julian_day_epoch(now + 10800):f}"),)
    at = datetime.fromtimestamp(now, tzif.parse(XST)[0])  # rqlite's clock: a local time
    assert rqlite_process("SELECT julianday('now')", at, 1) == local


def test_the_log_line_says_which_zone_and_why(machine: Machine) -> None:
    zonefile.write(machine.localtime, XST)
    assert machine.resolve({}).describe(T) == (
        f"local time zone Local (TZ unset: {machine.localtime}), offset +10800 s (XST) now"
    )
    assert machine.resolve({"TZ": ""}).describe(T) == "local time zone UTC (TZ=''), offset +0 s now"
    assert "Go falls back to UTC" in machine.resolve({"TZ": "XST-3"}).describe(T)
