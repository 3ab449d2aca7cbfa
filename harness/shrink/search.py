"""The search: greedy reduction of a failing run, each step judged on several seeds.

From the current smallest scenario that reproduces, the reductions of
:mod:`harness.shrink.steps` are tried biggest saving first. A reduction is kept when it
reproduces the anomaly in a majority of ``tries`` runs (the original seed first, then
seeds no earlier step used; stopping as soon as the majority is reached or out of
reach), so one lucky run does not make a reduction; after a kept one the list starts
again from the new scenario. The search ends when no reduction is kept or the budget
would be overrun. Then the smallest kept scenario is run ``confirm`` times on fresh
seeds; if it reproduces in fewer than most of them, the kept scenario before it is
confirmed instead, and so on. The rate reported is that of the scenario chosen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EXIT_ANOMALIES, EXIT_VALID
from . import steps
from .trials import Trial, run_trial

#: seconds a run needs beyond its workload (cluster up, heal, drain, check), a first guess
OVERHEAD_GUESS = 15.0
#: fresh seeds for the confirmation start here above the original seed
CONFIRM_SEED_OFFSET = 1000


@dataclass
class Step:
    """One candidate tried: the change, the scenario, its tries and the decision."""

    index: int
    change: str
    scenario: str
    file: str
    duration: float = 0.0
    tries: list[Trial] = field(default_factory=list)
    kept: bool = False

    @property
    def reproduced(self) -> int:
        return sum(t.reproduced for t in self.tries)


@dataclass
class Options:
    """What to shrink and how hard to try."""

    data: dict[str, Any]
    subject: str
    engine_args: tuple[str, ...]
    kinds: tuple[str, ...]
    seed: int
    out: Path
    budget: float
    tries: int = 3
    confirm: int = 5
    #: the run folder shrunk (for the record)
    source: str = ""


def trial_seeds(seed: int, index: int, tries: int) -> list[int]:
    """The run's own seed first, then seeds no earlier step used (so that a run of lucky
    seeds cannot carry the whole search)."""
    first_other = seed + 1 + (index - 1) * (tries - 1)
    return [seed, *range(first_other, first_other + tries - 1)]


def majority(tries: int) -> int:
    """Reproductions needed out of ``tries`` for a reduction to be kept."""
    return tries // 2 + 1


def decided(reproduced: int, failed: int, tries: int) -> bool | None:
    """True/False once ``tries`` can no longer change the outcome, else None."""
    need = majority(tries)
    if reproduced >= need:
        return True
    if failed > tries - need:
        return False
    return None


class Search:
    """A shrink in progress; ``say`` prints progress (one line per trial)."""

    def __init__(self, opts: Options, say: Callable[[str], None] = print) -> None:
        self.opts, self.say = opts, say
        self.steps: list[Step] = []
        self.best = opts.data
        self.best_step: Step | None = None
        self.confirmation: Step | None = None
        self.started = time.monotonic()
        self.overhead = OVERHEAD_GUESS
        self.stopped: str | None = None
        self.trial_count = 0
        #: the scenario of every kept step, by step index
        self.kept_data: dict[int, dict[str, Any]] = {}
        (opts.out / "candidates").mkdir(parents=True, exist_ok=True)
        (opts.out / "trials").mkdir(parents=True, exist_ok=True)

    # -- budget --------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def estimate(self, data: dict[str, Any]) -> float:
        """Seconds one run of ``data`` should take (its workload + the overhead seen)."""
        return data["duration"] + self.overhead

    def affordable(self, data: dict[str, Any]) -> bool:
        """Whether a trial of ``data`` still leaves room for the confirmation runs."""
        reserve = self.opts.confirm * self.estimate(self.best)
        return self.elapsed() + self.estimate(data) + reserve <= self.opts.budget

    # -- trials --------------------------------------------------------------------------
    def _file(self, step: Step, data: dict[str, Any]) -> Path:
        name = f"{self.base_name}-c{step.index:02d}"
        path = self.opts.out / "candidates" / f"{name}.toml"
        data = {**data, "name": name}
        path.write_text(steps.to_toml(data, f"shrink candidate {step.index}: {step.change}"))
        return path

    @property
    def base_name(self) -> str:
        return str(self.opts.data.get("name") or "scenario")

    def _trial(self, step: Step, seed: int, label: str) -> Trial:
        self.trial_count += 1
        out = self.opts.out / "trials" / f"{self.trial_count:03d}-c{step.index:02d}-s{seed}"
        self.say(
            f"[{self.elapsed():5.0f}/{self.opts.budget:g} s] {label}, seed {seed} ... ",
        )
        t = run_trial(
            step.index,
            Path(step.file),
            seed,
            self.opts.subject,
            self.opts.engine_args,
            self.opts.kinds,
            out,
            timeout=step.duration * 4 + 180,
        )
        step.tries.append(t)
        self.overhead = max(self.overhead * 0.5, t.seconds - step.duration)
        found = ", ".join(f"{k} {v}" for k, v in sorted(t.anomalies.items())) or "none"
        checked = t.exit in (EXIT_VALID, EXIT_ANOMALIES)
        verdict = "REPRODUCED" if t.reproduced else ("not reproduced" if checked else "")
        extra = f" ({t.reason})" if t.reason else ""
        self.say(f"{verdict or f'exit {t.exit}'}: {found}{extra} [{t.seconds:g} s]\n")
        return t

    def _judge(self, step: Step, data: dict[str, Any]) -> bool:
        """Run ``step``'s tries until the majority rule decides; True if it reproduces."""
        seeds = trial_seeds(self.opts.seed, step.index, self.opts.tries)
        for i, seed in enumerate(seeds):
            if i and not self.affordable(data):
                self.stopped = "the budget ran out during a step (not kept)"
                return False
            self._trial(step, seed, f"#{step.index} {step.change}")
            verdict = decided(step.reproduced, len(step.tries) - step.reproduced, len(seeds))
            if verdict is not None:
                return verdict
        return False

    def _step(self, change: str, data: dict[str, Any]) -> Step:
        step = Step(len(self.steps), change, steps.describe(data), "", data["duration"])
        step.file = str(self._file(step, data))
        self.steps.append(step)
        return step

    # -- the search ----------------------------------------------------------------------
    def run(self) -> None:
        """Search until no reduction is kept, the budget is spent, or Ctrl-C."""
        self.best_step = self._step("the original run's scenario", self.best)
        self.best_step.kept = True
        self.kept_data[self.best_step.index] = self.best
        self.say(f"shrinking: {self.best_step.scenario}\n")
        tried: set[str] = set()
        improved = True
        while improved and self.stopped is None:
            improved = False
            for cand in steps.candidates(self.best):
                key = steps.to_toml(cand.data)
                if key in tried:
                    continue
                if not self.affordable(cand.data):
                    self.stopped = "budget: no time left for another step and the confirmation"
                    break
                tried.add(key)
                step = self._step(cand.change, cand.data)
                if self._judge(step, cand.data):
                    step.kept = True
                    self.best, self.best_step = cand.data, step
                    self.kept_data[step.index] = cand.data
                    self.say(f"  kept: {step.scenario}\n")
                    improved = True
                    break
                if self.stopped:
                    break
        if self.stopped is None:
            self.stopped = "no smaller scenario reproduces (every reduction tried)"

    def confirm(self) -> Step | None:
        """Run the smallest kept scenario ``confirm`` times on fresh seeds; if it fails to
        reproduce in a majority of them, fall back to the kept scenario before it, and so
        on: the result is the smallest scenario that reproduces in most runs (or, if none
        does, the last one tried, with its rate)."""
        chain = [s for s in self.steps if s.kept]
        need = majority(self.opts.confirm)
        first = self.opts.seed + CONFIRM_SEED_OFFSET
        for n, kept in enumerate(reversed(chain)):
            larger_left = n < len(chain) - 1
            data = self.kept_data[kept.index]
            step = self._step(f"confirmation of #{kept.index}", data)
            self.confirmation, self.best, self.best_step = step, data, kept
            for i, seed in enumerate(range(first, first + self.opts.confirm)):
                if (i or n) and self.elapsed() + self.estimate(data) > self.opts.budget:
                    self.stopped = f"{self.stopped}; the budget cut the confirmation short"
                    return step
                self._trial(step, seed, f"confirm #{kept.index}")
                if larger_left and len(step.tries) - step.reproduced > self.opts.confirm - need:
                    break  # cannot reach the majority: try the larger scenario before it
            if step.reproduced >= need or not larger_left:
                return step
            self.say(f"  #{kept.index} reproduced in under {need} of {self.opts.confirm}\n")
        return self.confirmation

    def replayed(self) -> Step | None:
        """A simulated run's result: the smallest kept scenario, which reproduced on the
        run's own seed, and a seed replays exactly (the original is replayed once when no
        reduction was kept); no confirmation on other seeds is needed."""
        step = self.best_step
        if step is not None and not step.tries:
            self._trial(step, self.opts.seed, "replay of the original")
        self.confirmation = step
        return step

    def final_file(self) -> Path:
        """The smallest scenario as a file named after the original plus ``-min``."""
        name = f"{self.base_name}-min"
        path = self.opts.out / f"{name}.toml"
        header = (
            f"shrunk from {self.base_name} by `python -m harness shrink` "
            f"(subject {self.opts.subject}; seeks {', '.join(self.opts.kinds)})"
        )
        path.write_text(steps.to_toml({**self.best, "name": name}, header))
        return path

    def reproducing_seed(self) -> int:
        """A seed the smallest scenario reproduced with (the original seed if none did)."""
        for step in (self.confirmation, self.best_step):
            for t in step.tries if step else []:
                if t.reproduced:
                    return t.seed
        return self.opts.seed

    def to_json(self) -> dict[str, Any]:
        conf = self.confirmation
        return {
            "scenario": self.base_name,
            "source": self.opts.source,
            "subject": self.opts.subject,
            "engine_args": list(self.opts.engine_args),
            "kinds": list(self.opts.kinds),
            "seed": self.opts.seed,
            "budget": self.opts.budget,
            "tries": self.opts.tries,
            "elapsed": round(self.elapsed(), 1),
            "stopped": self.stopped,
            "original": steps.describe(self.opts.data),
            "minimal": steps.describe(self.best),
            "minimal_data": self.best,
            "confirmed": None if conf is None else [conf.reproduced, len(conf.tries)],
            "steps": [
                {**asdict(s), "reproduced": s.reproduced, "tries": [asdict(t) for t in s.tries]}
                for s in self.steps
            ],
        }


def table(steps_: Sequence[Step], tries: int) -> str:
    """The search as Markdown: one row per step, then one per trial."""
    lines = [
        "| # | change | scenario | reproduced | kept |",
        "|---:|---|---|---|---|",
    ]
    for s in steps_:
        n = len(s.tries)
        shown = f"{s.reproduced}/{n}" if n else "-"
        lines.append(
            f"| {s.index} | {s.change} | {s.scenario} | {shown} | {'yes' if s.kept else ''} |"
        )
    lines += ["", "| step | seed | exit | anomalies | reproduced | s | run folder |"]
    lines.append("|---:|---:|---:|---|---|---:|---|")
    for s in steps_:
        for t in s.tries:
            found = ", ".join(f"{k} {v}" for k, v in sorted(t.anomalies.items())) or "none"
            if t.reason:
                found += f" ({t.reason})"
            lines.append(
                f"| {s.index} | {t.seed} | {t.exit} | {found} | {'yes' if t.reproduced else 'no'}"
                f" | {t.seconds:g} | {Path(t.run_dir).name} |"
            )
    return "\n".join(lines) + "\n"
