#!/usr/bin/env python3
"""Show rqlite rewriting 'now' in the node's local time zone, not in UTC.

rqlite (>= 8.33) replaces ``'now'`` in time functions (``julianday('now')``,
``datetime('now')``, ...) with a literal on the node that receives a request: the Julian
day of Go's ``time.Now()``, whose calendar fields are those of the process's *local*
time zone (``command/sql/processor.go``, ``julianDay``). SQLite's own ``'now'``, which
rqlite leaves alone in ``julianday()`` (no argument), is UTC. On a node whose zone is not
UTC the two differ by the zone's offset.

This script starts one rqlite node in a zone it chooses, sends

1. one write:        ``INSERT ... VALUES (julianday('now'), julianday())`` (``/db/execute``,
                     read back from the node's own copy);
2. one strong read:  ``SELECT julianday('now'), julianday()`` (``/db/query?level=strong``);

and prints, for each, the rewritten value minus SQLite's own, in seconds. The node:

- ``--rqlited PATH``: your rqlited binary, started with ``TZ=<zone file>``;
- ``--image IMAGE`` (e.g. ``rqlite/rqlite:10.2.7``): the image, with the zone file mounted
  as the container's ``/etc/localtime`` (the image carries no zone data of its own, so
  ``TZ=<name>`` alone would leave it in UTC); it is not pulled: without a Docker engine or
  the image the script skips, saying so in one line;
- by default: this repository's embedded rqlite-compatible node (``python -m
  harness.node``), started with ``TZ=<zone file>``.

The zone is a file the script writes (a fixed offset, ``--offset`` seconds east of UTC,
default +05:30), or ``--tz NAME`` from this machine's ``/usr/share/zoneinfo``.

Standard library only (the default mode needs this repository). Usage::

    python3 scripts/repro_rqlite_now_localtime.py --rqlited ~/rqlite/rqlited
    python3 scripts/repro_rqlite_now_localtime.py --image rqlite/rqlite:10.2.7 --tz Europe/Berlin

Exit status: 1 the rewritten 'now' is not UTC (the behaviour was seen: the offset is
printed), 0 it is UTC (not seen), 2 the script could not run (the reason on stderr),
3 skipped (no Docker engine or image).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import zoneinfo
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SYSTEM_ZONES = Path("/usr/share/zoneinfo")
EXIT_NOT_SEEN, EXIT_SEEN, EXIT_ERROR, EXIT_SKIPPED = 0, 1, 2, 3
#: a rewritten 'now' is printed with six decimals of a day (±43 ms) and applied a moment
#: after it was read: a difference below this is UTC
SAME = 1.0
PAIR = "julianday('now'), julianday()"
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ReproError(RuntimeError):
    """The script cannot go on; the message says why."""


class Skipped(ReproError):
    """What the chosen mode needs is not at hand."""


def fixed_zone(utc_offset: int) -> bytes:
    """A TZif (version 2) file of one offset for all time, named as tzdata names zones
    known only by their offset (``+0530``), with its POSIX footer (``<+0530>-5:30``)."""
    sign = "-" if utc_offset < 0 else "+"
    h, rest = divmod(abs(utc_offset), 3600)
    m, s = divmod(rest, 60)
    name = f"{sign}{h:02d}" + (f"{m:02d}" if m or s else "") + (f"{s:02d}" if s else "")
    west_h, west_rest = divmod(abs(utc_offset), 3600)
    footer = ("-" if utc_offset > 0 else "") + str(west_h)
    if west_rest:
        footer += f":{west_rest // 60:02d}" + (f":{west_rest % 60:02d}" if west_rest % 60 else "")
    chars = name.encode() + b"\0"
    block = (
        b"TZif2" + b"\0" * 15 + struct.pack(">6l", 0, 0, 0, 0, 1, len(chars))
        + struct.pack(">lBB", utc_offset, 0, 0) + chars
    )  # fmt: skip
    return block + block + f"\n<{name}>{footer}\n".encode()


def http(url: str, body: Any = None, timeout: float = 10.0) -> Any:
    """POST ``body`` as JSON (GET when None); the decoded answer."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    req.add_header("Content-Type", "application/json")
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace").strip()
        raise ReproError(f"{url}: HTTP {e.code}: {text[:300]}") from None
    except (urllib.error.URLError, OSError) as e:
        raise ReproError(f"{url}: {e}") from None


