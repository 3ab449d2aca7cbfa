"""One trial of a shrink: a ``python -m harness run`` child on a candidate scenario file.

The child runs in its own session, so a Ctrl-C at the terminal reaches only the shrink;
the shrink then sends the child SIGTERM (which a run handles like Ctrl-C, and which,
unlike SIGINT, a shell does not set to be ignored in background jobs) and waits for it
to tear its cluster down (bounded), so an interrupted shrink leaves no node behind.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..interrupts import Terminated
from ..store import RunStore

#: how long an interrupted child gets to stop its workload and cluster
TEARDOWN_WAIT = 120.0


@dataclass
class Trial:
    """A finished trial: the run's exit status, anomaly counts and folder."""

    candidate: int
    seed: int
    exit: int | None
    anomalies: dict[str, int] = field(default_factory=dict)
    reproduced: bool = False
    seconds: float = 0.0
    run_dir: str = ""
    reason: str | None = None


def reproduces(anomalies: dict[str, int], kinds: Sequence[str]) -> bool:
    """Whether a run's anomaly counts show one of the ``kinds`` sought."""
    return any(anomalies.get(k, 0) > 0 for k in kinds)


def run_argv(
    scenario: Path | str, seed: int, subject: str, engine_args: Sequence[str]
) -> list[str]:
    """The ``python -m harness run`` arguments of one trial (without ``--out``); a
    simulated run's (``engine_args`` starting with ``--sim``) are ``harness sim``'s."""
    if list(engine_args[:1]) == ["--sim"]:
        return [
            "python", "-m", "harness", "sim", str(scenario), "--seed", str(seed),
            "--subject", subject, *engine_args[1:],
        ]  # fmt: skip
    return [
        "python", "-m", "harness", "run", str(scenario), "--seed", str(seed),
        "--subject", subject, *engine_args,
    ]  # fmt: skip


def run_trial(
    candidate: int,
    scenario: Path,
    seed: int,
    subject: str,
    engine_args: Sequence[str],
    kinds: Sequence[str],
    out: Path,
    timeout: float,
    plots: bool = False,
) -> Trial:
    """Run one trial to its end and read its verdict (Ctrl-C: the child cleans up first)."""
    argv = run_argv(scenario, seed, subject, engine_args)
    argv = [sys.executable, *argv[1:], "--out", str(out), "--no-progress"]
    if not plots:
        argv.append("--no-plots")
    t = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
        reason = None
        if code == 2:
            lines = (err or "").strip().splitlines()
            reason = lines[-1] if lines else "the run failed"
    except subprocess.TimeoutExpired:
        _stop(proc)
        code, reason = 2, f"no result within {timeout:g} s (stopped)"
    except (KeyboardInterrupt, Terminated):
        _stop(proc)
        raise
    summary = RunStore(out).summary()
    anomalies = {k: v for k, v in (summary.get("anomalies") or {}).items() if v}
    if code == 3:
        reason = summary.get("inconclusive") or "inconclusive"
    return Trial(
        candidate=candidate,
        seed=seed,
        exit=code,
        anomalies=anomalies,
        reproduced=code == 1 and reproduces(anomalies, kinds),
        seconds=round(time.monotonic() - t, 1),
        run_dir=str(out),
        reason=reason,
    )


def _stop(proc: subprocess.Popen) -> None:
    """Ask the child to stop (SIGTERM: a run tears down as on Ctrl-C) and wait for its
    teardown; kill it if it hangs."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + TEARDOWN_WAIT
    while True:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
            return
        except (KeyboardInterrupt, Terminated):  # again: the teardown still has to finish
            print("shrink: still waiting for the trial to stop its cluster", file=sys.stderr)
        except subprocess.TimeoutExpired:
            break
    if proc.poll() is None:
        print(
            f"shrink: the trial did not stop within {TEARDOWN_WAIT:g} s of SIGTERM; killing it",
            file=sys.stderr,
        )
        proc.kill()
        proc.wait()
