"""Worker processes as claimers: ``python -m rqueue worker`` itself, killed and restarted.

With ``workload.worker_processes`` the run starts that many ``python -m rqueue worker``
processes on the cluster, running the harness's handler and observer
(:mod:`harness.workload.in_worker`). Each reports every queue call over one Unix socket
of the run; :class:`WorkerPool` records them in the run's history (an invoke is recorded
before the worker may send its call, a completion when it arrives), one history process
per worker slot, a new one after an ``info`` (docs/history-format.md, "Worker processes").

Every ``worker_disrupt_every`` seconds (seeded) one live worker is SIGKILLed or
SIGTERMed (it then finishes or gives back its messages within ``worker_grace``), and a
new one takes its place. A killed worker's open calls stay open in the history (the
checker treats them as ``info``) and its leases lapse. :meth:`WorkerPool.stop` SIGTERMs
them all and waits for them to exit (SIGKILL past the bound).
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..scenario import WorkloadSpec
from .in_worker import PLAN_ENV, SOCKET_ENV
from .record import Ops, WorkloadError

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
#: seconds a worker process gets to connect and start claiming
START_BOUND = 30.0


class _Connection:
    """One worker process's report stream: its open calls and its slots' processes."""

    def __init__(self, pool: WorkerPool, sock: socket.socket) -> None:
        self.pool, self.sock = pool, sock
        self.ops: dict[int, tuple[Any, str, Any]] = {}
        self.processes: dict[int, int] = {}

    def serve(self) -> None:
        reader = self.sock.makefile("rb")
        try:
            for line in reader:
                self._handle(json.loads(line))
        except ConnectionResetError:
            pass  # a worker SIGKILLed mid-line: its open calls stay open (as info)
        except (OSError, ValueError) as exc:
            if not self.pool.closing:
                log.warning("a worker's report stream broke: %s", exc)
        finally:
            self.sock.close()

    def _handle(self, m: dict[str, Any]) -> None:
        ops = self.pool.ops
        if "i" in m:
            slot, f = int(m["slot"]), str(m["f"])
            process = self.processes.get(slot)
            if process is None:
                process = self.processes[slot] = ops.new_process()
            value = m["value"]
            if f == "claim":
                value = {**value, **ops.claim_extra}
            op = ops.start(process, f, value)
            self.ops[int(m["i"])] = (op, f, slot)
            self.sock.sendall(json.dumps({"i": m["i"]}).encode() + b"\n")
            return
        op, f, slot = self.ops.pop(int(m["c"]))
        kind = str(m["type"])
        ops.done(op, f, kind, m.get("value"), m.get("error"), m.get("refused") is True)
        if kind == "info":
            self.processes.pop(slot, None)  # retired: the slot goes on as a new process
        if f == "ack" and kind == "ok":
            self.pool.on_acked()


class WorkerPool:
    """``count`` worker processes on ``urls``, disrupted on a seeded schedule."""

    def __init__(
        self,
        spec: WorkloadSpec,
        urls: Sequence[str],
        ops: Ops,
        *,
        seed: int,
        timeout: float,
        on_acked: Callable[[], None],
    ) -> None:
        self.spec, self.urls, self.ops = spec, list(urls), ops
        self.seed, self.timeout, self.on_acked = seed, timeout, on_acked
        self.closing = False
        self.disruptions = {"SIGKILL": 0, "SIGTERM": 0}
        self._dir = Path(tempfile.mkdtemp(prefix="rqueue-workers-"))
        self._socket_path = str(self._dir / "report.sock")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self._socket_path)
        self._server.listen(64)
        self._procs: list[subprocess.Popen] = []
        self._retired: list[subprocess.Popen] = []
        self._started = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._connections = 0
        self._connected = threading.Condition(self._lock)

    # -- processes ----------------------------------------------------------------------
    def _command(self, k: int) -> list[str]:
        s = self.spec
        handler = "handle" if k % 2 == 0 else "handle_async"  # threads and tasks alike
        return [
            sys.executable, "-m", "rqueue", "worker", f"harness.workload.in_worker:{handler}",
            "--url", ",".join(self.urls),
            "--concurrency", str(s.worker_concurrency),
            "--visibility", str(s.visibility),
            "--grace", str(s.worker_grace),
            "--timeout", str(max(10.0, 3 * self.timeout)),
            "--request-timeout", str(self.timeout),
            "--worker-id", f"w{k}",
            "--observer", "harness.workload.in_worker:Reporter",
        ] + (["--max-deliveries", str(s.max_deliveries)] if s.max_deliveries else [])  # fmt: skip

    def _spawn(self) -> subprocess.Popen:
        k = self._started
        self._started += 1
        plan = {
            "work": list(self.spec.work),
            "fail": self.spec.nack_probability,
            "long": self.spec.extend_probability,
            "visibility": self.spec.visibility,
        }
        env = {
            **os.environ,
            SOCKET_ENV: self._socket_path,
            PLAN_ENV: json.dumps(plan),
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        }
        err = open(self._dir / f"w{k}.log", "wb")  # noqa: SIM115 (the child writes it)
        try:
            proc = subprocess.Popen(
                self._command(k), cwd=ROOT, env=env, stdout=err, stderr=subprocess.STDOUT
            )
        finally:
            err.close()
        proc.name = f"w{k}"  # type: ignore[attr-defined]
        self._procs.append(proc)
        return proc

    def start(self, count: int) -> None:
        """Start ``count`` workers and wait until each has connected (bounded)."""
        self._thread(self._accept, "worker-reports")
        with self._lock:
            for _ in range(count):
                self._spawn()
        deadline = time.monotonic() + START_BOUND
        problem = None
        with self._connected:
            while self._connections < count:
                left = deadline - time.monotonic()
                dead = [p.name for p in self._procs if p.poll() is not None]  # type: ignore[attr-defined]
                if dead or left <= 0:
                    problem = f"{dead} exited" if dead else f"not all connected in {START_BOUND:g}s"
                    break
                # woken by each connection; at least twice a second to see a worker that died
                self._connected.wait(min(left, 0.5))
        if problem is not None:
            tail = self._tail()
            self.stop(bound=10.0)
            raise WorkerPoolError(f"worker processes did not start: {problem}{tail}")
        if self.spec.worker_disrupt_every > 0:
            self._thread(self._disrupt, "worker-disruptions")

    def _thread(self, target: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def _accept(self) -> None:
        while not self.closing:
            try:
                sock, _ = self._server.accept()
            except OSError:
                return  # closed
            with self._connected:
                self._connections += 1
                self._connected.notify_all()
            self._thread(_Connection(self, sock).serve, "worker-report")

    def _disrupt(self) -> None:
        rng = random.Random(f"{self.seed}-worker-disruptions")
        while not self._stop.wait(self.spec.worker_disrupt_every * rng.uniform(0.5, 1.5)):
            with self._lock:
                live = [p for p in self._procs if p.poll() is None]
                if not live:
                    continue
                victim = rng.choice(live)
                how = rng.choice(("SIGKILL", "SIGTERM"))
                victim.send_signal(signal.SIGKILL if how == "SIGKILL" else signal.SIGTERM)
                self.disruptions[how] += 1
                self._procs.remove(victim)
                self._retired.append(victim)
                replacement = self._spawn()
            log.info(
                "%s sent to worker %s; %s takes its place",
                how,
                victim.name,  # type: ignore[attr-defined]
                replacement.name,  # type: ignore[attr-defined]
            )

    # -- stopping -----------------------------------------------------------------------
    def stop(self, bound: float | None = None) -> None:
        """SIGTERM every worker, wait for them (SIGKILL past ``bound``), close the socket.
        Once: a second call does nothing."""
        if self._stop.is_set():
            return
        self._stop.set()
        for t in self._threads:
            if t.name == "worker-disruptions":
                t.join(10)
        with self._lock:
            procs = self._procs + self._retired
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        bound = bound if bound is not None else self.spec.worker_grace + 3 * self.timeout + 10
        deadline = time.monotonic() + bound
        stuck = []
        for p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                stuck.append(p.name)  # type: ignore[attr-defined]
                p.kill()
                p.wait(10)
        self.closing = True
        self._server.close()
        for t in self._threads:
            t.join(10)
        failed = [
            f"{p.name} exit {p.returncode}"  # type: ignore[attr-defined]
            for p in procs
            if p.returncode not in (0, -signal.SIGKILL, -signal.SIGTERM)  # -TERM: while starting
        ]
        if not (stuck or failed):
            shutil.rmtree(self._dir, ignore_errors=True)  # else kept: the logs say why
        if stuck:
            raise WorkerPoolError(f"workers {stuck} did not exit {bound:g}s after SIGTERM")
        if failed:
            log.warning("worker processes ended badly: %s (logs in %s)", failed, self._dir)

    def _tail(self) -> str:
        for p in self._procs:
            path = self._dir / f"{p.name}.log"  # type: ignore[attr-defined]
            if p.poll() is not None and path.exists():
                lines = path.read_text(errors="replace").strip().splitlines()
                if lines:
                    return f": {p.name}: {lines[-1]}"  # type: ignore[attr-defined]
        return ""


class WorkerPoolError(WorkloadError):
    """The worker processes could not start or stop; the message says which and why."""