def one_row(answer: Any, what: str) -> list[Any]:
    result = ((answer or {}).get("results") or [{}])[0]
    if result.get("error") or not result.get("values"):
        raise ReproError(f"{what}: {result.get('error') or 'no row'}")
    return result["values"][0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, alive: Any, timeout: float = 60.0) -> None:
    """Wait until the node answers ``/readyz``; ``alive()`` says why it cannot."""
    deadline = time.monotonic() + timeout
    while True:
        problem = alive()
        if problem:
            raise ReproError(problem)
        try:
            with _OPENER.open(f"{url}/readyz", timeout=2.0) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise ReproError(f"the node at {url} was not ready within {timeout:g} s")
        time.sleep(0.1)


@contextmanager
def process_node(
    argv: list[str], env: dict[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` (a node listening where the caller said) until the block ends."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _died(proc: subprocess.Popen, log: Path) -> str | None:
    if proc.poll() is None:
        return None
    tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
    return f"the node exited with status {proc.returncode}; its log ends:\n{tail}"


@contextmanager
def local_node(kind: str, binary: str | None, zone: Path, work: Path) -> Iterator[str]:
    """An rqlited (``binary``) or embedded node with ``TZ=<zone>``; yields its URL."""
    http_port, raft_port = free_port(), free_port()
    env = dict(os.environ, TZ=str(zone))
    log = work / "node.log"
    if kind == "rqlited":
        argv = [binary or "rqlited", "-node-id", "n1", "-http-addr", f"127.0.0.1:{http_port}"]
        argv += ["-raft-addr", f"127.0.0.1:{raft_port}", str(work / "data")]
    else:
        if not (REPO / "harness" / "node").is_dir():
            raise ReproError("the embedded node needs this repository: pass --rqlited or --image")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        argv = [sys.executable, "-m", "harness.node", "--node-id", "n1"]
        argv += ["--http-addr", f"127.0.0.1:{http_port}", "--raft-addr", f"127.0.0.1:{raft_port}"]
        argv += ["--data-dir", str(work / "data")]
    url = f"http://127.0.0.1:{http_port}"
    try:
        with process_node(argv, env, log) as proc:
            wait_ready(url, lambda: _died(proc, log))
            yield url
    except FileNotFoundError as e:
        raise ReproError(f"cannot start {argv[0]}: {e}") from None


def docker(*args: str, timeout: float = 60.0, both: bool = False) -> str:
    """``docker ARGS``' output (``both``: stderr too); raises naming the failure."""
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise ReproError(f"docker {args[0]}: {(proc.stderr or proc.stdout).strip()[:300]}")
    return (proc.stdout + proc.stderr if both else proc.stdout).strip()


@contextmanager
def image_node(image: str, zone: Path, env: list[str]) -> Iterator[str]:
    """A container of ``image`` with ``zone`` mounted as its ``/etc/localtime`` (and the
    ``KEY=VALUE`` settings ``env`` in its environment)."""
    if shutil.which("docker") is None:
        raise Skipped("no docker command on PATH")
    try:
        docker("info", "--format", "{{.ServerVersion}}", timeout=15)
    except (ReproError, subprocess.TimeoutExpired) as e:
        raise Skipped(f"no Docker engine at hand ({e})") from None
    try:
        docker("image", "inspect", image, timeout=15)
    except ReproError:
        raise Skipped(f"the image {image} is not here (docker pull {image})") from None
    zone.chmod(0o644)
    settings = [a for kv in env for a in ("-e", kv)]
    mount = f"{zone}:/etc/localtime:ro"
    cid = docker("run", "-d", "-p", "127.0.0.1::4001", "-v", mount, *settings, image)
    try:
        port = docker("port", cid, "4001/tcp").splitlines()[0].rsplit(":", 1)[1]
        url = f"http://127.0.0.1:{port}"

        def gone() -> str | None:
            state = docker("inspect", "--format", "{{.State.Running}}", cid)
            logs = docker("logs", cid, both=True)[-1500:]
            return None if state == "true" else f"the container exited; its log ends:\n{logs}"

        wait_ready(url, gone)
        yield url
    finally:
        # -v: with the container, the anonymous volume the image's VOLUME gave it
        subprocess.run(["docker", "rm", "-f", "-v", cid], capture_output=True, timeout=60)


def measure(url: str) -> dict[str, tuple[float, float]]:
    """(rewritten, SQLite's own) Julian days of one write and one strong read."""
    run = uuid.uuid4().hex[:12]
    http(f"{url}/db/execute", ["CREATE TABLE IF NOT EXISTS repro_tz (run TEXT, a REAL, b REAL)"])
    out = http(f"{url}/db/execute", [[f"INSERT INTO repro_tz(run, a, b) VALUES (?, {PAIR})", run]])
    if (out.get("results") or [{}])[0].get("error"):
        raise ReproError(f"the write failed: {out['results'][0]['error']}")
    row = one_row(
        http(f"{url}/db/query?level=none", [["SELECT a, b FROM repro_tz WHERE run = ?", run]]),
        "reading the write back",
    )
    strong = one_row(http(f"{url}/db/query?level=strong", [f"SELECT {PAIR}"]), "the strong read")
    return {
        "write (/db/execute)": (row[0], row[1]),
        "strong read (/db/query)": (strong[0], strong[1]),
    }


def zone_file(args: argparse.Namespace, work: Path) -> tuple[Path, str]:
    """The zone file the node runs in, and how to describe it."""
    path = work / "zone.tzif"
    if args.tz:
        src = SYSTEM_ZONES / args.tz
        if not src.is_file():
            raise ReproError(f"no zone {args.tz!r} in {SYSTEM_ZONES}")
        path.write_bytes(src.read_bytes())
        return path, args.tz
    if not -86399 <= args.offset <= 86399:
        raise ReproError(f"--offset must be within ±86399 s, got {args.offset}")
    path.write_bytes(fixed_zone(args.offset))
    return path, f"a fixed offset of {args.offset:+d} s"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--rqlited", metavar="PATH", help="run this rqlited binary")
    mode.add_argument("--image", metavar="IMAGE", help="run this Docker image (not pulled)")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --image: a setting of the container's environment (repeatable)",
    )
    zone = p.add_mutually_exclusive_group()
    zone.add_argument("--offset", type=int, default=19800, help="the zone's offset east of UTC, s")
    zone.add_argument("--tz", metavar="NAME", help="a zone of /usr/share/zoneinfo instead")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="repro-now-localtime-"))
    try:
        return run(args, work)
    except Skipped as e:
        print(f"skip: {e}")
        return EXIT_SKIPPED
    except ReproError as e:
        print(f"repro: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path) -> int:
    """Start the node, measure, print; 1 if the rewritten 'now' was not UTC."""
    zone, what = zone_file(args, work)
    expected = datetime.now(zoneinfo.ZoneInfo.from_file(io.BytesIO(zone.read_bytes())))
    offset = int(expected.utcoffset().total_seconds())  # type: ignore[union-attr]
    if args.image:
        node = image_node(args.image, zone, args.env)
        how = f"image {args.image}, the zone mounted as /etc/localtime"
    elif args.rqlited:
        node, how = local_node("rqlited", args.rqlited, zone, work), f"{args.rqlited}, TZ={zone}"
    else:
        node, how = local_node("embedded", None, zone, work), f"embedded node, TZ={zone}"
    with node as url:
        status = http(f"{url}/status") or {}
        version = (status.get("build") or {}).get("version", "unknown")
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}: rqlite {version}")
        print(f"  {how}")
        print(f"  zone: {what}, offset now {offset:+d} s ({expected.tzname()})\n")
        seen = measure(url)
    shifts = {}
    for label, (rewritten, own) in seen.items():
        shifts[label] = (rewritten - own) * 86400.0
        print(f"{label:<24} julianday('now') {rewritten!r:<20} julianday() {own!r}")
        print(f"{'':<24} rewritten minus SQLite's own: {shifts[label]:+.1f} s")
    local = [s for s in shifts.values() if abs(s) >= SAME]
    if not local:
        print("\nverdict: the rewritten 'now' is UTC, as SQLite's own (not seen)")
        return EXIT_NOT_SEEN
    print(
        f"\nverdict: SEEN, the rewritten 'now' is local time: {local[0]:+.0f} s from "
        f"SQLite's own UTC (the zone's offset {offset:+d} s)"
    )
    return EXIT_SEEN


if __name__ == "__main__":
    sys.exit(main())
