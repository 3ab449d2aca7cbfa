"""The node's local time zone, found as rqlite finds it: by Go's rules, once at start.

rqlite (>= 8.33) rewrites ``'now'`` to the Julian day of ``time.Now()`` taken in the
process's *local* zone (``command/sql/processor.go``, ``julianDay``: ``t.Year()``,
``t.Hour()`` ... with no conversion to UTC), so the node does too (:class:`LocalZone`,
read by :mod:`.sql.rewrite` through the node's clock). Which zone is local is decided
once, when the process starts, by Go's ``initLocal`` (``time/zoneinfo_unix.go``) and
``loadLocation`` (``time/zoneinfo_read.go``), not by the C library's rules:

- ``TZ`` unset: the file ``/etc/localtime``; UTC if it does not load;
- ``TZ`` empty: UTC. A leading ``:`` is dropped first (``TZ=":"`` is UTC too);
- ``TZ`` an absolute path: that file; UTC if it does not load;
- ``TZ=UTC``: UTC, no file read;
- any other ``TZ``: a name, looked up under each of :data:`ZONE_DIRS` in turn (Go's
  ``platformZoneSources``, NixOS's ``/etc/zoneinfo`` included); the first file that
  loads wins, UTC if none does. So a POSIX rule string (``XST-3``), a name with no file
  and a directory are all UTC.

"Loads": the file is read (at most 10 MiB, Go's ``maxFileSize``) and parsed as Go would
parse it (:mod:`.tzif`: Go's structural checks, then Python's
``zoneinfo.ZoneInfo.from_file``; never Python's own TZPATH search, never the ``tzdata``
package, never the C library). Not followed: Go's later sources for a name, the zone data
a program may embed (``time/tzdata``: rqlite does not) and ``$GOROOT/lib/time/
zoneinfo.zip`` of the machine that built the binary (absent where rqlite runs).

The zone only moves the rewritten ``'now'``; SQLite's own clock (``'now'`` evaluated at
apply time) stays UTC, as in rqlite.
"""

from __future__ import annotations

import logging
import os
import zoneinfo
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from .tzif import load

log = logging.getLogger(__name__)

#: where Go looks when ``TZ`` is unset
ETC_LOCALTIME = "/etc/localtime"
#: Go's ``platformZoneSources``, searched in this order for ``TZ=<name>``
ZONE_DIRS = (
    "/usr/share/zoneinfo/",
    "/usr/share/lib/zoneinfo/",
    "/usr/lib/locale/TZ/",
    "/etc/zoneinfo",
)
#: Python's datetime covers years 1 to 9999; later times are taken 400 Gregorian years
#: earlier (the calendar, so every POSIX rule, repeats), earlier ones at the first second
_FIRST = int(datetime(1, 1, 2, tzinfo=UTC).timestamp())
_LAST = int(datetime(9999, 12, 30, tzinfo=UTC).timestamp())
_400_YEARS = 146097 * 86400


class LocalZone:
    """The zone the node's rewritten ``'now'`` is local to.

    ``name`` is what the zone is called (``UTC``, ``Europe/Berlin``, a path, ``Local``
    for ``/etc/localtime`` as Go names it); ``why`` how it was chosen, for the log.
    :meth:`offset` is the hot path: the offset is cached for one Unix second (offsets
    change only at whole seconds), so ``zoneinfo`` is asked at most once a second.
    """

    def __init__(self, name: str, why: str, zone: zoneinfo.ZoneInfo | None = None) -> None:
        self.name = name
        self.why = why
        self._zone = zone
        self._cached = (None, 0)  # (unix second, its offset): one tuple, swapped whole

    @classmethod
    def utc(cls, why: str = "UTC") -> LocalZone:
        return cls("UTC", why)

    @property
    def is_utc(self) -> bool:
        return self._zone is None

    def offset(self, unix_second: int) -> int:
        """Seconds to add to UTC for local time at ``unix_second``."""
        if self._zone is None:
            return 0
        second, off = self._cached
        if second == unix_second:
            return off
        off = self._lookup(unix_second)[0]
        self._cached = (unix_second, off)
        return off

    def _lookup(self, unix_second: int) -> tuple[int, str]:
        """(offset, abbreviation) at ``unix_second``, from ``zoneinfo``."""
        assert self._zone is not None
        t = unix_second
        if t > _LAST:
            t -= ((t - _LAST) // _400_YEARS + 1) * _400_YEARS
        try:
            local = datetime.fromtimestamp(max(t, _FIRST), self._zone)
            delta = local.utcoffset()
        except (ValueError, OverflowError) as exc:  # a footer rule Python cannot apply
            kept = self._cached[1]
            log.warning("zone %s at %d: %s; keeping offset %+d s", self.name, t, exc, kept)
            return kept, "?"
        return (int(delta.total_seconds()) if delta is not None else 0), local.tzname() or ""

    def describe(self, now: float) -> str:
        """The node's first log line about it: ``local time zone Europe/Berlin
        (TZ=Europe/Berlin: /usr/share/zoneinfo/Europe/Berlin), offset +3600 s (CET) now``."""
        if self._zone is None:
            return f"local time zone UTC ({self.why}), offset +0 s now"
        off, abbr = self._lookup(int(now // 1))
        return f"local time zone {self.name} ({self.why}), offset {off:+d} s ({abbr}) now"


def resolve(
    environ: Mapping[str, str] | None = None,
    *,
    localtime: str = ETC_LOCALTIME,
    zone_dirs: Sequence[str] = ZONE_DIRS,
) -> LocalZone:
    """The local zone of a process with ``environ`` (default: this one's), by Go's rules
    (see the module docstring); ``localtime`` and ``zone_dirs`` stand for the paths Go
    uses, for tests."""
    env = os.environ if environ is None else environ
    if "TZ" not in env:
        zone, problem = load(localtime)
        if zone is not None:
            return LocalZone("Local", f"TZ unset: {localtime}{_target(localtime)}", zone)
        return LocalZone.utc(f"TZ unset and {problem}: Go falls back to UTC")
    raw = env["TZ"]
    tz = raw[1:] if raw.startswith(":") else raw
    if not tz:
        return LocalZone.utc(f"TZ={raw!r}")
    if tz.startswith("/"):
        zone, problem = load(tz)
        if zone is not None:
            name = "Local" if tz == ETC_LOCALTIME else tz
            return LocalZone(name, f"TZ={raw}", zone)
        return LocalZone.utc(f"TZ={raw!r}: {problem}: Go falls back to UTC")
    if tz == "UTC":
        return LocalZone.utc(f"TZ={raw}")
    problems = []
    for source in zone_dirs:
        path = f"{source.rstrip('/')}/{tz}" if source else tz  # Go: source + "/" + name
        zone, problem = load(path)
        if zone is not None:
            return LocalZone(tz, f"TZ={raw}: {path}", zone)
        if not problem.endswith("No such file or directory"):
            problems.append(problem)
    where = "; ".join(problems) or f"no such file under {', '.join(zone_dirs)}"
    return LocalZone.utc(f"TZ={raw!r} names no loadable zone file ({where}): Go falls back to UTC")


def _target(path: str) -> str:
    """`` -> <where a symlink points>``, or nothing."""
    try:
        return f" -> {os.readlink(path)}" if os.path.islink(path) else ""
    except OSError:
        return ""
