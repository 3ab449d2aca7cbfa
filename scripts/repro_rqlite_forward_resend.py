#!/usr/bin/env python3
"""Show rqlite v10 applying a forwarded write twice when the leader's answer is lost.

A follower forwards a write to the leader over rqlite's cluster service (the Raft port,
connections whose first byte is ``2``). From v10.0.0 its cluster client sends a command
whose exchange failed once more, on a new connection, though the HTTP API asks for no
retries (``cluster/client.go`` ``retry``: ``effectiveRetries := max(1, maxRetries)``). A
command carries no request id: when the leader applied the first send and only its
answer was lost, it applies the second too. v8 and v9 send once and answer the error.

This script starts three nodes on loopback, each advertising its Raft address through a
small TCP relay of its own (so the followers reach the leader through it), creates a
table on the leader, tells the leader's relay to drop the next answer the leader sends on
a cluster-service connection (the connection is closed instead), and sends one

    INSERT INTO repro_resend(v) VALUES ('once')

to a follower. It prints the follower's answer and the rows the leader holds. The nodes:

- ``--rqlited PATH``: your rqlited binary (v8 or later: ``-bootstrap-expect 3``);
- ``--image IMAGE`` (e.g. ``rqlite/rqlite:10.2.7``): the image, three containers on the
  host's network (``--network host``); it is not pulled: without a Docker engine or the
  image the script skips, saying so in one line;
- by default: this repository's embedded node (``python -m harness.node``), following
  ``--version`` (default 10.2.7); its followers forward over HTTP, so the relays sit in
  front of the HTTP addresses the nodes give each other.

Standard library only (the default mode needs this repository). Usage::

    python3 scripts/repro_rqlite_forward_resend.py --rqlited ~/rqlite/rqlited
    python3 scripts/repro_rqlite_forward_resend.py --image rqlite/rqlite:10.2.7

Exit status: 1 the write was applied twice (seen), 0 once (not seen), 2 the script could
not run (the reason on stderr), 3 skipped (no binary, no Docker engine or image).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXIT_NOT_SEEN, EXIT_SEEN, EXIT_ERROR, EXIT_SKIPPED = 0, 1, 2, 3
#: rqlite's connection multiplexer: the first byte of a cluster-service connection
CLUSTER_HEADER = 2
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ReproError(RuntimeError):
    """The script cannot go on; the message says why."""


class Skipped(ReproError):
    """What the chosen mode needs is not at hand."""


def http(url: str, body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
    """POST ``body`` as JSON (GET when None); (status, decoded answer or text)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    req.add_header("Content-Type", "application/json")
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace").strip()
    except (urllib.error.URLError, OSError) as e:
        raise ReproError(f"{url}: {e}") from None
    try:
        return status, json.loads(raw or b"null")
    except ValueError:
        return status, raw.decode(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Relay:
    """Relays a loopback port to ``target``; :meth:`lose_next` drops the next answer on a
    connection the relay counts as forwarding (``forwarding(first_byte)``) and closes it."""

    def __init__(self, target: int, forwarding: Callable[[int], bool]) -> None:
        self.target = target
        self.forwarding = forwarding
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.port = self.srv.getsockname()[1]
        self.armed = False
        self.lost = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def lose_next(self) -> None:
        with self.lock:
            self.armed = True

    def close(self) -> None:
        self.srv.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.srv.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target), timeout=5.0)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            kind: dict[str, bool] = {}
            threading.Thread(target=self._up, args=(client, server, kind), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, kind), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, kind: dict[str, bool]) -> None:
        """Client to server; the first byte tells what the connection carries."""
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                if "fwd" not in kind:
                    kind["fwd"] = self.forwarding(data[0])
                server.sendall(data)
        _close(client, server)

    def _down(self, server: socket.socket, client: socket.socket, kind: dict[str, bool]) -> None:
        """Server to client; the armed answer is dropped and the connection closed."""
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                with self.lock:
                    lose = self.armed and kind.get("fwd", False)
                    self.armed = self.armed and not lose
                if lose:
                    self.lost.set()
                    break
                client.sendall(data)
        _close(client, server)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)  # wakes the other pump at once
        with contextlib.suppress(OSError):
            s.close()


