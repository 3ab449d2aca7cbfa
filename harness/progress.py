"""What a run shows while it runs (one live line) and when it ends (a summary table).

On a terminal the line is redrawn in place by ``rich``; otherwise (CI logs, pipes) each
phase change and a periodic status line are printed as plain lines on stderr.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

Counts = Callable[[], "collections.Counter[tuple[str, str]]"]


class Progress:
    """A live status line: phase, elapsed/total, operations by outcome, current fault."""

    def __init__(
        self,
        title: str,
        total: float,
        counts: Counts,
        fault: Callable[[], str],
        *,
        console: Console | None = None,
        enabled: bool = True,
        plain_every: float = 10.0,
    ) -> None:
        self.title, self.total = title, total
        self.counts, self.fault = counts, fault
        self.console = console or Console(stderr=True)
        self.enabled = enabled
        self.phase = "starting"
        self.t0: float | None = None
        self._live: Live | None = None
        self._plain_every = plain_every
        self._last_plain = 0.0

    def line(self) -> Text:
        """The current status as one line of text."""
        elapsed = 0.0 if self.t0 is None else time.monotonic() - self.t0
        by_type: collections.Counter[str] = collections.Counter()
        for (_f, kind), n in self.counts().items():
            by_type[kind] += n
        t = Text()
        t.append(f"{self.title} ", style="bold")
        t.append(f"[{self.phase}] ", style="cyan")
        t.append(f"{min(elapsed, self.total):5.1f}/{self.total:.0f}s  ")
        t.append(f"ok {by_type['ok']}", style="green")
        t.append("  ")
        t.append(f"fail {by_type['fail']}", style="yellow")
        t.append("  ")
        t.append(f"info {by_type['info']}", style="magenta")
        t.append(f"  fault: {self.fault()}", style="red" if self.fault() != "none" else "dim")
        return t

    def __rich__(self) -> Text:
        return self.line()

    def start(self) -> None:
        if not self.enabled:
            return
        if self.console.is_terminal:
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=True)
            self._live.start()

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        if phase == "workload":
            self.t0 = time.monotonic()
        if self.enabled and self._live is None:
            self.console.print(self.line(), soft_wrap=True)

    def note(self, text: str) -> None:
        """Print one line above the status line (on a terminal) or as a plain line."""
        if self.enabled:
            self.console.print(Text(text, style="yellow"), soft_wrap=True)

    def tick(self) -> None:
        """Print a plain status line now and then (when not on a terminal)."""
        if not self.enabled or self._live is not None:
            return
        now = time.monotonic()
        if now - self._last_plain >= self._plain_every:
            self._last_plain = now
            self.console.print(self.line(), soft_wrap=True)

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __enter__(self) -> Progress:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def summary_table(summary: dict[str, Any]) -> Table:
    """The end-of-run table from the runner's summary dict."""
    table = Table(title=f"run {summary.get('scenario')} — {summary.get('verdict')}")
    table.add_column("what", style="bold")
    table.add_column("value")
    for key in ("subject", "engine", "backend", "nodes", "seed", "duration"):
        if key in summary:
            table.add_row(key, str(summary[key]))
    ops: dict[str, dict[str, int]] = summary.get("ops", {})
    for f in sorted(ops):
        by = ops[f]
        table.add_row(
            f"op {f}", "  ".join(f"{k} {by[k]}" for k in ("ok", "fail", "info") if k in by)
        )
    for line in summary.get("refused") or []:  # refused on purpose, in the queue's words
        table.add_row("refused", str(line), style="cyan")
    faults = summary.get("faults") or {}
    table.add_row("faults", ", ".join(f"{k}×{v}" for k, v in faults.items()) or "none")
    disrupted = summary.get("worker_disruptions") or {}
    if disrupted:
        table.add_row("workers disrupted", ", ".join(f"{k}×{v}" for k, v in disrupted.items()))
    for why in summary.get("dropped") or []:
        table.add_row("fault dropped", str(why), style="yellow")
    for window in summary.get("skipped_faults") or []:
        table.add_row("fault left out", str(window), style="yellow")
    if "drain" in summary:
        table.add_row("drain", str(summary["drain"]))
    if "replicas" in summary:
        table.add_row("replicas", str(summary["replicas"]))
    anomalies = summary.get("anomalies") or {}
    found = {k: v for k, v in anomalies.items() if v}
    table.add_row(
        "anomalies",
        ", ".join(f"{k} {v}" for k, v in found.items()) or "none",
        style=("red" if found else "green"),
    )
    for err in summary.get("nemesis_errors") or []:
        table.add_row("fault failed", str(err), style="yellow")
    if summary.get("inconclusive"):
        table.add_row("inconclusive", str(summary["inconclusive"]), style="yellow")
    for key in ("warning", "error", "exit"):
        if summary.get(key) is not None:
            table.add_row(key, str(summary[key]))
    table.add_row("run folder", str(summary.get("run_dir")))
    return table
