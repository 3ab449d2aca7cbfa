"""The poison workload end to end: the real queue passes, a queue that dead-letters one
claim early is caught."""

from __future__ import annotations

from pathlib import Path

import pytest

POISON_STEADY = """
description = "poison messages, no faults"
nodes = 3
duration = 8.0

[workload]
visibility = 2.0
max_deliveries = 3
poison = 0.2
"""


@pytest.mark.slow
def test_poison_without_faults(run_scenario, tmp_path: Path) -> None:
    path = tmp_path / "poison-steady.toml"
    path.write_text(POISON_STEADY)
    result = run_scenario(str(path), plots=False)
    assert result.exit_code == 0, (result.reason, result.summary)
    stats = result.check["stats"]
    assert stats["dead_lettered"] > 0 and stats["ops"]["read-dead-letters"]["ok"] == 1


@pytest.mark.slow
def test_dead_lettering_one_claim_early_is_caught(run_scenario, tmp_path: Path) -> None:
    path = tmp_path / "poison-steady.toml"
    path.write_text(POISON_STEADY)
    result = run_scenario(
        str(path), subject="harness.subjects.mutants:EARLY_DEAD_LETTER", plots=False
    )
    assert result.exit_code == 1, (result.reason, result.summary)
    assert result.check["anomalies"]["early-dead-letter"]["count"] > 0