class Cluster:
    """Three nodes on loopback, each reached by the others through its own relay."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.http = [free_port() for _ in range(3)]
        self.inner = [free_port() for _ in range(3)]  # Raft (rqlited) or HTTP (embedded)
        self.raft = [free_port() for _ in range(3)]
        self.embedded = not (args.rqlited or args.image)
        if self.embedded:  # the relays stand in front of the HTTP addresses
            self.relays = [Relay(p, lambda b: True) for p in self.http]
        else:  # in front of the Raft ports; only cluster-service connections lose
            self.relays = [Relay(p, lambda b: b == CLUSTER_HEADER) for p in self.inner]
        self.procs: list[subprocess.Popen[bytes]] = []
        self.containers: list[str] = []

    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}" for p in self.http]

    def argv(self, i: int) -> list[str]:
        """Node ``i``'s flags (rqlited's, or the embedded node's)."""
        if self.embedded:
            argv = ["--node-id", f"n{i + 1}", "--http-addr", f"127.0.0.1:{self.http[i]}"]
            argv += ["--raft-addr", f"127.0.0.1:{self.raft[i]}", "--data-dir"]
            argv += [str(self.work / f"n{i + 1}"), "--rqlite-version", self.args.version]
            for j in range(3):
                if j != i:
                    relay = f"127.0.0.1:{self.relays[j].port}"
                    argv += ["--peer", f"n{j + 1},127.0.0.1:{self.raft[j]},{relay}"]
            return argv
        joins = ",".join(f"127.0.0.1:{r.port}" for r in self.relays)
        argv = ["-node-id", f"n{i + 1}", "-http-addr", f"127.0.0.1:{self.http[i]}"]
        argv += ["-http-adv-addr", f"127.0.0.1:{self.http[i]}"]
        argv += ["-raft-addr", f"127.0.0.1:{self.inner[i]}"]
        argv += ["-raft-adv-addr", f"127.0.0.1:{self.relays[i].port}"]
        return [*argv, "-bootstrap-expect", "3", "-join", joins]

    def start(self) -> None:
        if self.args.image:
            check_image(self.args.image)
            for i in range(3):
                cid = docker("run", "-d", "--network", "host", self.args.image, *self.argv(i))
                self.containers.append(cid)
            return
        env = dict(os.environ)
        for i in range(3):
            if self.embedded:
                env["PYTHONPATH"] = str(REPO)
                cmd = [sys.executable, "-m", "harness.node", *self.argv(i)]
            else:
                cmd = [self.args.rqlited, *self.argv(i), str(self.work / f"n{i + 1}")]
            log = open(self.work / f"n{i + 1}.log", "ab")  # noqa: SIM115 (the child owns it)
            self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=log))
            log.close()

    def died(self) -> str | None:
        for i, proc in enumerate(self.procs):
            if proc.poll() is not None:
                tail = (self.work / f"n{i + 1}.log").read_text(errors="replace")[-1500:]
                return f"node n{i + 1} exited with status {proc.returncode}; its log ends:\n{tail}"
        for cid in self.containers:
            if docker("inspect", "--format", "{{.State.Running}}", cid) != "true":
                return (
                    f"a container exited; its log ends:\n{docker('logs', cid, both=True)[-1500:]}"
                )
        return None

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for cid in self.containers:
            subprocess.run(["docker", "rm", "-f", "-v", cid], capture_output=True, timeout=60)
        for relay in self.relays:
            relay.close()

    def leader(self, timeout: float = 60.0) -> int:
        """The index of the node every node names as leader, once all are ready."""
        deadline = time.monotonic() + timeout
        while True:
            problem = self.died()
            if problem:
                raise ReproError(problem)
            with contextlib.suppress(ReproError):
                named = {self._leader_of(u) for u in self.urls()}
                own = [self._raft_of(u) for u in self.urls()]
                if len(named) == 1 and None not in named and named <= set(own):
                    return own.index(named.pop())
            if time.monotonic() > deadline:
                raise ReproError(f"no leader every node names within {timeout:g} s")
            time.sleep(0.2)

    @staticmethod
    def _leader_of(url: str) -> str | None:
        status, _ = http(f"{url}/readyz", timeout=2.0)
        if status != 200:
            return None
        return http(f"{url}/status", timeout=2.0)[1]["store"]["leader"]["addr"] or None

    @staticmethod
    def _raft_of(url: str) -> str:
        return http(f"{url}/status", timeout=2.0)[1]["store"]["addr"]


