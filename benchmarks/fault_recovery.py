"""Time from each fault's start to the first successful claim, per fault, over run folders.

    python benchmarks/fault_recovery.py results/partition-leader-*/
    python benchmarks/fault_recovery.py --run partition-leader --runs 3 --time 30

For every fault of every run it prints: the fault's start (the nemesis invoke), when it
was in place (the nemesis completion), and the recovery: the completion time of the
first claim that returned a message and was *invoked after the fault was in place*,
minus the fault's start. Claims invoked before the fault bit (they often complete in
the few ms it takes to apply iptables rules) say nothing about availability under it.
The checker's own figure (``check.json`` ``stats.availability``) is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.history import read_history  # noqa: E402


def recoveries(run_dir: Path) -> list[dict]:
    """One row per fault start: start, in place, recovery (None = no lease after it)."""
    events = read_history(run_dir / "history.jsonl")
    starts: list[dict] = []
    open_nemesis: dict[str, dict] = {}
    for ev in events:
        if ev["process"] != "nemesis":
            continue
        value = ev.get("value") or {}
        if ev["type"] == "invoke":
            open_nemesis[ev["f"]] = ev
            continue
        inv = open_nemesis.pop(ev["f"], ev)
        if isinstance(value, dict) and value.get("phase") == "start":
            starts.append(
                {"kind": value.get("fault"), "start": inv["time"], "in_place": ev["time"]}
            )
    claims: list[tuple[float, float]] = []
    invoked: dict[object, float] = {}
    for ev in events:
        if ev["process"] == "nemesis" or ev["f"] != "claim":
            continue
        if ev["type"] == "invoke":
            invoked[ev["process"]] = ev["time"]
        elif ev["type"] == "ok" and ev.get("value"):
            claims.append((invoked[ev["process"]], ev["time"]))
    for row in starts:
        after = [done for inv, done in claims if inv >= row["in_place"]]
        row["recovery"] = min(after) - row["start"] if after else None
    checker = json.loads((run_dir / "check.json").read_text())["stats"].get("availability", [])
    for row, stat in zip(starts, checker, strict=False):
        row["checker"] = stat.get("recovery")
    return starts


def run_scenario(scenario: str, seconds: float, out: Path) -> Path:
    argv = [sys.executable, "-m", "harness", "run", scenario, "--time", str(seconds)]
    argv += ["--no-progress", "--no-plots", "--out", str(out)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{scenario} run failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs_dirs", nargs="*", type=Path, help="run folders to analyse")
    p.add_argument("--run", metavar="SCENARIO", help="run this scenario first (root for netns)")
    p.add_argument("--runs", type=int, default=1, help="how many runs of --run")
    p.add_argument("--time", type=float, default=30.0, help="--time of each run")
    p.add_argument("--out", type=Path, default=ROOT / "results", help="where runs go")
    a = p.parse_args(argv)
    dirs = list(a.runs_dirs)
    if a.run:
        import time

        stamp = time.strftime("%Y%m%dT%H%M%S")
        for i in range(a.runs):
            dirs.append(run_scenario(a.run, a.time, a.out / f"recovery-{a.run}-{stamp}-{i}"))
    if not dirs:
        p.error("give run folders or --run SCENARIO")
    print(f"{'run':<48} {'fault':<18} {'start':>7} {'in place':>8} {'recovery':>9} {'checker':>8}")
    worst = 0.0
    for d in dirs:
        valid = json.loads((d / "check.json").read_text()).get("valid")
        for row in recoveries(d):
            rec = row["recovery"]
            worst = max(worst, rec if rec is not None else float("inf"))
            rec_s = "never" if rec is None else f"{rec:.2f}"
            chk = row.get("checker")
            chk_s = "-" if chk is None else f"{chk:.2f}"
            print(
                f"{d.name[-48:]:<48} {row['kind']!s:<18} {row['start']:>7.2f} "
                f"{row['in_place']:>8.2f} {rec_s:>9} {chk_s:>8}"
            )
        print(f"  valid: {valid}")
    print(f"worst recovery: {worst:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
