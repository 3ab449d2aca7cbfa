"""The ``kombu`` subject (rqueue's kombu transport through kombu channels) under the
leader-failover scenario: its history checked as rqueue's."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_kombu_subject_is_valid_under_leader_failover(run_scenario):
    result = run_scenario("leader-failover", time=20, subject="kombu", plots=False, seed=3)
    assert result.exit_code == 0, result.reason
    assert result.valid is True, result.check and result.check["anomalies"]
    stats = result.check["stats"]
    assert stats["acked"] > 50
    assert result.check["coverage"]["started_faults"] >= 1
