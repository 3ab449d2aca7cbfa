"""A short sweep (the slow stage): rqueue valid over seeds of the scenarios with faults,
every mutant and the seed protocol caught on the first seeds of the scenario that
targets it (docs/simulation.md records the long sweeps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.sim.run import SimOptions, simulate

pytestmark = pytest.mark.slow

#: subject -> (the scenario that targets it, the anomaly it must show)
TARGETS = {
    "mutant-no-exclusivity": ("steady", "duplicate-group-lease"),
    "mutant-lifo": ("steady", "fifo-violation"),
    "mutant-ack-wrong-row": ("steady", "lost"),
    "mutant-subquery-now": ("steady", "replica-divergence"),
    "mutant-blob-text": ("blob-text", "corrupted"),
    "mutant-zone-blind": ("timezone", "duplicate-group-lease"),
    "mutant-no-idempotency": ("lost-replies", "duplicated"),
    "harness.subjects.mutants:EARLY_DEAD_LETTER": ("poison", "early-dead-letter"),
    "seed-reference": ("lease-expiry", "stale-ack-accepted"),
}


@pytest.mark.parametrize("subject", sorted(TARGETS))
def test_caught_on_each_of_the_first_seeds(tmp_path: Path, subject: str) -> None:
    scenario, anomaly = TARGETS[subject]
    for seed in (1, 2, 3):
        opts = SimOptions(scenario, seed, subject, out=tmp_path / str(seed), report=False)
        result = simulate(opts)
        assert result.exit_code == 1, (seed, result.anomalies)
        assert result.anomalies[anomaly] > 0, (seed, result.anomalies)


@pytest.mark.parametrize(
    "scenario", ["chaos", "leader-failover", "partition-leader", "lost-replies", "pause-leader"]
)
def test_rqueue_valid_over_seeds(tmp_path: Path, scenario: str) -> None:
    for seed in range(1, 6):
        opts = SimOptions(scenario, seed, out=tmp_path / str(seed), report=False)
        result = simulate(opts)
        assert result.exit_code == 0, (seed, result.anomalies)
