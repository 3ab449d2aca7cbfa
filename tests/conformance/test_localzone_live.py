"""A real node process reads its rewritten ``'now'`` in the local zone ``TZ`` names, as
rqlite does, while SQLite's own ``'now'`` stays UTC: the difference between a rewritten
``julianday('now')`` and ``julianday()`` (no argument: never rewritten, evaluated when
the entry is applied) is the zone's offset, on ``/db/execute``, ``/db/request`` and
strong ``/db/query``, and it moves when the zone's offset does."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness
from harness import zonefile
from harness.cluster.local.processes import MARKER_ENV
from harness.cluster.ports import free_ports
from tests.cluster.helpers import wait_until

from ._http import call, execute, request

#: rewritten minus unrewritten, in seconds: the six-decimal Julian day (±43 ms) and the
#: time from rewriting to applying separate them besides the offset
SLACK = 2.0
#: what the write, the request and the strong query read
PAIR = "julianday('now'), julianday()"


@contextlib.contextmanager
def node(directory: Path, tz: str | None, version: str | None = None) -> Iterator[str]:
    """One embedded node started with ``TZ=tz`` (None: unset), stopped afterwards."""
    http, raft = free_ports(2)
    directory.mkdir(parents=True, exist_ok=True)
    root = str(Path(harness.__file__).resolve().parent.parent)
    env = {k: v for k, v in os.environ.items() if k != "TZ"}
    env.update({"PYTHONPATH": root, MARKER_ENV: str(directory)})
    if tz is not None:
        env["TZ"] = tz
    argv = [sys.executable, "-m", "harness.node", "--node-id", "n1"]
    argv += ["--http-addr", f"127.0.0.1:{http}", "--raft-addr", f"127.0.0.1:{raft}"]
    argv += ["--data-dir", str(directory / "data")]
    argv += ["--rqlite-version", version] if version else []
    url = f"http://127.0.0.1:{http}"
    with open(directory / "node.log", "ab") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=log)
    try:

        def ready() -> bool:
            assert proc.poll() is None, (directory / "node.log").read_text()[-2000:]
            try:
                return call("GET", url, "/readyz", timeout=1.0).status == 200
            except OSError:
                return False

        wait_until(ready, 30.0, f"the node in {directory} to be ready")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10.0)


def offsets(url: str, table: str, row: int) -> dict[str, float]:
    """Rewritten minus unrewritten 'now', in seconds, on each endpoint that rewrites: a
    write (``row`` of ``table``, read back), a request and a strong query."""
    execute(url, [[f"INSERT INTO {table}(id, a, b) VALUES (?, {PAIR})", row]])
    req = request(url, [f"SELECT {PAIR}"])["results"][0]["values"][0]
    strong = call("POST", url, "/db/query?level=strong", [f"SELECT {PAIR}"])
    written = call(
        "POST", url, "/db/query?level=none", [[f"SELECT a, b FROM {table} WHERE id = ?", row]]
    )
    got = {
        "execute": written.json["results"][0]["values"][0],
        "request": req,
        "strong query": strong.json["results"][0]["values"][0],
    }
    return {k: round((a - b) * 86400.0, 3) for k, (a, b) in got.items()}


def near(seen: dict[str, float], offset: int) -> bool:
    return all(abs(v - offset) < SLACK for v in seen.values())


@pytest.mark.parametrize("version", ["10.2.7", "9.4.5", "8.36.18"])
def test_every_endpoint_rewrites_now_in_local_time(tmp_path: Path, version: str) -> None:
    path = tmp_path / "zone.tzif"
    zonefile.write(path, zonefile.fixed(19800, "XST"))  # +05:30, no daylight saving
    with node(tmp_path / "n", str(path), version) as url:
        execute(url, ["CREATE TABLE t (id INTEGER PRIMARY KEY, a REAL, b REAL)"])
        seen = offsets(url, "t", 1)
    assert near(seen, 19800), seen
    log = (tmp_path / "n" / "node.log").read_text()
    assert f"local time zone {path} (TZ={path}), offset +19800 s (XST) now" in log


def test_tz_utc_and_a_posix_rule_string_leave_now_in_utc(tmp_path: Path) -> None:
    for i, tz in enumerate(("UTC", "XST-3")):
        with node(tmp_path / f"n{i}", tz) as url:
            execute(url, ["CREATE TABLE t (id INTEGER PRIMARY KEY, a REAL, b REAL)"])
            seen = offsets(url, "t", 1)
        assert near(seen, 0), (tz, seen)


def test_the_offset_moves_at_the_zones_transition(tmp_path: Path) -> None:
    """A zone at +01:00 that jumps to +02:00 a few seconds after the node starts: writes
    before and after the jump carry the old and the new offset."""
    path = tmp_path / "zone.tzif"
    lead = 6.0
    for attempt in range(3):  # a slow start can miss the moment: then a later one
        jump = int(time.time() + lead)
        zonefile.write(path, zonefile.dst_jump(jump, 3600, abbr="XST", dst_abbr="XDT"))
        with node(tmp_path / f"n{attempt}", str(path)) as url:
            execute(url, ["CREATE TABLE t (id INTEGER PRIMARY KEY, a REAL, b REAL)"])
            started = time.time()
            before = offsets(url, "t", 1)
            if time.time() >= jump:
                lead *= 3
                continue  # the jump came while the rows were written: inconclusive
            wait_until(
                lambda jump=jump: time.time() >= jump,
                jump - time.time() + 5.0,
                f"the zone's transition at {jump}",
            )
            after = offsets(url, "t", 2)
        assert started < jump and near(before, 3600), before
        assert near(after, 7200), after
        return
    pytest.fail(f"the node never started {lead / 3:.0f} s before its zone's transition")
