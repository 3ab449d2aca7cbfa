"""How fast the simulation runs: CPU seconds of one core per simulated run.

    python benchmarks/sim_bench.py [--scenario steady] [--seeds 1-3] [--subject rqueue]
                                   [--time SECONDS] [--profile]

Runs each seed in this process, one after the other (no report), and prints per seed
the virtual seconds simulated (the scenario, plus electing, opening, draining and
settling), the CPU seconds this process spent (``time.process_time``: what one core
did, whatever else the machine runs), their ratio, the loop's events per CPU second and
the history's length; then the mean. ``--profile``: the functions that took the most
time, under cProfile, for the first seed. The target (issue 44) is a 60 s scenario in
2 CPU seconds or less.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.sim.run import SimOptions, simulate  # noqa: E402
from harness.sim.sweep import parse_seeds  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", default="steady")
    p.add_argument("--seeds", default="1-3")
    p.add_argument("--subject", default="rqueue")
    p.add_argument("--time", type=float)
    p.add_argument("--profile", action="store_true")
    a = p.parse_args()
    cpu_per_run = []
    print(f"{'seed':>5} {'virtual s':>10} {'cpu s':>7} {'x real':>7} {'events/s':>9} {'ops':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for i, seed in enumerate(parse_seeds(a.seeds)):
            opts = SimOptions(a.scenario, seed, a.subject, a.time, Path(tmp) / str(seed), False)
            t = time.process_time()
            if a.profile and i == 0:
                prof = cProfile.Profile()
                result = prof.runcall(simulate, opts)
                pstats.Stats(prof).sort_stats("tottime").print_stats(25)
            else:
                result = simulate(opts)
            cpu = time.process_time() - t
            cpu_per_run.append(cpu)
            ops = sum(1 for _ in (opts.out / "history.jsonl").open()) // 2  # type: ignore[operator]
            print(
                f"{seed:>5} {result.virtual:>10.1f} {cpu:>7.2f} {result.virtual / cpu:>7.1f} "
                f"{result.events / cpu:>9.0f} {ops:>6}"
            )
    print(f"mean: {statistics.mean(cpu_per_run):.2f} CPU s per run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