def docker(*args: str, timeout: float = 60.0, both: bool = False) -> str:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise ReproError(f"docker {args[0]}: {(proc.stderr or proc.stdout).strip()[:300]}")
    return (proc.stdout + proc.stderr if both else proc.stdout).strip()


def check_image(image: str) -> None:
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


def count(url: str) -> int:
    status, answer = http(f"{url}/db/query?level=strong", ["SELECT count(*) FROM repro_resend"])
    result = (answer.get("results") or [{}])[0] if isinstance(answer, dict) else {}
    if status != 200 or "values" not in result:
        raise ReproError(f"counting the rows: HTTP {status} {answer}")
    return int(result["values"][0][0])


def run(args: argparse.Namespace, work: Path) -> int:
    """Start the cluster, lose one answer, print; 1 if the write was applied twice."""
    if args.rqlited and not (Path(args.rqlited).is_file() or shutil.which(args.rqlited)):
        raise Skipped(f"no rqlited binary at {args.rqlited!r}")
    if args.rqlited:
        args.rqlited = shutil.which(args.rqlited) or args.rqlited
    if not (args.rqlited or args.image) and not (REPO / "harness" / "node").is_dir():
        raise ReproError("the embedded node needs this repository: pass --rqlited or --image")
    cluster = Cluster(args, work)
    try:
        cluster.start()
        lead = cluster.leader()
        urls = cluster.urls()
        follower = urls[(lead + 1) % 3]
        version = http(f"{urls[lead]}/status")[1].get("build", {}).get("version", "unknown")
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}: rqlite {version}")
        print(f"  leader {urls[lead]}, the write sent to the follower {follower}")
        http(
            f"{urls[lead]}/db/execute", [["CREATE TABLE repro_resend (id INTEGER PRIMARY KEY, v)"]]
        )
        cluster.relays[lead].lose_next()
        insert = [["INSERT INTO repro_resend(v) VALUES ('once')"]]
        status, answer = http(f"{follower}/db/execute?timeout={args.timeout}", insert)
        if not cluster.relays[lead].lost.is_set():
            raise ReproError("the relay lost no answer: the write was not forwarded through it")
        rows = count(urls[lead])
    finally:
        cluster.stop()
    print(f"  the follower answered: HTTP {status} {json.dumps(answer)}")
    print(f"  rows on the leader: {rows}")
    if rows >= 2:
        print("\nverdict: SEEN, one INSERT whose answer was lost was applied twice")
        return EXIT_SEEN
    print("\nverdict: applied once (not seen)")
    return EXIT_NOT_SEEN


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--rqlited", metavar="PATH", help="run this rqlited binary")
    mode.add_argument("--image", metavar="IMAGE", help="run this Docker image (not pulled)")
    p.add_argument("--version", default="10.2.7", help="the embedded node's rqlite version")
    p.add_argument("--timeout", default="10s", help="the write's ?timeout (default 10s)")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="repro-forward-resend-"))
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


if __name__ == "__main__":
    sys.exit(main())
